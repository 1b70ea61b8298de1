"""The one way to write a file: atomically, so a crash never leaves half a note."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from anamnesis.base.errors import DiskFull
from anamnesis.base.text import plural

NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
NO_SPACE_WORDS = ("No space left on device", "Disk quota exceeded", "database or disk is full")
SQLITE_FULL = 13
LOW_SPACE = 1 << 20  # a write that fails with less than this free failed for want of space


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` via temp file + fsync + rename (+ fsync of the folder).

    Readers see either the old file or the new one, never a torn write.
    `mode` (e.g. 0o600) is applied before the rename so secrets are never
    briefly world-readable.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged user may still write on the file system holding `path` (None: unknown)."""
    for candidate in (Path(path), *Path(path).parents):
        try:
            st = os.statvfs(candidate)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return None


def is_out_of_space(exc: BaseException, where: Path | None = None) -> bool:
    """Whether `exc` means the disk (or the quota) is full.

    An OSError with ENOSPC/EDQUOT, SQLite's SQLITE_FULL, git's or SQLite's
    words for it, or (when `where` is given) any failure to write while
    less than a mebibyte is free there: git says "unable to write new index
    file" without saying why.
    """
    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        return True
    if getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL:
        return True
    if any(words in str(exc) for words in NO_SPACE_WORDS):
        return True
    if where is not None:
        free = free_bytes(where)
        return free is not None and free < LOW_SPACE
    return False


def human_bytes(count: int) -> str:
    """1536 -> '1.5 KB': sizes in messages."""
    size = float(count)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def no_space_error(home: Path, stage: str, exc: BaseException | str, kept: str) -> DiskFull:
    """The one-line error for a disk that filled up at `stage`: how much is free, what was kept, what to do."""
    free = free_bytes(home)
    room = f", {human_bytes(free)} free" if free is not None else ""
    if isinstance(exc, str):
        detail = exc
    else:
        detail = (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__
    return DiskFull(
        f"no space left on the disk of {home}{room} ({stage}: {detail}); {kept}"
        " — free some space and try again"
    )


WriteKind = Literal["read-only", "full", "denied"]


@dataclass(frozen=True)
class WriteProblem:
    """Why nothing can be written in a folder: `kind` to branch on, `text` to show, `fix` to do."""

    kind: WriteKind
    text: str
    fix: str

    def __str__(self) -> str:
        return self.text


def write_problem(folder: Path) -> WriteProblem | None:
    """Why nothing can be written in `folder`, found by writing there (access bits lie to root
    and know nothing of a read-only mount); None when a file can be made."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".anamnesis-probe-", suffix=".tmp", dir=folder)
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return WriteProblem("read-only", "is on a file system mounted read-only", write_fix(folder, "read-only"))
        if exc.errno in NO_SPACE_ERRNOS:
            return WriteProblem("full", "is on a full disk", write_fix(folder, "full"))
        return WriteProblem("denied", f"cannot be written: {exc.strerror or exc}", write_fix(folder, "denied"))
    os.close(fd)
    os.unlink(probe)
    if not os.access(folder, os.W_OK):
        return WriteProblem("denied", "is not writable by you (only root can write there)", write_fix(folder, "denied"))
    return None


def write_fix(folder: Path, kind: WriteKind, *, recursive: bool = False) -> str:
    """What to do about a folder that cannot be written for reason `kind` (`recursive`: about
    folders below it too, so one command fixes them all, not one a run)."""
    if kind == "read-only":
        return f"remount the disk of {folder} read-write (or point ANAMNESIS_HOME elsewhere)"
    if kind == "full":
        return "free some space"
    if _owner(folder) != os.geteuid():
        return f'it belongs to another user (a command run with sudo?): `sudo chown -R "$USER" {folder}`'
    return f"chmod -R u+w {folder}" if recursive else f"chmod u+w {folder}"


def unwritable_folders(folders: Iterable[Path]) -> list[tuple[Path, WriteProblem]]:
    """The folders among `folders` that nothing can be written in, each with why.

    Access bits sort them first, so a long list costs a stat each; only a folder they refuse is
    written to, to be sure (root, whom they would not refuse, can write anyway, except on a
    read-only mount, which refuses everyone)."""
    found: list[tuple[Path, WriteProblem]] = []
    for folder in folders:
        if not folder.is_dir() or os.access(folder, os.W_OK | os.X_OK):
            continue
        problem = write_problem(folder)
        if problem is not None:
            found.append((folder, problem))
    return found


def folders_under(root: Path) -> Iterator[Path]:
    """`root` and every folder below it."""
    for folder, _dirs, _files in os.walk(root):
        yield Path(folder)


def nearest_folder(path: Path, top: Path) -> Path:
    """`path` if it is a folder, else the nearest folder above it, `top` at the highest: where
    writing `path` (and the folders it needs) happens."""
    while not path.is_dir() and path != top and path != path.parent:
        path = path.parent
    return path


def unwritable_text(problems: Sequence[tuple[Path, WriteProblem]], within: Path) -> tuple[str, str]:
    """(what is wrong, the one fix) for folders that cannot be written, the first named: several
    under `within` get a fix for all of them at once."""
    folder, problem = problems[0]
    more = len(problems) - 1
    below = all(f.is_relative_to(folder) for f, _p in problems)
    where = "below it" if below else f"in {within}"
    what = f"{folder} {problem}" + (f" (and {plural(more, 'more folder')} {where})" if more else "")
    if not more:
        return what, problem.fix
    common = Path(os.path.commonpath([str(f) for f, _p in problems]))
    common = common if common.is_relative_to(within) else within
    if all(p.kind == problem.kind for _f, p in problems) and problem.kind != "denied":
        return what, write_fix(common, problem.kind)
    if any(_owner(f) != os.geteuid() for f, _p in problems):
        return what, f'they belong to another user (a command run with sudo?): `sudo chown -R "$USER" {common}`'
    return what, write_fix(common, "denied", recursive=True)


def _owner(path: Path) -> int:
    try:
        return path.stat().st_uid
    except OSError:
        return os.geteuid()
