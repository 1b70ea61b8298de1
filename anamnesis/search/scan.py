"""The stat scan of memory/ that a full index refresh compares with the index.

One lstat per note is the floor of a full refresh, and without a running
`anamnesis watch` every search pays it: about 170 ms at 50,000 notes on a
small VM, half of the whole command. On a big store and a machine with a
second core the tree is split in two: a forked child scans one half of the
folders and compares them with the index's rows while this process does the
other half, and sends back only what differs (git splits its own lstat pass
across threads; Python's GIL makes threads useless for a loop of system
calls, a process is not).

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from anamnesis.base.notes import HIDDEN_PREFIX, NOTE_SUFFIXES

FileStat = tuple[int, int, int]  # lstat's size, mtime_ns, mode
Folder = tuple[str, str]  # absolute path, memory/-relative prefix ("" or ending in "/")
Row = tuple[str, int, int]  # what the index recorded of a file: path, size, mtime_ns
Span = tuple[str, str | None]  # paths from the first (included) to the second (excluded; None: no end)
Recorded = Callable[[list[Span]], Iterable[Row]]  # the index's rows with paths in any of the spans
EVERYTHING: list[Span] = [("", None)]
Weigh = Callable[[str], int]  # folder prefix -> how many notes the index holds under it

PARALLEL_FROM = 8_000  # notes: below this, forking costs about what it saves
_FRONTIER = 8  # a folder with more than this part of the store (1/8) is opened to share it out evenly
_OPENED_AT_MOST = 64  # folders opened to find that
CHILD_SHARE = 0.5  # of the notes, scanned and compared by the child
CHILD_SHARE_WHILE_READING = 0.6  # the same, while this process also reads the index (see `start_scan`)


def folder_span(prefix: str) -> Span:
    """The paths under a folder (prefix ending in "/"), as one span: "/" + 1 is "0"."""
    return prefix, prefix[:-1] + "0"


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
    is_dir, hidden, suffixes = stat.S_ISDIR, HIDDEN_PREFIX, NOTE_SUFFIXES  # locals: the loop is hot
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                name = entry.name
                if name[0] == hidden:  # notes.is_note_path, one name at a time
                    continue
                if name.endswith(suffixes):
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


def _frontier(root: str, expected: int, weigh: Weigh, found: dict[str, FileStat]) -> list[tuple[int, Folder]]:
    """Folders to share out, each with its weight. The heaviest folder is opened (its own files
    scanned here, into `found`) while it holds too big a part of the store to share out evenly
    and what was scanned here is still well under this process's share."""
    total = max(expected, 1)
    frontier: list[tuple[int, Folder]] = [(total, (root, ""))]
    for _step in range(_OPENED_AT_MOST):
        heaviest = max(frontier, key=lambda item: item[0])
        if heaviest[0] * _FRONTIER <= total or len(found) * 4 > total:
            break
        frontier.remove(heaviest)
        folder, rel = heaviest[1]
        below: list[Folder] = []
        _scan_folder(folder, rel, found, below)
        frontier += [(weigh(sub), (sub_folder, sub)) for sub_folder, sub in below]
        if not frontier:
            break
    return frontier


def _split(
    frontier: list[tuple[int, Folder]], head_start: int, child_share: float = CHILD_SHARE
) -> tuple[list[Folder], list[Folder]]:
    """This process's folders and the child's, of about equal weight, largest first; this process
    has already done `head_start` notes' worth (the files of the folders it opened)."""
    mine: list[Folder] = []
    theirs: list[Folder] = []
    load = [float(head_start), 0.0]
    shares = (1.0 - child_share, child_share)
    for weight, folder in sorted(frontier, key=lambda item: item[0], reverse=True):
        side = 0 if load[0] / shares[0] <= load[1] / shares[1] else 1
        (mine if side == 0 else theirs).append(folder)
        load[side] += weight + 1
    return mine, theirs


@dataclass
class Changes:
    """How the files differ from what the index recorded of them."""

    unchanged: int = 0
    # (path, its lstat), the lstat None for a file that is gone; new and modified files have theirs
    changed: list[tuple[str, FileStat | None]] = field(default_factory=list)


