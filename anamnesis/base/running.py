"""A long-running process of a store (watch, the dashboard, the MCP server over HTTP) known by a lock file it holds.

The process takes an exclusive lock on its file for as long as it runs and writes its pid
in it; the kernel lets go of the lock when the process ends, however it ends, so a file
left behind by a killed process never reads as running. `uninstall` finds such processes
here and stops them.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

from anamnesis import __version__

DASHBOARDS = "dashboards"  # the state folder where each running `anamnesis web` holds a file
MCP_SERVERS = "mcp-servers"  # and each `anamnesis mcp --http`


class AlreadyHeld(Exception):
    """Another live process holds the lock file; `pid` is what it wrote there (0 if unreadable)."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.pid = pid


def hold(path: Path) -> int:
    """Take `path`'s lock for this process and write its pid there; the descriptor to keep open.

    Raises AlreadyHeld when a live process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        os.close(fd)
        raise AlreadyHeld(int(text) if text.isdigit() else 0) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def is_held(path: Path) -> bool:
    """Whether a live process holds `path`'s lock."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def holder(path: Path) -> int | None:
    """The pid of the live process holding `path`'s lock (not this one), or None."""
    if not is_held(path):
        return None
    try:
        pid = int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    return pid if pid > 0 and pid != os.getpid() else None


def stop_holder(path: Path, wait: float = 30.0) -> tuple[int, bool] | None:
    """Ask the process holding `path`'s lock to stop (SIGTERM: it finishes what it is doing) and
    wait up to `wait` seconds for the lock to go: (its pid, whether it is gone), None if none runs."""
    pid = holder(path)
    if pid is None:
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid, False  # another user's: not ours to stop
    deadline = time.monotonic() + wait
    while is_held(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid, not is_held(path)


def held_in(folder: Path) -> list[Path]:
    """The lock files in `folder` that a live process holds (those of ended ones are removed)."""
    try:
        files = sorted(folder.glob("*.lock"))
    except OSError:
        return []
    held: list[Path] = []
    for path in files:
        if is_held(path):
            held.append(path)
        else:
            path.unlink(missing_ok=True)
    return held


def code_stamp() -> str:
    """What code this program is: its version and when its newest module was written. A process
    started before an upgrade (`git pull` and `./scripts/install`, or a new package) keeps
    running the old code; comparing its stamp with the installed one tells."""
    package = Path(__file__).resolve().parent.parent
    newest = 0
    for module in package.rglob("*.py"):
        try:
            newest = max(newest, module.stat().st_mtime_ns)
        except OSError:
            continue
    return f"{__version__}@{newest}"
