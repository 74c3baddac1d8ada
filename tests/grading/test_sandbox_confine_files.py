"""File-system confinement of the grader's sandbox: Landlock's read roots (this project is
never readable) and job layers, the hostile-tree removal and the scratch reachability check
(sandbox_landlock, sandbox_cleanup)."""

import inspect
import os
import stat
import textwrap

import pytest

from sweet_rl.grading.sandbox import sandbox_cleanup, sandbox_landlock
from sweet_rl.grading.sandbox.sandbox_confine import ListOnly, readable_roots, scratch_reachable
from tests.grading.confine_helpers import (
    SANDBOX,
    IS_ROOT,
    NOBODY,
    needs_landlock,
    needs_root,
    script_result,
)


# -- Landlock ------------------------------------------------------------------------------

def make_site_packages(root):
    """A site-packages folder as a normal (non-editable) install of this project leaves it,
    plus an editable install's files and two third-party entries."""
    site = os.path.join(root, "site-packages")
    os.makedirs(os.path.join(site, "sweet_rl", "data"))
    os.makedirs(os.path.join(site, "sweet_rl-0.1.0.dist-info"))
    os.makedirs(os.path.join(site, "goodpkg"))
    files = {"sweet_rl/__init__.py": "", "sweet_rl/data/tasks.jsonl": '{"reference": "secret"}\n',
             "sweet_rl-0.1.0.dist-info/RECORD": "", "__editable__.sweet_rl-0.1.0.pth": "/x\n",
             "__editable___sweet_rl_0_1_0_finder.py": "", "other.pth": "import os\n",
             "goodpkg/__init__.py": "VALUE = 42\n", "goodmod.py": "X = 1\n"}
    for name, text in files.items():
        with open(os.path.join(site, name), "w") as handle:
            handle.write(text)
    os.symlink("sweet_rl", os.path.join(site, "alias"))  # the package under another name
    os.symlink("goodpkg", os.path.join(site, "goodlink"))
    return os.path.realpath(site)


def test_readable_roots_leave_out_this_project(tmp_path):
    site = make_site_packages(str(tmp_path))
    # project files linked into a site-packages folder from elsewhere: the target is hidden too
    other_site = os.path.realpath(str(tmp_path / "other-site"))
    os.makedirs(os.path.join(other_site, "linked-metadata"))
    os.symlink(
        os.path.join(other_site, "linked-metadata"), os.path.join(site, "sweet_rl-0.2.dist-info")
    )
    roots = readable_roots([site, other_site])
    assert (
        ListOnly(other_site) in roots and os.path.join(other_site, "linked-metadata") not in roots
    )
    assert ListOnly(site) in roots and isinstance(roots[roots.index(site)], ListOnly)
    # one rule per entry but the project's entries and .pth files; links by their target
    assert sorted(p for p in roots if p.startswith(site + os.sep)) == [
        os.path.join(site, "goodmod.py"), os.path.join(site, "goodpkg")]
    assert all(os.path.exists(p) for p in roots)


def test_readable_roots_of_this_interpreter_hide_the_installed_project():
    from sweet_rl.grading.sandbox.client import library_folders

    package = os.path.dirname(os.path.dirname(SANDBOX))  # this project's sweet_rl folder
    roots = readable_roots(library_folders())
    for path in roots:
        if isinstance(path, ListOnly):  # names only: nothing beneath is readable through it
            continue
        name = os.path.basename(path)
        assert not name.endswith(".pth") and "sweet_rl" not in name, path
        assert path != package and not path.startswith(package + os.sep), path
    # this interpreter's own site-packages holds the project's install files: list-only
    for folder in library_folders():
        if any("sweet_rl" in name for name in os.listdir(folder)):
            assert ListOnly(os.path.realpath(folder)) in roots


