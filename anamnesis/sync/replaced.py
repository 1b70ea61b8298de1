"""Writes that land on a note in the instant a checkout replaces it.

git replaces a file by unlinking it and writing a new one. A program that
opened the note just before (a script appending a line, an editor saving in
place) writes into the unlinked file, and without this its write is gone:
git had checked the file was unchanged a moment earlier, and no later sync
can see a file that no longer has a name. Holding the old file open across
the checkout keeps it readable; what changed in it meanwhile is laid over the
new version, uncommitted, for the next sync to carry everywhere.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from anamnesis.base.fsutil import atomic_write_bytes
from anamnesis.base.notes import has_conflict_markers
from anamnesis.store import Side, lay_over

# Open files held across one checkout: the most recently written first (a program writing
# now is writing the files it wrote last), well under the usual limit of 1,024 per process.
HELD_AT_MOST = 256


class LateWrites(NamedTuple):
    kept: list[str]  # the files a late write was laid back into (uncommitted)
    blocks: list[str]  # those where it clashed with the incoming version: a conflict block


@dataclass
class _Held:
    path: str
    fd: int
    before: bytes


class HeldAcrossCheckout:
    """The files a checkout will replace, held open from before it starts until it is done."""

    def __init__(self, repo: Path, paths: list[str], at_most: int = HELD_AT_MOST) -> None:
        self.repo = repo
        self.held: list[_Held] = []
        for path in _newest_first(repo, paths)[:at_most]:
            try:
                fd = os.open(repo / path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                self.held.append(_Held(path, fd, _read_all(fd)))
            except OSError:
                os.close(fd)

    def __enter__(self) -> HeldAcrossCheckout:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for held in self.held:
            os.close(held.fd)
        self.held = []

    def keep_late_writes(self, machine: str) -> LateWrites:
        """Lay every write that went into a file the checkout replaced over what is there now.
        A file still in place (git left it, or failed before it) holds its writes itself."""
        late = LateWrites([], [])
        for held in self.held:
            target = self.repo / held.path
            old = os.fstat(held.fd)
            try:
                now_stat: os.stat_result | None = os.lstat(target)
            except FileNotFoundError:
                now_stat = None
            if now_stat is not None and (now_stat.st_dev, now_stat.st_ino) == (old.st_dev, old.st_ino):
                continue
            written = _read_all(held.fd)
            if written == held.before:
                continue
            text = _kept_text(held.path, held.before, written, target, now_stat, machine)
            if text is None:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, text)
            late.kept.append(held.path)
            if has_conflict_markers(text.decode("utf-8", "surrogateescape")):
                late.blocks.append(held.path)
        return late


def _kept_text(
    path: str, before: bytes, written: bytes, target: Path, now_stat: os.stat_result | None, machine: str
) -> bytes | None:
    """What the file should hold: the late write over the incoming version (an edit beats a
    deletion); None when it holds that already."""
    if now_stat is None:
        return written
    if not stat.S_ISREG(now_stat.st_mode):
        return None  # the checkout put a link or folder there: not a note to lay text over
    now = target.read_bytes()
    if now == written:
        return None
    if now == before:  # the checkout left the old text after all: the write is the whole change
        return written
    decode = "utf-8", "surrogateescape"
    merged = lay_over(
        path,
        before.decode(*decode),
        Side(f"{machine} (not committed)", written.decode(*decode)),
        Side("incoming", now.decode(*decode)),
    )
    return merged.encode(*decode)


def _newest_first(repo: Path, paths: list[str]) -> list[str]:
    stamped: list[tuple[int, str]] = []
    for path in paths:
        try:
            st = os.lstat(repo / path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            stamped.append((st.st_mtime_ns, path))
    return [path for _mtime, path in sorted(stamped, reverse=True)]


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
