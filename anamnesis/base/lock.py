"""The one lock per store that every writer takes around git work and writes.

It is an flock(2) on state/store.lock: the kernel drops it when the owner
dies, so a lock left by a killed process is never stale. The file also
records who holds it, for messages. Re-entrant within one thread so a core
function that locks can call another that locks; other threads wait.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from anamnesis.base.errors import LockTimeout
from anamnesis.base.paths import Store

_held: dict[tuple[str, int], tuple[int, int]] = {}  # (lock path, thread) -> (fd, depth)
_guard = threading.RLock()


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
        return f"pid {info.get('pid')} ({info.get('what', '?')})"
    except (OSError, ValueError):
        return "another process"


def store_lock(store: Store, what: str = "write", timeout: float = 60.0) -> AbstractContextManager[None]:
    """Hold the store lock for the block; wait up to `timeout` seconds for it."""
    return file_lock(store.lock_path, what, timeout, busy="store is busy")


@contextmanager
def file_lock(path: Path, what: str, timeout: float = 60.0, busy: str = "busy") -> Iterator[None]:
    """Hold an flock on `path` for the block, as `store_lock` does; `busy` opens the timeout's message.

    Besides the store lock, the one other user is a push to a peer on a local path (a hub on a disk):
    pushes from every store of this host take the lock in the peer's git directory, so a ref lock
    file found there while holding it was left by a git that was killed.
    """
    # Re-entrant per thread: another thread opens its own descriptor, and flock
    # makes it wait like any other process would.
    key = (str(path), threading.get_ident())
    with _guard:
        reentered = key in _held
        if reentered:
            fd, depth = _held[key]
            _held[key] = (fd, depth + 1)
    if reentered:  # never yield while holding _guard: other threads would hang on it
        try:
            yield
        finally:
            with _guard:
                fd, depth = _held[key]
                if depth <= 1:
                    del _held[key]
                else:
                    _held[key] = (fd, depth - 1)
            if depth <= 1:
                _release(fd)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise LockTimeout(
                    f"{busy}: {_holder(path)} has held {path} for over {timeout:.0f}s"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
    try:  # who holds it, for a waiter's message: best effort (a full disk must not leak a held lock)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": what, "since": time.time()}).encode(), 0)
    except OSError:
        pass
    with _guard:
        _held[key] = (fd, 1)
    try:
        yield
    finally:
        with _guard:
            _held.pop(key, None)
        _release(fd)


def _release(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)
    except OSError:
        pass
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