LANDLOCK_PROBE = """
    def read(path):
        with open(path) as handle:
            return handle.read()
    def write(path):
        with open(path, "w") as handle:
            handle.write("x")
    sys.path.append(site)
    layer = confine.Landlock(jobs, confine.readable_roots([site]))
    assert layer.restrict()
    import goodpkg, goodmod
    def import_project():
        import sweet_rl
    try:
        import_project()
        imported = "imported"
    except BaseException as error:
        imported = type(error).__name__
    report({
        "goodpkg": goodpkg.VALUE, "goodmod": goodmod.X, "import sweet_rl": imported,
        "listing": sorted(os.listdir(site)),
        "tasks": outcome(lambda: read(os.path.join(site, "sweet_rl", "data", "tasks.jsonl"))),
        "tasks via link": outcome(lambda: read(os.path.join(site, "alias", "data", "tasks.jsonl"))),
        "record": outcome(lambda: read(os.path.join(site, "sweet_rl-0.1.0.dist-info", "RECORD"))),
        "pth": outcome(lambda: read(os.path.join(site, "other.pth"))),
        "project readme": outcome(lambda: read(os.path.join(project, "README.md"))),
        "stdlib": outcome(lambda: read(os.__file__)),
        "write in jobs": outcome(lambda: write(os.path.join(jobs, "f"))),
        "write outside": outcome(lambda: write(os.path.join(outside, "f"))),
    })
"""


@needs_landlock
def test_landlock_reads_third_party_packages_but_not_the_project(tmp_path):
    site = make_site_packages(str(tmp_path))
    jobs, outside = str(tmp_path / "jobs"), str(tmp_path / "outside")
    os.mkdir(jobs)
    os.mkdir(outside)
    project = os.path.dirname(os.path.dirname(os.path.dirname(SANDBOX)))  # the checkout
    results = script_result(f"site, jobs, outside, project = {site!r}, {jobs!r}, {outside!r}, "
                            f"{project!r}\n" + textwrap.dedent(LANDLOCK_PROBE))
    assert results == {
        "goodpkg": 42,
        "goodmod": 1,
        "import sweet_rl": "PermissionError",
        # names stay listable (the import system lists the folder), contents do not
        "listing": [
            "__editable__.sweet_rl-0.1.0.pth",
            "__editable___sweet_rl_0_1_0_finder.py",
            "alias",
            "goodlink",
            "goodmod.py",
            "goodpkg",
            "other.pth",
            "sweet_rl",
            "sweet_rl-0.1.0.dist-info",
        ],
        "tasks": "EACCES",
        "tasks via link": "EACCES",
        "record": "EACCES",
        "pth": "EACCES",
        "project readme": "EACCES",
        "stdlib": "ok",
        "write in jobs": "ok",
        "write outside": "EACCES",
    }


@needs_landlock
def test_job_layer_confines_writes_to_the_job_folder(tmp_path):
    jobs = str(tmp_path / "jobs")
    for name in ("a", "b"):
        os.makedirs(os.path.join(jobs, name))
    with open(os.path.join(jobs, "b", "kept"), "w") as handle:
        handle.write("other job")
    results = script_result(f"""
        jobs = {jobs!r}
        layer = confine.Landlock(jobs, confine.readable_roots())
        assert layer.restrict()
        fd = confine.job_ruleset(os.path.join(jobs, "a"))
        applied = confine.restrict_with(fd)
        def write(path):
            with open(path, "w") as handle:
                handle.write("x")
        def read(path):
            with open(path) as handle:
                return handle.read()
        report({{
            "fd": fd >= 0, "applied": applied,
            "write own": outcome(lambda: write(os.path.join(jobs, "a", "f"))),
            "mkdir own": outcome(lambda: os.mkdir(os.path.join(jobs, "a", "d"))),
            "rename own": outcome(lambda: os.rename(os.path.join(jobs, "a", "f"),
                                                    os.path.join(jobs, "a", "d", "g"))),
            "write other": outcome(lambda: write(os.path.join(jobs, "b", "f"))),
            "mkdir other": outcome(lambda: os.mkdir(os.path.join(jobs, "b", "d"))),
            "unlink other": outcome(lambda: os.unlink(os.path.join(jobs, "b", "kept"))),
            "read other": read(os.path.join(jobs, "b", "kept")),
            "devnull": outcome(lambda: write(os.devnull)),
        }})
    """)
    assert results == {"fd": True, "applied": True, "write own": "ok", "mkdir own": "ok",
                       "rename own": "ok", "write other": "EACCES", "mkdir other": "EACCES",
                       "unlink other": "EACCES", "read other": "other job", "devnull": "ok"}


