"""Fork servers that hold heavy packages already imported, for the jobs that import them.

Loaded by path by :mod:`sandbox_worker` (stdlib only). Every job runs in a fresh child, so a
package its code imports is imported again in each child (on the 2-core Intel Xeon
development machine: numpy about 50 ms, bs4 about 90 ms, pandas 270-500 ms), charged to the
job's first test. The
original grader runs every answer in one process and pays each import once per run. A job
whose code imports one of :data:`PRELOADABLE` therefore gets its child from a fork server
that imported those names already: a child of the fork server (see :mod:`sandbox_zygote`),
made on the first job that needs it, confined by the same layers, and, like the fork server,
never given a job. Its children are as fresh as any other: nothing one job does reaches the
next. Jobs that import none of them keep the fork server itself, whose memory (and so each
fork) stays small.

Which names a job imports is read from its text with a pattern, never by running it; a name
the pattern misses only means the child imports it itself. At most :data:`MAX_SERVERS` such
servers live per worker (the least recently used goes first); one that cannot be made in
time (``PRELOAD_LIMIT``) is not tried again, and one that dies is dropped: in both cases the
job's child comes from the fork server.
"""

import collections
import re

# third-party packages whose import takes tens to hundreds of milliseconds and writes no file.
# pandas starts two threads (pyarrow's) in its server: a forked child has none of them, and
# pyarrow and its allocator restart theirs after a fork (200 pandas jobs with pyarrow strings
# in a row all passed)
PRELOADABLE = frozenset(("numpy", "pandas", "scipy", "bs4", "sympy", "networkx", "sklearn"))
MAX_SERVERS = 2
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import\b|import[ \t]+([\w., \t]+))",
                     re.MULTILINE)


def preloadable_imports(code, allowed=PRELOADABLE):
    """The packages in ``allowed`` (sorted) that ``code``'s import statements name, a
    submodule counting as its package; an empty tuple when there are none. Packages only:
    a job naming made-up submodules must not be able to ask for ever new servers."""
    names = set()
    for match in _IMPORT.finditer(code):
        if match.group(1):
            candidates = [match.group(1)]
        else:  # ``import a.b as c, d``
            candidates = [part.split()[0] for part in match.group(2).split(",") if part.split()]
        for name in candidates:
            package = name.split(".")[0]
            if package in allowed:
                names.add(package)
    return tuple(sorted(names))


class PreloadServers:
    """The worker's fork servers with packages imported, by the names they imported."""

    def __init__(self, zygote, limit=MAX_SERVERS):
        self.zygote, self.limit = zygote, limit
        self.servers = collections.OrderedDict()  # names -> ZygoteClient, oldest use first
        self.failed = set()  # names whose server could not be made: not tried again

    def server_for(self, names, deadline):
        """The server holding ``names`` (made now if needed, by ``deadline``), or None: the
        job's child then comes from the fork server itself. Raises OSError when the fork
        server did not answer (the worker is then unusable)."""
        if not names or names in self.failed:
            return None
        server = self.servers.get(names)
        if server is not None:
            self.servers.move_to_end(names)
            return server
        server = self.zygote.start_server(names, deadline)
        if server is None:
            self.failed.add(names)
            return None
        self.servers[names] = server
        while len(self.servers) > self.limit:
            self.servers.popitem(last=False)[1].close()
        return server

    def drop(self, server):
        """Forget a server that stopped answering (it is killed)."""
        for names, held in list(self.servers.items()):
            if held is server:
                del self.servers[names]
                self.failed.add(names)
        server.close()

    def close(self):
        while self.servers:
            self.servers.popitem(last=False)[1].close()
