"""Errors the adapters turn into one clear line and an exit code.

Every failure a user can cause or fix is an `AnamnesisError`; anything else
is a bug and may show a traceback.
"""

from __future__ import annotations

from enum import IntEnum, unique


@unique
class ExitCode(IntEnum):
    """Every exit status of the `anamnesis` command, in one place (docs/cli.md and docs/sync.md say
    what each means); scripts and timers branch on them, so a value never changes meaning."""

    OK = 0
    FAILED = 1  # a command failed, or `doctor` found problems
    USAGE = 2  # bad input
    NO_STORE = 3
    NOT_FOUND = 4  # no note (or peer) of that name
    BUSY = 5  # another process held the store lock too long
    GIT = 6  # a local git command failed
    SEMANTIC_UNAVAILABLE = 7
    DISK_FULL = 8
    LOCAL_FAULT = 9  # this machine cannot write its own store: read-only, no permission
    CONFLICT = 10  # sync recorded a conflict
    UNREACHABLE = 11  # sync could not reach a peer now (off, asleep, no network): it retries
    REFUSED = 12  # memory/ left mid-rebase/merge or on another branch by hand
    STALE_PEER = 13  # `sync --fail-after`: a peer unreachable for longer than that
    PEER_MISCONFIGURED = 14  # a peer's answer says it will never work as set up: a person must act
    AGENT_CONFIG = 15  # an agent's config file cannot be edited safely (a person must fix or name another agent)
    HANGUP = 129  # stopped by SIGHUP
    INTERRUPTED = 130  # stopped by SIGINT (Ctrl-C)
    TERMINATED = 143  # stopped by SIGTERM


SYNC_EXIT_CODES = (
    ExitCode.OK,
    ExitCode.FAILED,
    ExitCode.NO_STORE,
    ExitCode.NOT_FOUND,
    ExitCode.BUSY,
    ExitCode.GIT,
    ExitCode.DISK_FULL,
    ExitCode.LOCAL_FAULT,
    ExitCode.CONFLICT,
    ExitCode.UNREACHABLE,
    ExitCode.REFUSED,
    ExitCode.STALE_PEER,
    ExitCode.PEER_MISCONFIGURED,
    ExitCode.HANGUP,
    ExitCode.INTERRUPTED,
    ExitCode.TERMINATED,
)
"""What `anamnesis sync` may exit with (docs/sync.md has a row for each)."""

TIMER_SUCCESS = (ExitCode.CONFLICT, ExitCode.UNREACHABLE, ExitCode.TERMINATED)
"""Non-zero sync exits the timer counts as success: normal outcomes that need nobody now."""


class AnamnesisError(Exception):
    """A problem to report in one line; `exit_code` is what the CLI exits with."""

    exit_code: int = ExitCode.FAILED


class UsageError(AnamnesisError):
    """The caller asked for something malformed (bad type, empty title, ...)."""

    exit_code = ExitCode.USAGE


class StoreMissing(AnamnesisError):
    """No store at ANAMNESIS_HOME yet; `anamnesis init` creates one."""

    exit_code = ExitCode.NO_STORE


class OldStore(StoreMissing):
    """ANAMNESIS_HOME holds a store of the anamnesis-memory 0.1.3 package: not ours to open or change."""


class NoteNotFound(AnamnesisError):
    """A note reference matched nothing."""

    exit_code = ExitCode.NOT_FOUND


class OutsideStore(AnamnesisError):
    """A path would leave memory/ (traversal, absolute path, symlink)."""

    exit_code = ExitCode.USAGE


class NoteChanged(AnamnesisError):
    """The note changed on disk (or was deleted) since the caller read it; nothing was written."""


class LockTimeout(AnamnesisError):
    """Another process held the store lock for longer than we were willing to wait."""

    exit_code = ExitCode.BUSY


class GitError(AnamnesisError):
    """A git command failed. The message is for people; callers branch on the fields: `command`
    (e.g. "git fetch"), `reason` (git's own fatal/error line), `stderr` (all it said) and
    `returncode` (None when git never ran or was stopped)."""

    exit_code = ExitCode.GIT

    def __init__(
        self, message: str, *, command: str = "", reason: str = "", stderr: str = "", returncode: int | None = None
    ) -> None:
        super().__init__(message)
        self.command = command
        self.reason = reason or message
        self.stderr = stderr
        self.returncode = returncode


class DiskFull(AnamnesisError):
    """The disk (or the quota) holding the store ran out of space; the message says what was kept."""

    exit_code = ExitCode.DISK_FULL


class LocalFault(AnamnesisError):
    """This machine cannot write its own store (a read-only file system, files it has no permission
    for): no peer is to blame, and nothing retries it away."""

    exit_code = ExitCode.LOCAL_FAULT


class IndexLocked(LockTimeout):
    """Another process held the search index (SQLite busy or locked) for longer than we waited."""


class IndexCorrupt(AnamnesisError):
    """The search index file is damaged; `anamnesis reindex` rebuilds it from the notes."""
