"""The local search index, ingestion side: SQLite FTS5 over the notes in memory/.

Derived data, never synced: it can always be rebuilt from the files, and is
rebuilt automatically when missing, corrupt or of an older schema. Updates
are incremental: a full scan compares size and mtime and re-reads only what
changed; callers that know what changed (sync, a save) pass those paths.
This module writes the index; reading it (rows, filters, listings) is
`anamnesis.search.catalog`, and `Index` is a `Catalog` that can also write.

Code words: FTS5's unicode61 tokenizer already splits snake_case, dotted.names
and file/paths on their punctuation, and a query term with punctuation
becomes a phrase of its parts, so `pg_bouncer.pool_size` finds exactly that
sequence. CamelCase identifiers are split into a hidden `code` column, so
`parse config` also finds `ParseConfig`. The porter stemmer handles English.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from anamnesis.base.errors import AnamnesisError, IndexCorrupt
from anamnesis.base.notes import Note, Problem, ProblemKind, is_note_path, parse_note
from anamnesis.base.paths import Store
from anamnesis.search.catalog import MARK_END as MARK_END
from anamnesis.search.catalog import MARK_START as MARK_START
from anamnesis.search.catalog import Catalog, index_error, translated_errors
from anamnesis.search.catalog import Hit as Hit
from anamnesis.search.scan import (
    CHILD_SHARE,
    CHILD_SHARE_WHILE_READING,
    FileStat,
    PendingScan,
    Row,
    Span,
    folder_span,
    printable_path,
    start_scan,
)

SCHEMA_VERSION = "3"
# from an older schema_version: statements that bring its index.db up to this one (else it is rebuilt)
_MIGRATIONS = {
    "2": ["CREATE INDEX IF NOT EXISTS notes_stat ON notes(path, size, mtime_ns)"],
}
MAX_INDEXED_BYTES = 200_000  # bigger notes are indexed up to this size, and reported
# (FTS5 snippets cost time quadratic in matches per note: a megabyte of log pasted into a note must not stall search)
RECENT_SECONDS = 2.0  # files this fresh are re-read on the next scan (mtime granularity)

_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE notes(
    rowid INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, sha TEXT NOT NULL,
    id TEXT, type TEXT, title TEXT, project TEXT, tags TEXT,
    created TEXT, updated TEXT, machine TEXT, source TEXT,
    conflicted INTEGER NOT NULL DEFAULT 0, problems TEXT, supersedes TEXT
);
CREATE INDEX notes_id ON notes(id);
CREATE INDEX notes_project ON notes(project, updated);
CREATE INDEX notes_updated ON notes(updated);
CREATE INDEX notes_stat ON notes(path, size, mtime_ns);  -- a full refresh reads these of every note, and nothing else
CREATE TABLE tags(tag TEXT NOT NULL, note INTEGER NOT NULL, PRIMARY KEY(tag, note)) WITHOUT ROWID;
CREATE TABLE supersedes(note INTEGER NOT NULL, target TEXT NOT NULL, PRIMARY KEY(target, note)) WITHOUT ROWID;
CREATE INDEX supersedes_note ON supersedes(note);
CREATE TABLE vectors(note INTEGER PRIMARY KEY, sha TEXT NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL);
CREATE TABLE skipped(path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, problem TEXT);
CREATE VIRTUAL TABLE fts USING fts5(
    title, tags, body, code,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');
"""

# an upper-case letter after a lower-case one or a digit; matched at the capital and checked
# behind, because a search led by the rare [A-Z] scans a note twice as fast as one led by [a-z0-9]
_CAMEL_HINT = re.compile(r"[A-Z](?<=[a-z0-9][A-Z])")
_IDENT_RE = re.compile(r"[A-Za-z0-9]+")
_CAMEL_SPLIT_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def code_words(text: str) -> str:
    """The parts of CamelCase identifiers in `text`, for the hidden `code` column."""
    out: dict[str, None] = {}
    last_end = -1
    for hint in _CAMEL_HINT.finditer(text):  # rare, so scanning for it first is cheap
        start = hint.start() - 1
        if start < last_end:
            continue
        while start > 0 and text[start - 1].isalnum():
            start -= 1
        ident_match = _IDENT_RE.match(text, start)
        if ident_match is None:
            continue
        last_end = ident_match.end()
        parts = _CAMEL_SPLIT_RE.findall(ident_match.group())
        if len(parts) > 1:
            out.setdefault(" ".join(parts), None)
    return "\n".join(out)


