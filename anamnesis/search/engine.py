"""Search: the one way every adapter turns a query into ranked notes.

The CLI, the MCP server, the web dashboard and the Claude Code hooks all call
`search()`. It parses the query (`anamnesis.search.query`), lets a ranker score the
notes (`anamnesis.search.ranking`: keyword, or hybrid when semantic search is on),
then applies what holds for every ranker:

- notes of the project the query runs in (and global notes) are lifted above
  other projects' notes — not filtered: a clearly better match elsewhere
  still shows (`project=` is the hard filter);
- a superseded note is scored down, marked with the ids that replace it, and
  never ranked above its replacement;
- among equals, the newer note wins;
- snippets are built for the results only.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from anamnesis.search.catalog import Catalog, Hit, reads
from anamnesis.search.query import Query, parse_query, without_dash_exclusions
from anamnesis.search.ranking import Filters, HybridRanker, KeywordRanker, Ranker, SemanticRanker
from anamnesis.search.semantic import engine_for

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

NEAR_PROJECT_BOOST = 0.12  # relative to the best score: this project and global notes first
SUPERSEDED_FACTOR = 0.6
RECENCY_SHARE = 0.02
HALF_LIFE_DAYS = 30.0
MIN_POOL = 60
SNIPPET_TOKENS = 16


def recency(updated: str, now: dt.datetime | None = None) -> float:
    """1.0 for a note updated now, halving every HALF_LIFE_DAYS."""
    now = now or dt.datetime.now(dt.UTC)
    try:
        when = dt.datetime.fromisoformat(updated.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    days = max(0.0, (now - when).total_seconds() / 86400)
    return float(0.5 ** (days / HALF_LIFE_DAYS))


def default_ranker(store: Store, *, require_all: bool = False) -> Ranker:
    """Hybrid when semantic search is enabled and usable on this machine, else keyword."""
    keyword = KeywordRanker(require_all=require_all)
    engine = engine_for(store)
    return HybridRanker(keyword, SemanticRanker(engine)) if engine is not None else keyword


@reads  # a busy or damaged index is IndexLocked / IndexCorrupt, not SQLite's text
def search(
    index: Catalog,
    text: str,
    *,
    project: str | None = None,
    type: str | None = None,
    tag: str | None = None,
    since: str | None = None,
    until: str | None = None,
    near_project: str | None = None,
    limit: int = 10,
    snippets: bool = True,
    require_all: bool = False,
    ranker: Ranker | None = None,
) -> list[Hit]:
    """Notes answering `text`, best first.

    `project`/`type`/`tag`/`since`/`until` filter; `near_project` (the project
    the query runs in) only ranks. `snippets=False` skips building them, for
    callers that only rank (the hooks).
    """
    query = parse_query(text)
    if query.empty:
        return []
    ranker = ranker or default_ranker(index.store, require_all=require_all)
    if query.only_stop_words and isinstance(ranker, HybridRanker):
        ranker = ranker.keyword  # the model places any words somewhere: the closest notes would be noise
    filters = Filters(project=project, type=type, tag=tag, since=since, until=until)
    pool = max(MIN_POOL, limit * 3)
    scores = ranker.rank(index, query, filters, pool)
    if not scores and query.dash_excluded:
        # `-word` may have been a flag of a command we do not know (`mytool -verbose`): never answer
        # nothing because of a guess; read it as a word to find
        query = without_dash_exclusions(query)
        scores = ranker.rank(index, query, filters, pool)
    if not scores:
        return []
    hits = index.hits(list(scores))
    hits_found: dict[int, Hit] = {}
    top = max(scores.values()) or 1.0
    now = dt.datetime.now(dt.UTC)
    adjusted: dict[int, float] = {}
    for rowid, hit in hits.items():
        hit.similarity = ranker.similarities.get(rowid)
        value = scores[rowid] / top
        if near_project and not project and (hit.project == near_project or hit.project is None):
            value += NEAR_PROJECT_BOOST
        if hit.superseded_by:
            # what holds now is the replacement: it ranks at least as high as the note it replaced,
            # whether it shares fewer of the query's words (it is lifted) or none (it is brought in)
            newer_rowids = index.rowids_with_ids(hit.superseded_by, filters)
            hits_found.update(index.hits([r for r in newer_rowids if r not in hits and r not in hits_found]))
            for newer_rowid in newer_rowids:
                adjusted[newer_rowid] = max(adjusted.get(newer_rowid, 0.0), value)
            value *= SUPERSEDED_FACTOR
        value += RECENCY_SHARE * recency(hit.updated, now)
        adjusted[rowid] = max(adjusted.get(rowid, 0.0), value)
    for rowid, hit in hits.items():
        hit.score = adjusted[rowid]  # a replacement lifted above its own score shows the score it ranks by
    for rowid, hit in hits_found.items():
        hit.score = adjusted[rowid] + RECENCY_SHARE * recency(hit.updated, now)
        adjusted[rowid] = hit.score
        hits[rowid] = hit
    order = sorted(hits, key=lambda rowid: (-adjusted[rowid], hits[rowid].path))
    ranked = _replacements_first([hits[rowid] for rowid in order])[:limit]
    if snippets:
        _add_snippets(index, query, {rowid: hit for rowid, hit in hits.items() if hit in ranked})
    return ranked


def _replacements_first(hits: list[Hit]) -> list[Hit]:
    """Move each superseded note just below the last of its replacements in the list."""
    out = list(hits)
    for hit in hits:
        if not hit.superseded_by:
            continue
        position = out.index(hit)
        later = [i for i, other in enumerate(out) if other.id in hit.superseded_by and i > position]
        if later:
            out.pop(position)
            out.insert(later[-1], hit)  # the list shrank by one: this lands right after it
    return out


def _add_snippets(index: Catalog, query: Query, hits: dict[int, Hit]) -> None:
    if not hits:
        return
    rowids = list(hits)
    match = " OR ".join(dict.fromkeys(t.fts() for t in query.terms))
    found = index.snippets(match, rowids, SNIPPET_TOKENS)
    missing = [rowid for rowid in rowids if not found.get(rowid)]
    if missing:  # found by meaning, not words: the start of the body
        for rowid, body in index.body_starts(missing).items():
            found[rowid] = " ".join(body.split()[:SNIPPET_TOKENS]) + "…"
    for rowid, hit in hits.items():
        hit.snippet = found.get(rowid) or ""
