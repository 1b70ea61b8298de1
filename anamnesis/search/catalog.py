"""Reading the search index: notes as `Hit` rows, the usual filters, listings.

The query side of index.db. `anamnesis.search.index` fills the tables (ingestion);
this module only reads them. Every other module — the adapters, doctor, the
store, the rankers (`anamnesis.search.ranking`), `anamnesis.search` and semantic
search — asks one of `Catalog`'s named methods instead of writing SQL
(tests/search/test_sql_home.py keeps it so). `Catalog` wraps one open connection;
`Index` is a `Catalog` that can also write.

SQLite's own errors do not leave this layer as text to be matched: a busy
database becomes `IndexLocked`, a damaged one `IndexCorrupt` (see
`index_error`). A full disk stays SQLite's error, for the writers to say what
they kept.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import wraps
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from anamnesis.base.errors import IndexCorrupt, IndexLocked, UsageError
from anamnesis.base.notes import normalize_tags

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

MARK_START, MARK_END = "\x02", "\x03"

_P = ParamSpec("_P")
_T = TypeVar("_T")

# SQLite's primary result codes this layer tells apart
_BUSY, _LOCKED, _CORRUPT, _NOTADB = 5, 6, 11, 26


def index_error(exc: sqlite3.Error, where: str = "the search index") -> Exception | None:
    """The `AnamnesisError` an SQLite error stands for, or None when it is none of ours to name.

    By SQLite's result code, never by the message's words: busy or locked
    means another process holds the database (try again); corrupt or "not a
    database" means the file is damaged (`anamnesis reindex` rebuilds it).
    """
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code in (_BUSY, _LOCKED):
        return IndexLocked(f"{where} is busy (another process holds it); try again")
    if code in (_CORRUPT, _NOTADB):
        return IndexCorrupt(f"{where} is damaged ({exc}); run `anamnesis reindex` to rebuild it from the notes")
    return None


@contextlib.contextmanager
def translated_errors(where: str = "the search index") -> Iterator[None]:
    """Raise `IndexLocked`/`IndexCorrupt` for SQLite errors that mean that; others pass unchanged."""
    try:
        yield
    except sqlite3.Error as exc:
        mapped = index_error(exc, where)
        if mapped is None:
            raise
        raise mapped from exc


def reads(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """Decorator for an index read: SQLite errors become the index's error classes."""

    @wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        with translated_errors():
            return method(*args, **kwargs)

    return wrapper


def parse_when(value: str, *, end_of_day: bool = False) -> str:
    """'2026-11-01', '7d', '2w', '12h' -> an ISO timestamp to compare `updated` with.

    A bare date means the start of that day, or its end with `end_of_day`
    (so `--until 2026-11-01` includes notes of the 1st).
    """
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
    similarity: float | None = None  # cosine to the query, when a ranker used meaning

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
        """A JSON-ready view for --json and MCP (snippet and score only for search results)."""
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
        # the one tag rule (notes.normalize_tags): '#A' is a, and 'a b' asks for notes with both tags
        wanted = normalize_tags(tag)
        if not wanted:
            clauses.append("0")  # a tag filter that names no tag matches no note
        for one in wanted:
            clauses.append("n.rowid IN (SELECT note FROM tags WHERE tag = ?)")
            args.append(one)
    if since:
        clauses.append("n.updated >= ?")
        args.append(parse_when(since))
    if until:
        clauses.append("n.updated <= ?")
        args.append(parse_when(until, end_of_day=True))
    return "".join(f" AND {c}" for c in clauses), args


_COLUMNS = (
    "n.path, n.id, n.title, n.type, n.project, n.tags, n.updated, n.created, n.machine, n.conflicted,"
    " n.problems, n.supersedes"
)


def _hit(row: tuple[Any, ...]) -> Hit:
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
    )


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class Filtering(Protocol):
    """What the rankers' filters give the catalog: themselves as `filter_sql` does."""

    def sql(self) -> tuple[str, list[Any]]: ...


