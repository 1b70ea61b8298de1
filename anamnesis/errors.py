"""Errors the adapters turn into one clear line and an exit code.

Every failure a user can cause or fix is an `AnamnesisError`; anything else
is a bug and may show a traceback.
"""

from __future__ import annotations


class AnamnesisError(Exception):
    """A problem to report in one line; `exit_code` is what the CLI exits with."""

    exit_code: int = 1


class UsageError(AnamnesisError):
    """The caller asked for something malformed (bad type, empty title, ...)."""

    exit_code = 2


class StoreMissing(AnamnesisError):
    """No store at ANAMNESIS_HOME yet; `anamnesis init` creates one."""

    exit_code = 3


class OldStore(StoreMissing):
    """ANAMNESIS_HOME holds a store of the anamnesis-memory 0.1.3 package: not ours to open or change."""


class NoteNotFound(AnamnesisError):
    """A note reference matched nothing."""

    exit_code = 4


class OutsideStore(AnamnesisError):
    """A path would leave memory/ (traversal, absolute path, symlink)."""

    exit_code = 2


class NoteChanged(AnamnesisError):
    """The note changed on disk (or was deleted) since the caller read it; nothing was written."""


class LockTimeout(AnamnesisError):
    """Another process held the store lock for longer than we were willing to wait."""

    exit_code = 5


class GitError(AnamnesisError):
    """A git command failed; the message carries git's own words."""

    exit_code = 6


class DiskFull(AnamnesisError):
    """The disk (or the quota) holding the store ran out of space; the message says what was kept."""

    exit_code = 8


class IndexLocked(LockTimeout):
    """Another process held the search index (SQLite busy or locked) for longer than we waited."""


class IndexCorrupt(AnamnesisError):
    """The search index file is damaged; `anamnesis reindex` rebuilds it from the notes."""