@dataclass
class RefreshReport:
    """What one refresh changed, and which files it could not index."""

    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    rebuilt: bool = False
    problems: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "rebuilt": self.rebuilt,
            "problems": [{"path": p, "problem": m} for p, m in self.problems],
            "seconds": round(self.seconds, 4),
        }


class Index(Catalog):
    """An open index.db for one store, to read and to write. Use as a context manager."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.rebuilt = False
        self.empty = False  # created just now and not filled yet: a rebuild need not start over
        self.in_memory = False  # a store this process may not write: an index of its own, in memory
        self.conn = self._connect()

    # -- lifecycle -----------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        path = self.store.index_path
        fresh = not path.exists()
        try:
            conn = self._open(path)
            if not fresh:
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                if row and row[0] == SCHEMA_VERSION:
                    return conn
                if row and row[0] in _MIGRATIONS and self._migrate(conn, _MIGRATIONS[row[0]]):
                    return conn
            conn.close()
        except sqlite3.DatabaseError as exc:
            if _not_ours_to_write(exc, path):  # a read-only mount, another user's store: still readable
                return self._in_memory()
            if not _is_damaged(exc):  # a full disk or an I/O error is no reason to throw the index away
                raise _open_error(path, exc) from None
        return self._create()

    def _in_memory(self) -> sqlite3.Connection:
        """An empty index in memory, for a store whose index.db this process may not write."""
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.executescript(_SCHEMA)
        self.rebuilt = self.empty = self.in_memory = True
        return conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection, statements: list[str]) -> bool:
        """Bring an index of an older schema up to this one in place (far quicker than a rebuild)."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in statements:
                conn.execute(statement)
            conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (SCHEMA_VERSION,))
            conn.execute("COMMIT")
        except sqlite3.OperationalError:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return False  # rebuilt instead
        return True

    def _create(self) -> sqlite3.Connection:
        """A new, empty index in place of whatever was there."""
        self._discard(self.store.index_path)
        conn = self._open(self.store.index_path)
        with translated_errors():
            conn.executescript(_SCHEMA)
        self.rebuilt = True
        self.empty = True
        return conn

    @staticmethod
    def _open(path: os.PathLike[str] | str) -> sqlite3.Connection:
        conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @staticmethod
    def _discard(path: os.PathLike[str] | str) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{path}{suffix}")
            except FileNotFoundError:
                pass

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------

    def rebuild(
        self, progress: Callable[[int, int], None] | None = None, *, keep_vectors: bool = False
    ) -> RefreshReport:
        """Drop everything and index every note again.

        With `keep_vectors`, semantic vectors of notes whose text did not
        change are carried over (matched by content hash), so a rebuild does
        not mean embedding everything again.
        """
        saved: list[tuple[str, str, bytes]] = []
        if not self.empty:  # a new index (there was none, or a damaged one) is filled once, not twice
            if keep_vectors:
                try:
                    saved = self.conn.execute("SELECT sha, model, vec FROM vectors").fetchall()
                except sqlite3.DatabaseError:
                    saved = []
            self.conn.close()
            self.conn = self._create()
        report = self.refresh(progress=progress)
        report.rebuilt = True
        if saved:
            with translated_errors():
                by_sha = dict(self.conn.execute("SELECT sha, rowid FROM notes"))
                with self.conn:
                    self.conn.execute("BEGIN IMMEDIATE")
                    self.conn.executemany(
                        "INSERT OR REPLACE INTO vectors(note, sha, model, vec) VALUES (?, ?, ?, ?)",
                        [(by_sha[sha], sha, model, vec) for sha, model, vec in saved if sha in by_sha],
                    )
                    self.bump_generation()
        return report

    def refresh(
        self,
        paths: Iterable[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> RefreshReport:
        """Bring the index up to date with the files; only changed files are read.

        `paths` limits the work to those memory/-relative paths (what a sync
        or a save changed); None scans the whole tree by size and mtime.
        """
        if paths is None:
            return self.start_refresh().finish(progress)
        with translated_errors():
            started = time.perf_counter()
            root = str(self.store.memory)
            todo: list[tuple[str, FileStat | None, bool]] = []  # path, lstat, is_symlink
            for original in dict.fromkeys(paths):
                relpath = printable_path(original)
                if not is_note_path(relpath):
                    continue
                full = os.path.join(root, original)
                try:
                    info = os.lstat(full)
                except OSError:
                    todo.append((relpath, None, False))
                    continue
                todo.append(
                    (relpath, (info.st_size, info.st_mtime_ns, info.st_mode), stat.S_ISLNK(info.st_mode))
                )
            report = RefreshReport(rebuilt=self.rebuilt)
            self._apply(todo, report, progress)
            self.rebuilt = self.empty = False
            report.seconds = time.perf_counter() - started
            return report

    def start_refresh(self, reading: bool = False) -> PendingRefresh:
        """A full refresh, begun: its scan is under way (in a child process, on a big store) when
        this returns, and `finish()` applies what it found. With `reading`, this process is about
        to read the index meanwhile, so the child takes the bigger part (see `anamnesis.sync.freshness`)."""
        with translated_errors():
            behind = _behind_size(self.store)  # before the scan: what a change during it adds is kept
            started, scan_started = time.perf_counter(), time.time()
            expected = self.conn.execute("SELECT count(*) FROM notes").fetchone()[0]
            share = CHILD_SHARE_WHILE_READING if reading else CHILD_SHARE
            scan = start_scan(str(self.store.memory), expected, self._notes_under, self._recorded, share)
            return PendingRefresh(self, scan, behind, started, scan_started)

    def _finish_refresh(
        self, pending: PendingRefresh, progress: Callable[[int, int], None] | None
    ) -> RefreshReport:
        with translated_errors():
            changes = pending.scan.finish()
            report = RefreshReport(rebuilt=self.rebuilt, unchanged=changes.unchanged)
            todo = [(path, st, st is not None and stat.S_ISLNK(st[2])) for path, st in changes.changed]
            # a new index filled from a scan (one entry per path): no row to look up or replace
            self._apply(todo, report, progress, scanned=pending.scan_started, fresh=self.empty)
            self.rebuilt = self.empty = False
            _clear_behind(self.store, pending.behind)
            report.seconds = time.perf_counter() - pending.started
            return report

    def _apply(
        self,
        todo: list[tuple[str, FileStat | None, bool]],
        report: RefreshReport,
        progress: Callable[[int, int], None] | None,
        scanned: float | None = None,
        fresh: bool = False,
    ) -> None:
        conn = self.conn
        root = str(self.store.memory)
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for done, (relpath, st, is_link) in enumerate(todo, 1):
                if progress and (done % 250 == 0 or done == len(todo)):
                    progress(done, len(todo))
                if st is None:
                    if self._remove(relpath):
                        report.removed += 1
                    continue
                size, mtime, mode = st
                if now - mtime / 1e9 < RECENT_SECONDS:
                    mtime = 0
                problem, data = _read(root, relpath, mode, is_link)
                if problem is not None:
                    self._remove(relpath)
                    conn.execute(
                        "INSERT OR REPLACE INTO skipped VALUES (?, ?, ?, ?)",
                        (relpath, size, mtime, problem),
                    )
                    report.problems.append((relpath, problem))
                    continue
                sha = hashlib.blake2b(data, digest_size=16).hexdigest()
                row = (
                    None
                    if fresh
                    else conn.execute("SELECT rowid, sha FROM notes WHERE path=?", (relpath,)).fetchone()
                )
                if row and row[1] == sha:
                    conn.execute("UPDATE notes SET size=?, mtime_ns=? WHERE rowid=?", (size, mtime, row[0]))
                    report.unchanged += 1
                    continue
                note, extra_problems = self._parse(data, relpath, size)
                self._store(note, row[0] if row else None, size, mtime, sha, extra_problems, fresh)
                if row:
                    report.updated += 1
                else:
                    report.added += 1
                problems = note.problems + extra_problems
                if problems:
                    report.problems.append((relpath, "; ".join(problems)))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('refreshed', ?)", (str(time.time()),))
            if scanned is not None:  # a full scan that started then saw every file as it was
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('scanned', ?)", (repr(scanned),))
            if report.changed:
                self.bump_generation()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (disk full): keep the real error
                conn.execute("ROLLBACK")
            raise

    def _recorded(self, spans: list[Span]) -> Iterator[Row]:
        """Path, size and mtime of every indexed or skipped file whose path lies in one of the
        spans: what a scan is compared with (each span is one range of the covering index)."""
        arms: list[str] = []
        args: list[str] = []
        for table, extra in (("notes", ""), ("skipped", " AND path NOT IN (SELECT path FROM notes)")):
            for low, high in spans:
                bound = "" if high is None else " AND path < ?"
                arms.append(f"SELECT path, size, mtime_ns FROM {table} WHERE path >= ?{bound}{extra}")
                args += [low] if high is None else [low, high]
        return self.conn.execute(" UNION ALL ".join(arms), args)

    def _notes_under(self, prefix: str) -> int:
        """How many indexed notes lie under a folder (prefix ends in "/"): how a scan shares out its work."""
        row = self.conn.execute("SELECT count(*) FROM notes WHERE path >= ? AND path < ?", folder_span(prefix)).fetchone()
        return int(row[0])

    def bump_generation(self) -> None:
        """Say that notes or vectors changed (caches of vectors key on this)."""
        self.conn.execute(
            "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT(key)"
            " DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def store_vectors(self, model: str, vectors: list[tuple[int, str, bytes]]) -> None:
        """Keep (rowid, text sha, vector) from `model` for these notes, in one transaction: a kill
        loses this batch, never half of it."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany(
                "INSERT OR REPLACE INTO vectors(note, sha, model, vec) VALUES (?, ?, ?, ?)",
                [(rowid, sha, model, vec) for rowid, sha, vec in vectors],
            )
            self.bump_generation()
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _parse(data: bytes, relpath: str, size: int) -> tuple[Note, list[Problem]]:
        problems: list[Problem] = []
        if size > MAX_INDEXED_BYTES:
            problems.append(
                Problem(
                    ProblemKind.TOO_BIG,
                    f"is {size / 1_000_000:.1f} MB; only the first {MAX_INDEXED_BYTES // 1000} KB is indexed",
                )
            )
            data = data[:MAX_INDEXED_BYTES]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if size > MAX_INDEXED_BYTES and exc.start >= len(data) - 4:
                text = data[: exc.start].decode("utf-8")
            else:
                problems.append(
                    Problem(
                        ProblemKind.NOT_UTF8, f"is not valid UTF-8 (byte {exc.start}); undecodable bytes were replaced"
                    )
                )
                text = data.decode("utf-8", errors="replace")
        return parse_note(text, relpath), problems

    def _store(
        self,
        note: Note,
        rowid: int | None,
        size: int,
        mtime: int,
        sha: str,
        extra_problems: list[Problem],
        fresh: bool = False,
    ) -> None:
        conn = self.conn
        problems = "; ".join(note.problems + extra_problems) or None
        values = (
            note.path,
            size,
            mtime,
            sha,
            note.id,
            note.type,
            note.title,
            note.project,
            " ".join(note.tags),
            note.created,
            note.updated,
            note.machine,
            note.source,
            int(note.conflicted),
            problems,
            " ".join(note.supersedes) or None,
        )
        if not fresh:  # a new index has no skipped rows
            conn.execute("DELETE FROM skipped WHERE path=?", (note.path,))
        if rowid is None:
            cur = conn.execute(
                "INSERT INTO notes(path, size, mtime_ns, sha, id, type, title, project, tags, created,"
                " updated, machine, source, conflicted, problems, supersedes)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                values,
            )
            rowid = int(cur.lastrowid or 0)
        else:
            conn.execute(
                "UPDATE notes SET path=?, size=?, mtime_ns=?, sha=?, id=?, type=?, title=?, project=?,"
                " tags=?, created=?, updated=?, machine=?, source=?, conflicted=?, problems=?, supersedes=?"
                " WHERE rowid=?",
                (*values, rowid),
            )
            conn.execute("DELETE FROM fts WHERE rowid=?", (rowid,))
            conn.execute("DELETE FROM tags WHERE note=?", (rowid,))
            conn.execute("DELETE FROM supersedes WHERE note=?", (rowid,))
        if note.tags:  # (an executemany of nothing still costs a statement: most notes have no links)
            conn.executemany("INSERT OR IGNORE INTO tags VALUES (?, ?)", [(t, rowid) for t in note.tags])
        if note.supersedes:
            conn.executemany(
                "INSERT OR IGNORE INTO supersedes VALUES (?, ?)",
                [(rowid, target) for target in note.supersedes],
            )
        conn.execute(
            "INSERT INTO fts(rowid, title, tags, body, code) VALUES (?, ?, ?, ?, ?)",
            (rowid, note.title, " ".join(note.tags), note.body, code_words(note.title + "\n" + note.body)),
        )

    def _remove(self, relpath: str) -> bool:
        conn = self.conn
        conn.execute("DELETE FROM skipped WHERE path=?", (relpath,))
        row = conn.execute("SELECT rowid FROM notes WHERE path=?", (relpath,)).fetchone()
        if not row:
            return False
        conn.execute("DELETE FROM fts WHERE rowid=?", (row[0],))
        conn.execute("DELETE FROM tags WHERE note=?", (row[0],))
        conn.execute("DELETE FROM supersedes WHERE note=?", (row[0],))
        conn.execute("DELETE FROM vectors WHERE note=?", (row[0],))
        conn.execute("DELETE FROM notes WHERE rowid=?", (row[0],))
        return True


def _read(root: str, relpath: str, mode: int, is_link: bool) -> tuple[Problem | None, bytes]:
    """Why the file is not indexed at all (with its kind), else None and its first bytes."""
    if is_link:
        return Problem(ProblemKind.SYMLINK, "is a symlink; notes must be plain files inside the store (not indexed)"), b""
    if "\ufffd" in relpath and not os.path.lexists(os.path.join(root, relpath)):
        return Problem(ProblemKind.BAD_FILE_NAME, "file name is not valid UTF-8 (not indexed); rename the file"), b""
    if not stat.S_ISREG(mode):  # the mode is the file's own (lstat), links are told apart above
        return Problem(ProblemKind.NOT_REGULAR, "is not a regular file (not indexed)"), b""
    try:
        with open(os.path.join(root, relpath), "rb") as handle:
            data = handle.read(MAX_INDEXED_BYTES + 1)
    except OSError as exc:
        return Problem(ProblemKind.UNREADABLE, f"cannot be read: {exc.strerror or exc} (not indexed)"), b""
    if b"\0" in data[:8192]:
        return Problem(ProblemKind.BINARY, "looks like a binary file, not markdown (not indexed)"), b""
    return None, data


def file_problems(store: Store, relpath: str) -> list[Problem]:
    """What a refresh finds wrong with one file under memory/, each with its kind (the index keeps
    only the words): how `doctor` attaches a fix to what `Catalog.problems` lists."""
    root = str(store.memory)
    try:
        st = os.lstat(os.path.join(root, relpath))
    except OSError:
        st = None
    if st is None and "\ufffd" not in relpath:
        return []  # gone since the refresh
    mode = st.st_mode if st is not None else 0
    problem, data = _read(root, relpath, mode, stat.S_ISLNK(mode))
    if problem is not None:
        return [problem]
    note, extra = Index._parse(data, relpath, st.st_size if st is not None else 0)
    return note.problems + extra


def _open_error(path: os.PathLike[str] | str, exc: sqlite3.DatabaseError) -> Exception:
    """The one-line error for an index that cannot be opened and must not be thrown away."""
    mapped = index_error(exc, f"the search index {path}")
    if mapped is not None:
        return mapped
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code in (10, 13):  # SQLITE_IOERR, SQLITE_FULL: the writers say what a full disk kept (transaction._failed)
        return exc
    return AnamnesisError(f"cannot open the search index {path}: {exc} (is it a file you can write?)")


@dataclass
class PendingRefresh:
    """A full refresh whose scan is under way (`Index.start_refresh`); `finish()` completes it."""

    index: Index
    scan: PendingScan
    behind: int  # the size of the watch marker before the scan began
    started: float  # perf_counter, for the report
    scan_started: float  # wall clock: the index saw every file as it was then

    def finish(self, progress: Callable[[int, int], None] | None = None) -> RefreshReport:
        """Collect the scan (always waiting for its child) and index what changed."""
        return self.index._finish_refresh(self, progress)


_READONLY, _CANTOPEN, _PERM = 8, 14, 3  # SQLite's result codes for a file this process may not write


def _not_ours_to_write(exc: sqlite3.DatabaseError, path: Path) -> bool:
    """True when SQLite may not write the index because this process may not write there (a
    read-only file, folder or mount), not because something else is wrong (a folder in its place)."""
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code == _READONLY:
        return True
    if code not in (_CANTOPEN, _PERM) or path.is_dir() or not path.parent.is_dir():
        return False
    from anamnesis.base.fsutil import write_problem  # lazy: a store that will not open; off the hooks

    problem = write_problem(path.parent)  # found by writing there, as everywhere else
    return problem is not None and problem.kind in ("read-only", "denied")


def _is_damaged(exc: sqlite3.DatabaseError) -> bool:
    """True when SQLite says the file is corrupt or not a database at all (rebuilding it is the
    cure): by its result code, as `catalog.index_error` reads it, never by the message's words."""
    return isinstance(index_error(exc), IndexCorrupt)


# -- the marker a running watch keeps (see anamnesis.sync.freshness) ---------------------------
#
# `anamnesis watch` sees every change to memory/ as it happens. For each one it
# appends a byte to state/index-behind (`mark_behind`): "some file changed that a
# full scan has not seen yet". A full scan notes the marker's size before it
# starts and, once its changes are committed, removes the marker only if no
# byte was added meanwhile (`_clear_behind`); it also records in the index when
# it started (meta 'scanned'). `anamnesis.sync.freshness` decides from these and
# watch's heartbeat whether a reader may skip its own scan.

BEHIND_NAME = "index-behind"


def behind_path(store: Store) -> str:
    """Where watch marks the index behind the files."""
    return os.path.join(store.state_dir, BEHIND_NAME)


def mark_behind(store: Store) -> None:
    """Say that a file in memory/ changed (watch calls this for every change it sees).

    One byte appended: cheap, and the size only grows, so a scan can tell
    whether a change came in while it ran.
    """
    fd = os.open(behind_path(store), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, b".")
    finally:
        os.close(fd)


def _behind_size(store: Store) -> int:
    """The marker's size, -1 when there is none."""
    try:
        return os.stat(behind_path(store)).st_size
    except OSError:
        return -1


def _clear_behind(store: Store, seen: int) -> None:
    """After a full scan: remove the marker unless a change was marked while the scan ran."""
    if seen < 0:
        return
    path = behind_path(store)
    claimed = f"{path}.{os.getpid()}.{time.monotonic_ns()}"
    try:
        os.rename(path, claimed)  # watch's next mark makes a new file: none is lost in between
    except OSError:
        return  # another scan cleared it first
    try:
        if os.stat(claimed).st_size != seen:
            mark_behind(store)  # changed during the scan: the next reader scans again
    except OSError:
        pass
    finally:
        try:
            os.unlink(claimed)
        except OSError:
            pass


def open_index(store: Store) -> Index:
    """The store's index, created or rebuilt if it is missing, corrupt or outdated.

    A fresh or rebuilt index is filled before it is returned.
    """
    index = Index(store)
    if index.rebuilt and store.memory.exists():
        index.refresh()
        index.rebuilt = True
    return index


def last_scan(index: Index) -> float:
    """When the index's last full scan started (0.0 for never): every change before it is indexed."""
    row = index.conn.execute("SELECT value FROM meta WHERE key='scanned'").fetchone()
    try:
        return float(row[0]) if row else 0.0
    except ValueError:
        return 0.0
