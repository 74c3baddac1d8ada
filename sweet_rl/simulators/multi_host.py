"""The HTTP human simulator spread over several OpenAI-compatible servers.

One 70B simulator server is often the bottleneck of a rollout, so ``--hostname`` may name
several (see :func:`parse_hosts`). Each dialogue stays on one server for its whole life: every
turn resends the whole conversation, and only the server that saw the previous turn holds its
prefix in cache. A server that dies is dropped and its dialogues move to the others, so a run
survives losing a node; it stops only when no server is left.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Hashable, List, Optional, Sequence, Set, Union
from urllib.parse import urlsplit

from sweet_rl.models.openai_compat import ChatClient, EndpointUnavailable
from sweet_rl.simulators.base import DialogueKeys, Simulator
from sweet_rl.types import ChatMessages, SimulatorReply

logger = logging.getLogger(__name__)

Hosts = Union[str, Sequence[str]]
_HOST_NAME = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]")
# ChatClient gives up on a 5xx by returning an error reply in this form, not by raising,
# because for a lone server one failing request should only end one dialogue.
_PERSISTENT_5XX = re.compile(r"HTTP 5\d\d after \d+ attempts")


# ----- parsing --hostname ------------------------------------------------------------------


def host_url(entry: str, port: Optional[int] = None) -> str:
    """The base URL for one ``host``, ``host:port`` or ``http(s)://...`` entry.

    An entry without its own port gets ``port``; a full URL is kept as written (as
    :func:`sweet_rl.models.openai_compat.base_url_from` does for a single host).
    """
    entry = entry.strip()
    if "://" in entry:
        parts = urlsplit(entry)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"bad simulator host {entry!r}: the URL must start with http:// "
                             "or https://")
        try:
            parts.port  # reading it is what checks it
        except ValueError as err:
            raise ValueError(f"bad simulator host {entry!r}: {err}") from None
        if not parts.hostname:
            raise ValueError(f"bad simulator host {entry!r}: the URL names no host")
        return entry.rstrip("/")
    if entry.startswith("["):  # [IPv6]:port; the colons inside the brackets are no port
        host, _, rest = entry.partition("]")
        host += "]"
    else:
        host, colon, rest = entry.partition(":")
        rest = colon + rest
    if not _HOST_NAME.fullmatch(host):
        raise ValueError(f"bad simulator host {entry!r}: expected host, host:port or an "
                         "http(s):// URL")
    if rest:
        own = rest[1:]
        if not rest.startswith(":") or not own.isdigit() or not 0 < int(own) < 65536:
            raise ValueError(f"bad simulator host {entry!r}: the port must be a number from 1 "
                             "to 65535")
        port = int(own)
    return f"http://{host}/v1" if port is None else f"http://{host}:{port}/v1"


def _hosts_in_file(path: str, port: Optional[int]) -> List[str]:
    if not os.path.isfile(path):
        raise ValueError(f"simulator host list {path!r} is not a file")
    urls = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            entry = line.split("#", 1)[0].strip()
            if not entry:
                continue
            try:
                urls.append(host_url(entry, port))
            except ValueError as err:
                raise ValueError(f"{path}, line {number}: {err}") from None
    if not urls:
        raise ValueError(f"simulator host list {path!r} names no host")
    return urls


def parse_hosts(hostname: Hosts, port: Optional[int] = None) -> List[str]:
    """Base URLs of the simulator servers that ``--hostname`` names, in the order given.

    ``hostname`` is one entry, a comma-separated string of them (``--hostname a,b``), a list
    or tuple, or ``@FILE`` / the path of an existing file with one
    entry per line (blank lines and ``#`` comments ignored). An entry is ``host``,
    ``host:port`` or a URL; ``port`` applies to entries without one. Raises ``ValueError``
    naming the bad entry (and the file and line), or a server listed twice.
    """
    items = [hostname] if isinstance(hostname, str) else list(hostname)
    urls: List[str] = []
    for item in items:
        for piece in str(item).split(","):
            piece = piece.strip()
            if not piece:
                raise ValueError(f"empty simulator host in {hostname!r}")
            if piece.startswith("@"):
                urls.extend(_hosts_in_file(piece[1:], port))
            elif "://" not in piece and os.path.isfile(piece):
                urls.extend(_hosts_in_file(piece, port))
            else:
                urls.append(host_url(piece, port))
    if not urls:
        raise ValueError("no simulator host given")
    twice = [url for url in urls if urls.count(url) > 1]
    if twice:  # two clients on one server would only skew the balance
        raise ValueError(f"simulator server {twice[0]} is listed twice in {hostname!r}")
    return urls


# ----- the simulator --------------------------------------------------------------------------


def _server_failed(err: BaseException) -> bool:
    """Whether an exception from a batch means the server, not our code, is broken."""
    import openai

    return isinstance(err, (EndpointUnavailable, openai.OpenAIError, OSError))


class MultiHostSimulator(Simulator):
    """Replies from ``model`` served at every URL of ``base_urls``, greedily.

    ``reply_batch(conversations, keys)`` sends each key's first request to the server with the
    fewest requests in flight (then the fewest dialogues so far) and its later ones to the
    same server; without keys, conversations go round-robin. The servers' shares of a batch go
    out at once. Retries stay ChatClient's; what survives them decides:

    * an :class:`EndpointUnavailable` (down, timing out, rate limiting, refusing the key) or
      another transport error takes the server out of rotation, with one warning naming its
      URL; its requests, and the later turns of its dialogues, go to the remaining servers;
    * a persistent 5xx does the same if the server answered none of its share. If it answered
      some, it works and the 5xx ends only that dialogue, as with one server; so does a 5xx
      for a conversation that already emptied another server that way (it is the culprit);
    * a rejection (HTTP 400: too long, bad field) is the reply's ``error``, as with one server.

    With no server left, :class:`EndpointUnavailable` names every URL and why it left.
    ``check=True`` probes all servers first, leaves out (with a warning) those that do not
    answer and refuses to start when none does. ``client_kwargs`` go to every ChatClient.
    """

    name = "openai-multi"
    # Safe to call from many threads at once, as the pipelined rollout does.
    parallel_requests = True

    def __init__(self, model: str, base_urls: Sequence[str], api_key: str = "EMPTY",
                 max_tokens: int = 512, check: bool = True, **client_kwargs):
        if not base_urls:
            raise ValueError("MultiHostSimulator needs at least one server URL")
        self.clients = [ChatClient(url, model, api_key=api_key, **client_kwargs)
                        for url in base_urls]
        self.max_tokens = max_tokens
        self._down: Dict[int, str] = {}  # server index -> why it left the rotation
        self._pinned: Dict[Hashable, int] = {}  # dialogue key -> server index
        self._dialogues = [0] * len(self.clients)  # keys ever pinned to each server
        self._in_flight = [0] * len(self.clients)  # requests sent and not yet answered
        self._cursor = 0  # round-robin position for requests without keys
        self._lock = threading.Lock()
        # Runs the servers' shares of a batch side by side, each through its own ChatClient
        # (which has its own pool for the requests of the share).
        self._pool = ThreadPoolExecutor(max_workers=4 * len(self.clients),
                                        thread_name_prefix="multi-host")
        if check:
            self._probe()

    @property
    def base_urls(self) -> List[str]:
        return [client.base_url for client in self.clients]

    @property
    def live_urls(self) -> List[str]:
        """The servers still in rotation."""
        with self._lock:
            return [c.base_url for i, c in enumerate(self.clients) if i not in self._down]

    @property
    def base_url(self) -> str:
        """All URLs in one string, for logs written with a single server in mind."""
        return ",".join(self.base_urls)

    def _probe(self) -> None:
        probes = [self._pool.submit(client.check_reachable) for client in self.clients]
        for server, probe in enumerate(probes):
            err = probe.exception()
            if err is not None:
                if not isinstance(err, EndpointUnavailable):
                    raise err
                self._take_out(server, str(err))
        with self._lock:
            self._raise_if_none_left()

    def _take_out(self, server: int, why: str) -> None:
        with self._lock:
            if server in self._down:  # a second failure report of the same server
                return
            self._down[server] = why
            left = len(self.clients) - len(self._down)
        logger.warning("simulator server %s is out of rotation, %d left: %s",
                       self.clients[server].base_url, left, why)

    def _raise_if_none_left(self) -> None:
        if len(self._down) == len(self.clients):
            reasons = "; ".join(f"{self.clients[i].base_url}: {self._down[i]}"
                                for i in range(len(self.clients)))
            raise EndpointUnavailable(
                f"none of the {len(self.clients)} simulator servers is available ({reasons})")

    def _assign(self, pending: List[int], keys: DialogueKeys) -> Dict[int, List[int]]:
        """Which live server answers each pending conversation (server -> indices)."""
        with self._lock:
            self._raise_if_none_left()
            live = [s for s in range(len(self.clients)) if s not in self._down]
            plan: Dict[int, List[int]] = {}
            fresh = []
            for i in pending:
                if keys is None:
                    server = live[self._cursor % len(live)]
                    self._cursor += 1
                else:
                    server = self._pinned.get(keys[i])
                    if server is None or server in self._down:
                        fresh.append(i)  # placed below, once the pinned ones are counted
                        continue
                plan.setdefault(server, []).append(i)
                self._in_flight[server] += 1
            for i in fresh:
                server = self._pinned.get(keys[i])
                if server is None or server in self._down:  # a key may repeat in a batch
                    server = min(live, key=lambda s: (self._in_flight[s], self._dialogues[s], s))
                    self._pinned[keys[i]] = server
                    self._dialogues[server] += 1
                plan.setdefault(server, []).append(i)
                self._in_flight[server] += 1
            return plan

    def _attempt(self, server: int, batch: List[ChatMessages]):
        """The server's results, or the exception that shows the server failed."""
        try:
            return self.clients[server].complete_batch(batch, temperature=0.0,
                                                       max_tokens=self.max_tokens)
        except Exception as err:
            if not _server_failed(err):
                raise
            return err
        finally:
            with self._lock:
                self._in_flight[server] -= len(batch)

    def _settle(self, server: int, indices: List[int], outcome, struck: Set[int],
                replies: List[Optional[SimulatorReply]]) -> List[int]:
        """Fill in the replies of one server's share; returns the indices to send again."""
        if isinstance(outcome, BaseException):
            self._take_out(server, str(outcome))
            return list(indices)
        retry: List[int] = []
        if (all(r.error and _PERSISTENT_5XX.match(r.error) for r in outcome)
                and not struck.issuperset(indices)):
            # It answered nothing, and not only to known culprits: the server is broken.
            self._take_out(server, f"{outcome[0].error} (all {len(indices)} requests)")
            retry = [i for i in indices if i not in struck]
            struck.update(retry)
        for i, result in zip(indices, outcome):
            if i not in retry:
                replies[i] = SimulatorReply(text=result.text, error=result.error)
        return retry

    def reply_batch(self, conversations: List[ChatMessages],
                    keys: DialogueKeys = None) -> List[SimulatorReply]:
        if keys is not None and len(keys) != len(conversations):
            raise ValueError(f"{len(keys)} keys for {len(conversations)} conversations")
        replies: List[Optional[SimulatorReply]] = [None] * len(conversations)
        struck: Set[int] = set()  # conversations that already emptied a server with 5xx
        pending = list(range(len(conversations)))
        while pending:
            shares = list(self._assign(pending, keys).items())
            # The last share runs in this thread: a call for one server (the pipelined loop
            # asks one conversation at a time) then waits on no pool thread.
            others = [self._pool.submit(self._attempt, server, [conversations[i] for i in ids])
                      for server, ids in shares[:-1]]
            last = self._attempt(shares[-1][0], [conversations[i] for i in shares[-1][1]])
            outcomes = [future.result() for future in others] + [last]
            pending = sorted(i for (server, ids), outcome in zip(shares, outcomes)
                             for i in self._settle(server, ids, outcome, struck, replies))
        return replies  # type: ignore[return-value] - every slot is filled by now

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for client in self.clients:
            client.close()