@needs_landlock
@needs_root
def test_restrict_with_sets_no_new_privs_itself_for_a_normal_user(shared_tmp):
    own = os.path.join(shared_tmp, "own")
    os.mkdir(own)
    os.chown(own, NOBODY, NOBODY)
    os.chown(shared_tmp, NOBODY, NOBODY)
    results = script_result(f"""
        fd = confine.job_ruleset({own!r})
        become_user({NOBODY})
        applied = confine.restrict_with(fd)
        report([applied, outcome(lambda: open({own!r} + "/f", "w").close()),
                outcome(lambda: open({shared_tmp!r} + "/f", "w").close())])
    """)
    assert results == [True, "ok", "EACCES"]


def test_job_layer_reports_a_missing_landlock(monkeypatch, tmp_path):
    # a double for a kernel without Landlock, beside the real tests above
    monkeypatch.setattr(sandbox_landlock, "landlock_abi", lambda: 0)
    assert sandbox_landlock.job_ruleset(str(tmp_path)) == -1
    assert sandbox_landlock.restrict_with(-1) is False


# -- remove_tree ---------------------------------------------------------------------------

def make_hostile_tree(root, outside, depth=3000):
    """What an answer can leave in its folder: folders and files without any permission,
    a folder chain ``depth`` deep, and links to a folder and a file outside."""
    os.makedirs(os.path.join(root, "locked", "inner"))
    for folder in ("locked/inner", "locked"):
        with open(os.path.join(root, folder, "file"), "w") as handle:
            handle.write("x")
        os.chmod(os.path.join(root, folder, "file"), 0)
    os.chmod(os.path.join(root, "locked", "inner"), 0)
    os.chmod(os.path.join(root, "locked"), 0)
    os.mkdir(os.path.join(root, "readonly"))
    open(os.path.join(root, "readonly", "file"), "w").close()
    os.chmod(os.path.join(root, "readonly"), 0o500)
    os.symlink(outside, os.path.join(root, "link_to_folder"))
    os.symlink(os.path.join(outside, "precious"), os.path.join(root, "link_to_file"))
    os.mkdir(os.path.join(root, "deep"))
    fd = os.open(os.path.join(root, "deep"), os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):  # relative to a descriptor: the full path is far beyond PATH_MAX
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    # ".removing-0" is the first name remove_tree gives a folder it moves up: taken already
    os.makedirs(os.path.join(root, ".removing-0", "x"))


def make_outside(parent):
    outside = os.path.join(parent, "outside")
    os.mkdir(outside)
    with open(os.path.join(outside, "precious"), "w") as handle:
        handle.write("keep me")
    os.chmod(outside, 0o751)
    return outside


def outside_intact(outside):
    with open(os.path.join(outside, "precious")) as handle:
        return handle.read() == "keep me" and stat.S_IMODE(os.stat(outside).st_mode) == 0o751


def test_remove_tree_empties_a_hostile_tree(tmp_path):
    root, outside = str(tmp_path / "job"), make_outside(str(tmp_path))
    os.mkdir(root)
    make_hostile_tree(root, outside)
    assert sandbox_cleanup.remove_tree(root) == 0
    assert os.listdir(root) == [] and outside_intact(outside)
    assert sandbox_cleanup.remove_tree(root, keep_root=False) == 0
    assert not os.path.exists(root)


def test_remove_tree_removes_a_link_not_its_target_and_never_raises(tmp_path):
    outside = make_outside(str(tmp_path))
    link = str(tmp_path / "link")
    os.symlink(outside, link)
    assert sandbox_cleanup.remove_tree(link) == 0 and os.path.islink(link)  # kept: not a folder
    assert sandbox_cleanup.remove_tree(link, keep_root=False) == 0
    assert not os.path.lexists(link) and outside_intact(outside)
    assert sandbox_cleanup.remove_tree(str(tmp_path / "missing")) == 0
    assert sandbox_cleanup.remove_tree("\0") == 1  # an unusable path is counted, not raised


CLEANUP_PROBE = """
    {setup}
    make_hostile_tree(root, outside, depth)  # by the uid that removes it, as an answer would
    os.chmod(root, 0)  # the answer may close its own folder too
    resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))  # depth must not cost descriptors
    left = confine.remove_tree(root)
    report([left, os.listdir(root)])
"""


def cleanup_script(root, outside, setup, depth=3000):
    return (f"root, outside, depth = {root!r}, {outside!r}, {depth}\n"
            + inspect.getsource(make_hostile_tree)
            + textwrap.dedent(CLEANUP_PROBE).format(setup=setup))


