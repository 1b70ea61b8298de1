"""Reading the search index: notes as `Hit` rows, the usual filters, listings.

The query side of index.db. `anamnesis.index` fills the tables (ingestion);
this module only reads them, and so do the rankers (`anamnesis.ranking`) and
`anamnesis.search`, which turn a query into ranked hits. `Catalog` wraps one
open connection; `Index` is a `Catalog` that can also write.

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
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from anamnesis.errors import IndexCorrupt, IndexLocked, UsageError

if TYPE_CHECKING:
    from anamnesis.paths import Store

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
        clauses.append("n.rowid IN (SELECT note FROM tags WHERE tag = ?)")
        args.append(tag.lstrip("#").lower())
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
