"""The local search index: SQLite FTS5 over the notes in memory/.

Derived data, never synced: it can always be rebuilt from the files, and is
rebuilt automatically when missing, corrupt or of an older schema. Updates
are incremental: a full scan compares size and mtime and re-reads only what
changed; callers that know what changed (sync, a save) pass those paths.

Code words: FTS5's unicode61 tokenizer already splits snake_case, dotted.names
and file/paths on their punctuation, and a query term with punctuation
becomes a phrase of its parts, so `pg_bouncer.pool_size` finds exactly that
sequence. CamelCase identifiers are split into a hidden `code` column, so
`parse config` also finds `ParseConfig`. The porter stemmer handles English.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from anamnesis.notes import Note, parse_note
from anamnesis.paths import Store

SCHEMA_VERSION = "2"
MAX_INDEXED_BYTES = 200_000  # bigger notes are indexed up to this size, and reported
# (FTS5 snippets cost time quadratic in matches per note: a megabyte of log pasted into a note must not stall search)
WEIGHTS = (10.0, 5.0, 1.0, 2.0)  # title, tags, body, code
MARK_START, MARK_END = "\x02", "\x03"
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

_CAMEL_HINT = re.compile(r"[a-z0-9][A-Z]")
_IDENT_RE = re.compile(r"[A-Za-z0-9]+")
_CAMEL_SPLIT_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
def code_words(text: str) -> str:
    """The parts of CamelCase identifiers in `text`, for the hidden `code` column."""
    out: dict[str, None] = {}
    last_end = -1
    for hint in _CAMEL_HINT.finditer(text):  # rare, so scanning for it first is cheap
        start = hint.start()
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


def parse_when(value: str, *, end_of_day: bool = False) -> str:
    """'2026-11-01', '7d', '2w', '12h' -> an ISO timestamp to compare `updated` with.

    A bare date means the start of that day, or its end with `end_of_day`
    (so `--until 2026-11-01` includes notes of the 1st).
    """
    from anamnesis.errors import UsageError

    value = value.strip()
    rel = re.fullmatch(r"(\d+)\s*([hdwmy])", value)
    if rel:
        amount, unit = int(rel.group(1)), rel.group(2)
        days = {"h": 1 / 24, "d": 1, "w": 7, "m": 30, "y": 365}[unit] * amount
        try:
            when = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
        except (OverflowError, ValueError):
            raise UsageError(f"span {value!r} reaches before year 1; use a smaller one") from None
    else:
        try:
            day = dt.date.fromisoformat(value)
        except ValueError:
            try:
                when = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                raise UsageError(f"cannot read date {value!r}; use YYYY-MM-DD or a span like 7d, 2w") from None
            when = when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)
        else:
            if not end_of_day:
                return day.isoformat()  # sorts before every time of that day, and equal to a bare date
            when = dt.datetime.combine(day, dt.time(23, 59, 59), dt.UTC)
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass
class Hit:
    """One note as the index knows it (a search result or a listing row)."""

    path: str
    id: str
    title: str
    type: str
    project: str | None
    tags: list[str]
    updated: str
    created: str = ""
    machine: str = ""
    snippet: str = ""  # matches wrapped in MARK_START / MARK_END
    score: float = 0.0  # higher is better
    conflicted: bool = False
    problems: list[str] = field(default_factory=list)
    supersedes: list[str] = field(default_factory=list)  # ids this note replaces
    superseded_by: list[str] = field(default_factory=list)  # ids of notes that replace this one

    def snippet_text(self, start: str = "**", end: str = "**") -> str:
        """The snippet with matches wrapped in `start`/`end`."""
        return self.snippet.replace(MARK_START, start).replace(MARK_END, end)

    def snippet_parts(self) -> list[tuple[str, bool]]:
        """The snippet as (text, is_match) pieces, for HTML or rich rendering."""
        parts: list[tuple[str, bool]] = []
        for i, chunk in enumerate(re.split(f"[{MARK_START}{MARK_END}]", self.snippet)):
            if chunk:
                parts.append((chunk, i % 2 == 1))
        return parts

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": self.path,
            "id": self.id,
            "title": self.title,
            "type": self.type,
            "project": self.project,
            "tags": self.tags,
            "created": self.created,
            "updated": self.updated,
            "machine": self.machine,
            "conflicted": self.conflicted,
            "superseded_by": self.superseded_by,
        }
        if self.supersedes:
            data["supersedes"] = self.supersedes
        if self.snippet:
            data["snippet"] = self.snippet_text()
            data["score"] = round(self.score, 4)
        if self.problems:
            data["problems"] = self.problems
        return data


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


def printable_path(relpath: str) -> str:
    """`relpath` as SQLite can store it: a name that is not valid UTF-8 gets U+FFFD
    in place of its bad bytes (and is reported, since no note can live there)."""
    try:
        relpath.encode("utf-8")
    except UnicodeEncodeError:
        return relpath.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return relpath


def scan_tree(root: str) -> dict[str, os.stat_result]:
    """Every `.md` file under root: relative posix path -> lstat result; skips dot names.

    This is the cost of every full refresh (one lstat per note), so it is a
    tight loop: one call per entry where possible, symlinks told by st_mode.
    """
    found: dict[str, os.stat_result] = {}
    stack = [(root, "")]
    is_dir = stat.S_ISDIR
    while stack:
        folder, rel = stack.pop()
        try:
            # scandir on a descriptor stats entries relative to it (fstatat): no
            # path walk per file, a fifth of the scan on a 10,000-note store
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
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
                            stack.append((f"{folder}/{name}", f"{rel}{name}/"))
                        else:
                            key = rel + name
                            found[key if key.isascii() else printable_path(key)] = st
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append((f"{folder}/{name}", f"{rel}{name}/"))
        finally:
            os.close(fd)
    return found


class Index:
    """An open index.db for one store. Use as a context manager."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.rebuilt = False
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
            conn.close()
        except sqlite3.DatabaseError as exc:
            if not _is_damaged(exc):  # a full disk or an I/O error is no reason to throw the index away
                raise _open_error(path, exc) from None
        self._discard(path)
        conn = self._open(path)
        conn.executescript(_SCHEMA)
        self.rebuilt = True
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
        if keep_vectors:
            try:
                saved = self.conn.execute("SELECT sha, model, vec FROM vectors").fetchall()
            except sqlite3.DatabaseError:
                saved = []
        self.conn.close()
        self._discard(self.store.index_path)
        self.conn = self._open(self.store.index_path)
        self.conn.executescript(_SCHEMA)
        self.rebuilt = True
        report = self.refresh(progress=progress)
        if saved:
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
        started = time.perf_counter()
        report = RefreshReport(rebuilt=self.rebuilt)
        root = str(self.store.memory)
        known: dict[str, tuple[int, int]] = {}
        todo: list[tuple[str, os.stat_result | None, bool]] = []  # path, stat, is_symlink
        if paths is None:
            for table in ("notes", "skipped"):
                for path, size, mtime in self.conn.execute(f"SELECT path, size, mtime_ns FROM {table}"):
                    known[path] = (size, mtime)
            found = scan_tree(root)
            unchanged = 0
            is_link = stat.S_ISLNK
            for relpath, st in found.items():
                if known.get(relpath) == (st.st_size, st.st_mtime_ns):
                    unchanged += 1
                else:
                    todo.append((relpath, st, is_link(st.st_mode)))
            report.unchanged += unchanged
            todo.extend((p, None, False) for p in known.keys() - found.keys())
        else:
            for original in dict.fromkeys(paths):
                relpath = printable_path(original)
                if not relpath.lower().endswith(".md") or relpath.startswith("."):
                    continue
                full = os.path.join(root, original)
                try:
                    st = os.lstat(full)
                except OSError:
                    todo.append((relpath, None, False))
                    continue
                todo.append((relpath, st, os.path.islink(full)))
        self._apply(todo, report, progress)
        self.rebuilt = False
        report.seconds = time.perf_counter() - started
        return report

    def _apply(
        self,
        todo: list[tuple[str, os.stat_result | None, bool]],
        report: RefreshReport,
        progress: Callable[[int, int], None] | None,
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
                mtime = 0 if now - st.st_mtime < RECENT_SECONDS else st.st_mtime_ns
                problem = None
                data = b""
                if is_link:
                    problem = "is a symlink; notes must be plain files inside the store (not indexed)"
                elif "\ufffd" in relpath and not os.path.lexists(os.path.join(root, relpath)):
                    problem = "file name is not valid UTF-8 (not indexed); rename the file"
                elif not os.path.isfile(os.path.join(root, relpath)):
                    problem = "is not a regular file (not indexed)"
                else:
                    try:
                        with open(os.path.join(root, relpath), "rb") as handle:
                            data = handle.read(MAX_INDEXED_BYTES + 1)
                    except OSError as exc:
                        problem = f"cannot be read: {exc.strerror or exc} (not indexed)"
                    else:
                        if b"\0" in data[:8192]:
                            problem = "looks like a binary file, not markdown (not indexed)"
                if problem is not None:
                    self._remove(relpath)
                    conn.execute(
                        "INSERT OR REPLACE INTO skipped VALUES (?, ?, ?, ?)",
                        (relpath, st.st_size, mtime, problem),
                    )
                    report.problems.append((relpath, problem))
                    continue
                sha = hashlib.blake2b(data, digest_size=16).hexdigest()
                row = conn.execute("SELECT rowid, sha FROM notes WHERE path=?", (relpath,)).fetchone()
                if row and row[1] == sha:
                    conn.execute(
                        "UPDATE notes SET size=?, mtime_ns=? WHERE rowid=?", (st.st_size, mtime, row[0])
                    )
                    report.unchanged += 1
                    continue
                note, extra_problems = self._parse(data, relpath, st.st_size)
                self._store(note, row[0] if row else None, st.st_size, mtime, sha, extra_problems)
                if row:
                    report.updated += 1
                else:
                    report.added += 1
                problems = note.problems + extra_problems
                if problems:
                    report.problems.append((relpath, "; ".join(problems)))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('refreshed', ?)", (str(time.time()),))
            if report.changed:
                self.bump_generation()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (disk full): keep the real error
                conn.execute("ROLLBACK")
            raise

    def bump_generation(self) -> None:
        """Say that notes or vectors changed (caches of vectors key on this)."""
        self.conn.execute(
            "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT(key)"
            " DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def generation(self) -> str:
        """A value that changes whenever notes or vectors change."""
        row = self.conn.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        return str(row[0]) if row else "0"

    @staticmethod
    def _parse(data: bytes, relpath: str, size: int) -> tuple[Note, list[str]]:
        problems: list[str] = []
        if size > MAX_INDEXED_BYTES:
            problems.append(
                f"is {size / 1_000_000:.1f} MB; only the first {MAX_INDEXED_BYTES // 1000} KB is indexed"
            )
            data = data[:MAX_INDEXED_BYTES]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if size > MAX_INDEXED_BYTES and exc.start >= len(data) - 4:
                text = data[: exc.start].decode("utf-8")
            else:
                problems.append(f"is not valid UTF-8 (byte {exc.start}); undecodable bytes were replaced")
                text = data.decode("utf-8", errors="replace")
        return parse_note(text, relpath), problems

    def _store(
        self, note: Note, rowid: int | None, size: int, mtime: int, sha: str, extra_problems: list[str]
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
        conn.executemany("INSERT OR IGNORE INTO tags VALUES (?, ?)", [(t, rowid) for t in note.tags])
        conn.executemany(
            "INSERT OR IGNORE INTO supersedes VALUES (?, ?)", [(rowid, target) for target in note.supersedes]
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

    # -- reading ---------------------------------------------------------------------

    _COLUMNS = (
        "n.path, n.id, n.title, n.type, n.project, n.tags, n.updated, n.created, n.machine, n.conflicted,"
        " n.problems, n.supersedes"
    )

    def hits(self, rowids: list[int]) -> dict[int, Hit]:
        """The listing rows of these notes, with who supersedes each, by rowid."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        found = {
            r[0]: self._hit(r[1:])
            for r in self.conn.execute(
                f"SELECT n.rowid, {self._COLUMNS} FROM notes n WHERE n.rowid IN ({marks})", rowids
            )
        }
        self._mark_superseded(list(found.values()))
        return found

    def _mark_superseded(self, hits: list[Hit]) -> None:
        by_id: dict[str, list[Hit]] = {}
        for hit in hits:
            if hit.id:
                by_id.setdefault(hit.id, []).append(hit)
        if not by_id:
            return
        marks = ",".join("?" * len(by_id))
        for target, newer in self.conn.execute(
            f"SELECT s.target, n.id FROM supersedes s JOIN notes n ON n.rowid = s.note"
            f" WHERE s.target IN ({marks}) ORDER BY n.updated DESC",
            list(by_id),
        ):
            for hit in by_id[target]:
                if newer and newer != target and newer not in hit.superseded_by:
                    hit.superseded_by.append(newer)

    @staticmethod
    def _hit(row: tuple[Any, ...], snippet: str = "", score: float = 0.0) -> Hit:
        return Hit(
            path=row[0],
            id=row[1] or "",
            title=row[2] or "",
            type=row[3] or "",
            project=row[4],
            tags=(row[5] or "").split(),
            updated=row[6] or "",
            created=row[7] or "",
            machine=row[8] or "",
            conflicted=bool(row[9]),
            problems=(row[10] or "").split("; ") if row[10] else [],
            supersedes=(row[11] or "").split(),
            snippet=snippet,
            score=score,
        )

    @staticmethod
    def filter_sql(
        project: str | None, type: str | None, tag: str | None, since: str | None, until: str | None
    ) -> tuple[str, list[Any]]:
        """SQL (" AND ..." over `notes n`) and its arguments for the usual filters."""
        clauses: list[str] = []
        args: list[Any] = []
        if project:
            clauses.append("n.project = ?")
            args.append(project)
        if type:
            clauses.append("n.type = ?")
            args.append(type)
        if tag:
            clauses.append("n.rowid IN (SELECT note FROM tags WHERE tag = ?)")
            args.append(tag.lstrip("#").lower())
        if since:
            clauses.append("n.updated >= ?")
            args.append(parse_when(since))
        if until:
            clauses.append("n.updated <= ?")
            args.append(parse_when(until, end_of_day=True))
        return "".join(f" AND {c}" for c in clauses), args

    def list_notes(
        self,
        *,
        project: str | None = None,
        type: str | None = None,
        tag: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = 50,
        conflicted: bool | None = None,
    ) -> list[Hit]:
        """Notes matching the filters, most recently updated first."""
        where, args = self.filter_sql(project, type, tag, since, until)
        if conflicted is not None:
            where += " AND n.conflicted = ?"
            args.append(int(conflicted))
        sql = f"SELECT {self._COLUMNS} FROM notes n WHERE 1=1{where} ORDER BY n.updated DESC, n.path"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        hits = [self._hit(r) for r in self.conn.execute(sql, args)]
        self._mark_superseded(hits)
        return hits

    def recent(self, project: str | None = None, type: str | None = None, limit: int = 20) -> list[Hit]:
        """The most recently updated notes."""
        return self.list_notes(project=project, type=type, limit=limit)

    def conflicted(self) -> list[Hit]:
        """Notes that still carry git conflict markers."""
        return self.list_notes(conflicted=True, limit=None)

    def problems(self) -> list[tuple[str, str]]:
        """(path, what is wrong) for every note indexed with problems or skipped."""
        rows = self.conn.execute(
            "SELECT path, problems FROM notes WHERE problems IS NOT NULL"
            " UNION ALL SELECT path, problem FROM skipped ORDER BY 1"
        ).fetchall()
        return [(p, m) for p, m in rows]

    def counts(self) -> dict[str, Any]:
        """Totals by type and project, plus problems, conflicts and freshness."""
        conn = self.conn
        by_type = dict(conn.execute("SELECT type, count(*) FROM notes GROUP BY type ORDER BY 2 DESC"))
        by_project = {
            (k or "(global)"): v
            for k, v in conn.execute("SELECT project, count(*) FROM notes GROUP BY project ORDER BY 2 DESC")
        }
        refreshed = conn.execute("SELECT value FROM meta WHERE key='refreshed'").fetchone()
        return {
            "notes": sum(by_type.values()),
            "by_type": by_type,
            "by_project": by_project,
            "conflicted": conn.execute("SELECT count(*) FROM notes WHERE conflicted").fetchone()[0],
            "with_problems": conn.execute("SELECT count(*) FROM notes WHERE problems IS NOT NULL").fetchone()[
                0
            ],
            "skipped": conn.execute("SELECT count(*) FROM skipped").fetchone()[0],
            "refreshed": float(refreshed[0]) if refreshed else None,
        }

    def tags(self) -> list[tuple[str, int]]:
        """Every tag with its number of notes, most used first."""
        return [
            (t, c)
            for t, c in self.conn.execute("SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY 2 DESC, 1")
        ]

    def find_ref(self, ref: str) -> list[str]:
        """Paths a short reference could mean: an id, an id prefix, a file name or slug."""
        conn = self.conn
        ref = ref.strip()
        for sql, arg in (
            ("SELECT path FROM notes WHERE id = ?", ref),
            ("SELECT path FROM notes WHERE path = ?", ref),
            ("SELECT path FROM notes WHERE path LIKE ? ESCAPE '\\'", "%/" + _like(ref)),
            ("SELECT path FROM notes WHERE path LIKE ? ESCAPE '\\'", "%/" + _like(ref) + ".md"),
            ("SELECT path FROM notes WHERE id LIKE ? ESCAPE '\\'", _like(ref) + "%"),
            # the leading words of a file name ("use-pg" for use-pg-bouncer-7k2m9q4x1c.md), whole words only:
            # `rm x -y` must not pick whichever note's name happens to start with an x
            ("SELECT path FROM notes WHERE path LIKE ? ESCAPE '\\'", "%/" + _like(ref.rstrip("-")) + "-%"),
        ):
            if sql.endswith("'\\'") and len(ref) < 4 and "id LIKE" in sql:
                continue
            found = [r[0] for r in conn.execute(sql + " ORDER BY path LIMIT 20", (arg,))]
            if found:
                return found
        return []


def _open_error(path: os.PathLike[str] | str, exc: sqlite3.DatabaseError) -> Exception:
    """The one-line error for an index that cannot be opened and must not be thrown away."""
    from anamnesis.errors import AnamnesisError, LockTimeout

    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code in (5, 6):  # SQLITE_BUSY, SQLITE_LOCKED
        return LockTimeout(f"the search index {path} is busy (another process holds it); try again")
    if code in (10, 13):  # SQLITE_IOERR, SQLITE_FULL: the writers say what a full disk kept (store._failed)
        return exc
    return AnamnesisError(f"cannot open the search index {path}: {exc} (is it a file you can write?)")


def _is_damaged(exc: sqlite3.DatabaseError) -> bool:
    """True when the file is corrupt or not a database at all (rebuilding it is the cure)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    return "malformed" in str(exc) or "not a database" in str(exc)


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def open_index(store: Store) -> Index:
    """The store's index, created or rebuilt if it is missing, corrupt or outdated.

    A fresh or rebuilt index is filled before it is returned.
    """
    index = Index(store)
    if index.rebuilt and store.memory.exists():
        index.refresh()
        index.rebuilt = True
    return index
