"""The stat scan of memory/ that a full index refresh compares with the index.

One lstat per note is the floor of a full refresh, and without a running
`anamnesis watch` every search pays it: about 170 ms at 50,000 notes on a
small VM, half of the whole command. On a big store and a machine with a
second core the tree is split in two: a forked child scans one half while
this process scans the other and sends its findings back through a pipe
(git splits its own lstat pass across threads; Python's GIL makes threads
useless for a loop of system calls, a process is not).

Anything unusual (no fork, one core, other threads running, a child that
fails) means the plain scan of the whole tree: the result is the same, only
slower.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
import threading
from collections.abc import Callable

FileStat = tuple[int, int, int]  # lstat's size, mtime_ns, mode
Folder = tuple[str, str]  # absolute path, memory/-relative prefix ("" or ending in "/")

PARALLEL_FROM = 8_000  # notes: below this, forking costs about what it saves
_FRONTIER = 8  # split once this many folders are known
CHILD_SHARE = 0.6  # of the notes, scanned by the child


def printable_path(relpath: str) -> str:
    """`relpath` as SQLite can store it: a name that is not valid UTF-8 gets U+FFFD
    in place of its bad bytes (and is reported, since no note can live there)."""
    try:
        relpath.encode("utf-8")
    except UnicodeEncodeError:
        return relpath.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return relpath


def _scan_folder(folder: str, rel: str, found: dict[str, FileStat], below: list[Folder]) -> None:
    """Add the `.md` files directly in `folder` to `found` and its sub-folders to `below`; skips dot names.

    The inner loop of every scan, so it is tight: scandir on a descriptor
    stats entries relative to it (fstatat, no path walk per file), and only
    names ending in .md are stat-ed (a folder named x.md is told by st_mode).
    """
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    is_dir = stat.S_ISDIR
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                name = entry.name
                if name[0] == ".":
                    continue
                if name.endswith((".md", ".MD", ".Md", ".mD")):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if is_dir(st.st_mode):
                        below.append((f"{folder}/{name}", f"{rel}{name}/"))
                    else:
                        key = rel + name
                        found[key if key.isascii() else printable_path(key)] = (
                            st.st_size,
                            st.st_mtime_ns,
                            st.st_mode,
                        )
                elif entry.is_dir(follow_symlinks=False):
                    below.append((f"{folder}/{name}", f"{rel}{name}/"))
    except OSError:
        pass
    finally:
        os.close(fd)


def _scan_all(folders: list[Folder], found: dict[str, FileStat]) -> dict[str, FileStat]:
    stack = list(folders)
    while stack:
        folder, rel = stack.pop()
        _scan_folder(folder, rel, found, stack)
    return found


def scan_tree(root: str) -> dict[str, FileStat]:
    """Every `.md` file under root (dot names skipped): memory/-relative posix path -> size, mtime, mode."""
    return _scan_all([(root, "")], {})


def _can_fork() -> bool:
    if not hasattr(os, "fork") or sys.platform != "linux":
        return False  # macOS forbids much after fork; only Linux is tried and tested
    if threading.active_count() > 1:
        return False  # a fork copies one thread of many: the MCP server, the web UI and watch scan in place
    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) > 1


def _split(folders: list[Folder], weigh: Callable[[str], int]) -> tuple[list[Folder], list[Folder]]:
    """This process's folders and the child's, by the notes the index counted under each, largest first.

    The child gets the bigger share (`CHILD_SHARE`): this process also reads
    the index's rows and compares while the child only scans and sends.
    """
    mine: list[Folder] = []
    theirs: list[Folder] = []
    load = [0.0, 0.0]
    shares = (1.0 - CHILD_SHARE, CHILD_SHARE)
    for weight, folder in sorted(((weigh(item[1]), item) for item in folders), reverse=True):
        side = 0 if load[0] / shares[0] <= load[1] / shares[1] else 1
        (mine if side == 0 else theirs).append(folder)
        load[side] += weight + 1
    return mine, theirs


def scan_tree_split(root: str, expected: int, weigh: Callable[[str], int]) -> dict[str, FileStat]:
    """`scan_tree(root)`, the work shared with a forked child when `expected` notes make it pay.

    `weigh(prefix)` says how many notes the index holds under a folder
    (prefix ends in "/"), to give both processes the same amount of work.
    """
    if expected < PARALLEL_FROM or not _can_fork():
        return scan_tree(root)
    found: dict[str, FileStat] = {}
    frontier: list[Folder] = [(root, "")]
    for _depth in range(4):  # the top of the tree, here: a few folders, few files
        if len(frontier) >= _FRONTIER or not frontier:
            break
        below: list[Folder] = []
        for folder, rel in frontier:
            _scan_folder(folder, rel, found, below)
        frontier = below
    if len(frontier) < 2:
        return _scan_all(frontier, found)
    mine, theirs = _split(frontier, weigh)
    return _scan_shared(mine, theirs, found)


def _scan_shared(mine: list[Folder], theirs: list[Folder], found: dict[str, FileStat]) -> dict[str, FileStat]:
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return _scan_all(mine + theirs, found)
    if pid == 0:  # the child: scan, send, and leave without running anything of the parent's
        code = 1
        try:
            os.close(read_end)
            data = marshal.dumps(_scan_all(theirs, {}))
            with open(write_end, "wb", closefd=True) as sink:
                sink.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    pipe = open(read_end, "rb", closefd=True)  # noqa: SIM115 - closed before the wait below, whatever happens
    try:
        _scan_all(mine, found)
        data = pipe.read()
    finally:
        pipe.close()  # a child still writing gets EPIPE and exits: the wait cannot hang
        _, status = os.waitpid(pid, 0)
    try:
        theirs_found = marshal.loads(data) if status == 0 else None
    except (EOFError, ValueError, TypeError):
        theirs_found = None
    if not isinstance(theirs_found, dict):
        return _scan_all(theirs, found)  # the child failed: do its half here
    found.update(theirs_found)
    return found