def compare(found: dict[str, FileStat], recorded: Iterable[Row]) -> Changes:
    """How `found` (a scan; emptied here) differs from the `recorded` rows."""
    unchanged = 0
    changed: list[tuple[str, FileStat | None]] = []
    take = found.pop
    for path, size, mtime in recorded:
        st = take(path, None)
        if st is None:
            changed.append((path, None))
        elif st[0] == size and st[1] == mtime:
            unchanged += 1
        else:
            changed.append((path, st))
    changed.extend(found.items())  # new
    found.clear()
    return Changes(unchanged, changed)


def scan_changes(root: str, expected: int, weigh: Weigh, recorded: Recorded) -> Changes:
    """What changed under `root` since the index `recorded` it: a scan, then a comparison.

    When `expected` notes make it pay, the work is shared with a forked
    child: it scans its folders and compares them with their rows, read for
    it before the fork (it never touches SQLite), and sends back only what
    differs. `weigh(prefix)` says how many notes the index holds under a
    folder (prefix ending in "/"); `recorded(spans)` yields the index's
    (path, size, mtime) rows whose paths lie in any of the spans.
    """
    return start_scan(root, expected, weigh, recorded).finish()


def start_scan(
    root: str, expected: int, weigh: Weigh, recorded: Recorded, child_share: float = CHILD_SHARE
) -> PendingScan:
    """`scan_changes`, begun: the child (if any) is at work when this returns, so the caller may do
    something else meanwhile (give the child a bigger `child_share` then) before `finish()`."""
    pending = PendingScan(root, recorded)
    if expected < PARALLEL_FROM or not _can_fork():
        return pending
    frontier = _frontier(root, expected, weigh, pending.found)
    if len(frontier) < 2:
        pending.mine = [folder for _weight, folder in frontier]
        return pending
    pending.mine, theirs = _split(frontier, len(pending.found), child_share)
    pending.their_spans = sorted(folder_span(rel) for _folder, rel in theirs)
    pending.theirs = theirs
    pending.their_rows = list(recorded(pending.their_spans))
    pending.child = _start(theirs, pending.their_rows)
    return pending


class PendingScan:
    """A scan begun by `start_scan`: this process's part is done, and the child's collected, by `finish`."""

    def __init__(self, root: str, recorded: Recorded) -> None:
        self.recorded = recorded
        self.found: dict[str, FileStat] = {}
        self.mine: list[Folder] = [(root, "")]
        self.theirs: list[Folder] = []
        self.their_spans: list[Span] = []
        self.their_rows: list[Row] = []
        self.child: tuple[int, int] | None = None

    def finish(self) -> Changes:
        """The changes of both parts; the child is always waited for, even if this process's part fails."""
        finished = False
        try:
            changes = compare(_scan_all(self.mine, self.found), self.recorded(_between(self.their_spans)))
            finished = True
        finally:
            theirs = _join(self.child, read=finished)
            self.child = None
        if self.theirs:
            if theirs is None:  # no fork, or the child failed: its part is done here
                theirs = compare(_scan_all(self.theirs, {}), self.their_rows)
            changes.unchanged += theirs.unchanged
            changes.changed += theirs.changed
        return changes


def _between(spans: list[Span]) -> list[Span]:
    """The spans of paths outside the given ones (sorted, not overlapping): what is left to this process."""
    out: list[Span] = []
    start = ""
    for low, high in spans:
        if low > start:
            out.append((start, low))
        start = high or start
    out.append((start, None))
    return out


def _start(theirs: list[Folder], their_rows: list[Row]) -> tuple[int, int] | None:
    """Fork a child that scans `theirs`, compares with `their_rows` and sends the changes; (pid, pipe)."""
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # the child: nothing of the parent's runs here (no SQLite, no atexit, no buffers flushed)
        code = 1
        try:
            os.close(read_end)
            part = compare(_scan_all(theirs, {}), their_rows)
            data = marshal.dumps((part.unchanged, part.changed))
            with open(write_end, "wb", closefd=True) as sink:
                sink.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def _join(child: tuple[int, int] | None, read: bool) -> Changes | None:
    """The child's changes, once it has exited; None if it failed (or `read` is False)."""
    if child is None:
        return None
    pid, read_end = child
    data = b""
    try:
        if read:
            with open(read_end, "rb", closefd=False) as pipe:
                data = pipe.read()
    finally:
        os.close(read_end)  # a child still writing gets EPIPE and exits: the wait cannot hang
        _, status = os.waitpid(pid, 0)
    if status != 0:
        return None
    try:
        unchanged, changed = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    return Changes(unchanged, changed)