class Catalog:
    """Read-only questions to one open index.db: rows by id, listings, counts, references."""

    store: Store
    conn: sqlite3.Connection

    # The filters as one SQL fragment; a static method so callers holding only the class can use it.
    filter_sql = staticmethod(filter_sql)

    @reads
    def generation(self) -> str:
        """A value that changes whenever notes or vectors change (caches key on it)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        return str(row[0]) if row else "0"

    @reads
    def hits(self, rowids: list[int]) -> dict[int, Hit]:
        """The listing rows of these notes, with who supersedes each, by rowid."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        found = {
            r[0]: _hit(r[1:])
            for r in self.conn.execute(f"SELECT n.rowid, {_COLUMNS} FROM notes n WHERE n.rowid IN ({marks})", rowids)
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

    @reads
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
        where, args = filter_sql(project, type, tag, since, until)
        if conflicted is not None:
            where += " AND n.conflicted = ?"
            args.append(int(conflicted))
        sql = f"SELECT {_COLUMNS} FROM notes n WHERE 1=1{where} ORDER BY n.updated DESC, n.path"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        hits = [_hit(r) for r in self.conn.execute(sql, args)]
        self._mark_superseded(hits)
        return hits

    def recent(self, project: str | None = None, type: str | None = None, limit: int = 20) -> list[Hit]:
        """The most recently updated notes."""
        return self.list_notes(project=project, type=type, limit=limit)

    def conflicted(self) -> list[Hit]:
        """Notes that still carry git conflict markers."""
        return self.list_notes(conflicted=True, limit=None)

    @reads
    def problems(self) -> list[tuple[str, str]]:
        """(path, what is wrong) for every note indexed with problems or skipped."""
        rows = self.conn.execute(
            "SELECT path, problems FROM notes WHERE problems IS NOT NULL"
            " UNION ALL SELECT path, problem FROM skipped ORDER BY 1"
        ).fetchall()
        return [(p, m) for p, m in rows]

    @reads
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
            "with_problems": conn.execute("SELECT count(*) FROM notes WHERE problems IS NOT NULL").fetchone()[0],
            "skipped": conn.execute("SELECT count(*) FROM skipped").fetchone()[0],
            "refreshed": float(refreshed[0]) if refreshed else None,
        }

    @reads
    def tags(self) -> list[tuple[str, int]]:
        """Every tag with its number of notes, most used first."""
        return [(t, c) for t, c in self.conn.execute("SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY 2 DESC, 1")]

    @reads
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

    @reads
    def notes_holding(self, words: list[str]) -> dict[str, int]:
        """How many notes hold each word, as the start of a word ('polic' finds 'policies'): the
        rarity prompt recall weighs a prompt's words by."""
        counts: dict[str, int] = {}
        for word in words:
            stem = word if len(word) <= 5 else word[: max(5, len(word) - 2)]
            phrase = '"' + stem.replace('"', '""') + '"' + ("*" if len(word) > 5 else "")
            counts[word] = int(
                self.conn.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (phrase,)).fetchone()[0]
            )
        return counts

    @reads
    def count_notes(self) -> int:
        """How many notes are indexed."""
        return int(self.conn.execute("SELECT count(*) FROM notes").fetchone()[0])

    @reads
    def paths(self) -> list[str]:
        """The path of every indexed note."""
        return [row[0] for row in self.conn.execute("SELECT path FROM notes")]

    # The questions the adapters and the other modules ask; SQL lives here and in `anamnesis.search.index`
    # only (tests/search/test_sql_home.py keeps it so).

    @reads
    def hit_at(self, path: str) -> Hit | None:
        """The listing row of the note at `path` (with who supersedes it), or None."""
        row = self.conn.execute("SELECT rowid FROM notes WHERE path = ?", (path,)).fetchone()
        return self.hits([row[0]]).get(row[0]) if row else None

    @reads
    def notes_by_id(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        """(path, title or path) of the note with each id; of two with one id, the latest updated."""
        found: dict[str, tuple[str, str]] = {}
        for start in range(0, len(ids), 500):  # SQLite caps the number of parameters
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for note_id, path, title in self.conn.execute(
                f"SELECT id, path, title FROM notes WHERE id IN ({marks}) ORDER BY updated", chunk
            ):
                found[note_id] = (path, title or path)
        return found

    @reads
    def page(
        self,
        *,
        project: str | None,
        type: str | None,
        tag: str | None,
        only_global: bool,
        offset: int,
        size: int,
    ) -> tuple[list[Hit], int]:
        """`size` notes matching the filters from `offset` on, newest first, and how many match in all."""
        where, args = filter_sql(project, type, tag, None, None)
        if only_global:
            where += " AND n.project IS NULL"
        total = int(self.conn.execute(f"SELECT count(*) FROM notes n WHERE 1=1{where}", args).fetchone()[0])
        rowids = [
            int(r[0])
            for r in self.conn.execute(
                f"SELECT n.rowid FROM notes n WHERE 1=1{where} ORDER BY n.updated DESC, n.path LIMIT ? OFFSET ?",
                [*args, size, offset],
            )
        ]
        found = self.hits(rowids)
        return [found[r] for r in rowids if r in found], total

    @reads
    def titles_like(self, typed: str, limit: int = 8) -> list[tuple[str, str, str, str | None]]:
        """(id, title, path, project) of notes whose title holds `typed`, titles starting with it first."""
        like = _like(typed)
        return [
            (note_id or "", title or "", path, project)
            for note_id, title, path, project in self.conn.execute(
                "SELECT id, title, path, project FROM notes WHERE title LIKE ? ESCAPE '\\'"
                " ORDER BY title LIKE ? ESCAPE '\\' DESC, updated DESC LIMIT ?",
                (f"%{like}%", f"{like}%", limit),
            )
        ]

    @reads
    def ids_starting(self, typed: str, limit: int = 100) -> list[str]:
        """Note ids that start with `typed`: a note reference completed as it is typed."""
        return [
            row[0]
            for row in self.conn.execute(
                "SELECT id FROM notes WHERE id LIKE ? ESCAPE '\\' ORDER BY updated DESC LIMIT ?",
                (_like(typed) + "%", limit),
            )
            if row[0]
        ]

    @reads
    def note_keys(self) -> list[tuple[str, str, str]]:
        """(path, id, title) of every note: what links are resolved against."""
        return [(p, i or "", t or "") for p, i, t in self.conn.execute("SELECT path, id, title FROM notes")]

    @reads
    def keys_and_bodies(self) -> list[tuple[str, str, str, str]]:
        """(path, id, title, body) of every note, for the link graph."""
        return [
            (p, i or "", t or "", b or "")
            for p, i, t, b in self.conn.execute(
                "SELECT n.path, n.id, n.title, f.body FROM notes n JOIN fts f ON f.rowid = n.rowid"
            )
        ]

    @reads
    def shared_ids(self) -> list[tuple[str | None, str]]:
        """(id, "path, path…") for every id more than one note carries (a file copied by hand)."""
        return [
            (i, p)
            for i, p in self.conn.execute(
                "SELECT id, group_concat(path, ', ') FROM notes GROUP BY id HAVING count(*) > 1 ORDER BY id"
            )
        ]

    @reads
    def changed_since(self, start: str, project: str | None, limit: int) -> list[Hit]:
        """Notes created or updated at or after `start` (in `project`, if given), newest first."""
        args: list[Any] = [start, start]
        where = "(n.updated >= ? OR n.created >= ?)"
        if project:
            where += " AND n.project = ?"
            args.append(project)
        sql = f"SELECT {_COLUMNS} FROM notes n WHERE {where} ORDER BY n.updated DESC LIMIT ?"
        return [_hit(r) for r in self.conn.execute(sql, [*args, limit])]

    @reads
    def titles_by_id(self) -> dict[str, str]:
        """The title of every note that has an id, by id."""
        return {i: t or "" for i, t in self.conn.execute("SELECT id, title FROM notes WHERE id IS NOT NULL")}

    @reads
    def unconflicted(self) -> list[tuple[int, Hit]]:
        """(rowid, row) of every note free of conflict markers, by path."""
        sql = f"SELECT n.rowid, {_COLUMNS} FROM notes n WHERE n.conflicted = 0 ORDER BY n.path"
        return [(r[0], _hit(r[1:])) for r in self.conn.execute(sql)]

    @reads
    def path_of_id(self, note_id: str) -> str | None:
        """The path of a note with this id (the first by path), or None."""
        row = self.conn.execute("SELECT path FROM notes WHERE id = ? ORDER BY path LIMIT 1", (note_id,)).fetchone()
        return str(row[0]) if row else None

    @reads
    def project_activity(self) -> list[tuple[str, str | None, int, str, str | None]]:
        """(project or "", type, notes, latest update, "machine,machine…") per project and type."""
        return [
            (key, kind, int(count), last, machines)
            for key, kind, count, last, machines in self.conn.execute(
                "SELECT COALESCE(project, ''), type, COUNT(*), MAX(COALESCE(updated, '')),"
                " GROUP_CONCAT(DISTINCT machine) FROM notes GROUP BY 1, 2"
            )
        ]

    @reads
    def session_paths(self) -> list[tuple[str, str]]:
        """(project, path) of every session note that belongs to a project."""
        return [
            (p, path)
            for p, path in self.conn.execute(
                "SELECT project, path FROM notes WHERE type = 'episodic' AND project IS NOT NULL"
            )
        ]

    @reads
    def keys_with_project(self) -> list[tuple[str, str, str, str | None]]:
        """(path, id, title, project) of every note (project None for a global note)."""
        return [
            (p, i or "", t or "", project)
            for p, i, t, project in self.conn.execute("SELECT path, id, title, project FROM notes")
        ]

    # What the rankers and semantic search ask (they score; the catalog fetches).

    @reads
    def matching(self, match: str) -> set[int]:
        """Rowid of every note matching an FTS5 expression (faster than asking about a rowid list)."""
        return {r[0] for r in self.conn.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (match,))}

    @reads
    def count_matching(self, match: str) -> int:
        """How many notes match an FTS5 expression."""
        return int(self.conn.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (match,)).fetchone()[0])

    @reads
    def bm25(
        self, match: str, weights: tuple[float, float, float, float], filters: Filtering, pool: int
    ) -> list[tuple[int, float]]:
        """(rowid, SQLite's BM25 score, lower better) of the best `pool` matches passing `filters`."""
        where, args = filters.sql()
        w = weights
        # CROSS JOIN keeps FTS as the outer loop: an IN (subquery) here is 50x slower
        restrict = " CROSS JOIN notes n ON n.rowid = fts.rowid" if where else ""
        rows = self.conn.execute(
            f"SELECT fts.rowid, bm25(fts, {w[0]}, {w[1]}, {w[2]}, {w[3]}) AS score"
            f" FROM fts{restrict} WHERE fts MATCH ?{where} ORDER BY score LIMIT ?",
            [match, *args, pool],
        ).fetchall()
        return [(rowid, float(score)) for rowid, score in rows]

    @reads
    def passing(self, filters: Filtering) -> list[int]:
        """Rowid of every note that passes `filters`."""
        where, args = filters.sql()
        return [r[0] for r in self.conn.execute(f"SELECT n.rowid FROM notes n WHERE 1=1{where}", args)]

    @reads
    def rowids_with_ids(self, ids: list[str], filters: Filtering) -> list[int]:
        """Rowid of every note carrying one of `ids` that passes `filters`."""
        marks = ",".join("?" * len(ids))
        where, args = filters.sql()
        sql = f"SELECT n.rowid FROM notes n WHERE n.id IN ({marks}){where}"
        return [r[0] for r in self.conn.execute(sql, [*ids, *args])]

    @reads
    def snippets(self, match: str, rowids: list[int], tokens: int) -> dict[int, str]:
        """FTS5's snippet of each note's body around the words of `match` (marked with MARK_START/END)."""
        marks = ",".join("?" * len(rowids))
        return dict(
            self.conn.execute(
                f"SELECT rowid, snippet(fts, 2, '{MARK_START}', '{MARK_END}', '…', {tokens}) FROM fts"
                f" WHERE fts MATCH ? AND rowid IN ({marks})",
                [match, *rowids],
            ).fetchall()
        )

    @reads
    def body_starts(self, rowids: list[int], chars: int = 200) -> dict[int, str]:
        """The first `chars` characters of each note's body."""
        marks = ",".join("?" * len(rowids))
        sql = f"SELECT rowid, substr(body, 1, ?) FROM fts WHERE rowid IN ({marks})"
        return {r: b or "" for r, b in self.conn.execute(sql, [chars, *rowids])}

    @reads
    def vectors(self, model: str) -> list[tuple[int, bytes]]:
        """(rowid, vector) from `model` of every note whose text has not changed since, by rowid."""
        return self.conn.execute(
            "SELECT v.note, v.vec FROM vectors v JOIN notes n ON n.rowid = v.note AND n.sha = v.sha"
            " WHERE v.model = ? ORDER BY v.note",
            (model,),
        ).fetchall()

    @reads
    def without_vector(self, model: str) -> list[int]:
        """Rowid of every note with no vector from `model` for its current text."""
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT n.rowid FROM notes n LEFT JOIN vectors v ON v.note = n.rowid"
                " WHERE v.note IS NULL OR v.sha != n.sha OR v.model != ? ORDER BY n.rowid",
                (model,),
            )
        ]

    @reads
    def count_vectors(self, model: str) -> int:
        """How many notes have a current vector from `model`."""
        return int(
            self.conn.execute(
                "SELECT count(*) FROM vectors v JOIN notes n ON n.rowid = v.note AND n.sha = v.sha"
                " WHERE v.model = ?",
                (model,),
            ).fetchone()[0]
        )

    @reads
    def texts_to_embed(self, rowids: list[int]) -> list[tuple[int, str, str, str, str]]:
        """(rowid, text sha, title, tags, body) of these notes: what an embedding is made of."""
        marks = ",".join("?" * len(rowids))
        return [
            (r, sha, title or "", tags or "", body or "")
            for r, sha, title, tags, body in self.conn.execute(
                f"SELECT n.rowid, n.sha, f.title, f.tags, f.body FROM notes n JOIN fts f ON f.rowid = n.rowid"
                f" WHERE n.rowid IN ({marks})",
                rowids,
            )
        ]