@needs_root
@pytest.mark.parametrize(
    "how", ["root without capabilities", "owner uid", "owner uid, no fchmodat2"]
)
def test_remove_tree_fixes_permissions_without_privilege(shared_tmp, how):
    root, outside = os.path.join(shared_tmp, "job"), make_outside(shared_tmp)
    os.mkdir(root)
    if how == "root without capabilities":
        setup = "assert confine.drop_capabilities()"
    else:
        os.chown(root, NOBODY, NOBODY)
        setup = f"become_user({NOBODY})"
        if how.endswith("no fchmodat2"):  # as on kernels before 6.6: the /proc/self/fd way
            setup += "\nconfine._cleanup._SYS_FCHMODAT2 = 100000"
    # deeper than Python's recursion limit (1000), where shutil.rmtree raises RecursionError
    assert script_result(cleanup_script(root, outside, setup, depth=1200)) == [0, []]
    assert outside_intact(outside)


@needs_root
def test_remove_tree_counts_what_it_cannot_remove(shared_tmp):
    root = os.path.join(shared_tmp, "job")
    foreign = os.path.join(root, "theirs")  # root's folder, not writable by the job's uid
    os.makedirs(os.path.join(root, "nested", "theirs_too"))
    os.mkdir(foreign)
    for name in ("a", "b"):
        open(os.path.join(foreign, name), "w").close()
    open(os.path.join(root, "nested", "theirs_too", "c"), "w").close()
    open(os.path.join(root, "mine"), "w").close()
    for path in (root, os.path.join(root, "nested"), os.path.join(root, "mine")):
        os.chown(path, NOBODY, NOBODY)
    results = script_result(
        f"become_user({NOBODY})\n"
        f"report([confine.remove_tree({root!r}), sorted(os.listdir({root!r}))])"
    )
    # theirs/a and theirs/b cannot be unlinked (2) nor theirs removed (1); nested/theirs_too
    # cannot be moved up (moving a folder needs write access to it: 1, its content unseen)
    # nor nested removed (1): 5 in all; "mine" is gone
    assert results == [5, ["nested", "theirs"]]


@needs_landlock
def test_remove_tree_under_the_workers_landlock_layer(tmp_path):
    jobs, outside = str(tmp_path / "jobs"), make_outside(str(tmp_path))
    root = os.path.join(jobs, "current")
    os.makedirs(root)
    setup = f"assert confine.Landlock({jobs!r}, confine.readable_roots()).restrict()"
    assert script_result(cleanup_script(root, outside, setup)) == [0, []]
    assert outside_intact(outside)


# -- scratch_reachable ---------------------------------------------------------------------

def test_scratch_reachable_names_the_first_blocking_folder(shared_tmp):
    # under /tmp (1777) in a 0755 folder: every ancestor is searchable by every uid
    private = os.path.join(shared_tmp, "private")
    scratch = os.path.join(private, "scratch")
    os.makedirs(scratch)
    os.chmod(scratch, 0o777)
    os.chmod(private, 0o700)  # closed to everyone but its owner (us)
    me = os.getuid()
    assert scratch_reachable(scratch, me) == (True, None)
    assert scratch_reachable(scratch, 4242) == (False, private)
    os.chmod(private, 0o711)  # searchable by all, listable by none: enough
    assert scratch_reachable(scratch, 4242) == (True, None)
    os.chmod(scratch, 0o755)  # others may enter but not write
    assert scratch_reachable(scratch, 4242) == (False, scratch)
    assert scratch_reachable(os.path.join(scratch, "missing"), me) == (
        False,
        os.path.join(scratch, "missing"),
    )
    link = os.path.join(shared_tmp, "link")  # links are resolved: the target's path counts
    os.symlink(scratch, link)
    assert scratch_reachable(link, 4242) == (False, scratch)
    if IS_ROOT:
        os.chown(scratch, 4242, 4242)
        os.chmod(scratch, 0o077)  # the owner's bits apply to the owner, though others' allow
        assert scratch_reachable(scratch, 4242) == (False, scratch)
        assert scratch_reachable(scratch, 5000, gid=4242) == (True, None)  # group bits: rwx
        assert scratch_reachable(scratch, 5000, gid=5000) == (True, None)  # others' bits: rwx
