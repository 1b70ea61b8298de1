"""Rankers: how well each note answers a parsed query.

A ranker scores notes; it does not build results. `anamnesis.search` is the
one place that turns scores into results (project boost, supersession,
snippets), so the CLI, MCP server, web and hooks cannot drift apart. Three
rankers share one interface:

- `KeywordRanker`: FTS5 BM25 over any of the query's terms (title > tags >
  code > body), re-scored by how much of the query a note covers, each term
  weighted by its rarity, with extra credit for terms in the title or tags
  and for holding a quoted command line whole. So a question finds notes
  that share its content words, and keywords typed at the CLI put notes that
  hold all of them first.
- `SemanticRanker`: cosine similarity of the query's embedding to the notes'
  (only with the optional semantic extra; see `anamnesis.search.semantic`).
- `HybridRanker`: a weighted fusion of the two over the union of their best
  candidates (see its docstring for the scales); notes with no vector yet
  keep their keyword score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from anamnesis.search.catalog import Catalog, filter_sql
from anamnesis.search.query import Query, parse_query

if TYPE_CHECKING:
    from anamnesis.search.semantic import SemanticEngine

WEIGHTS = (10.0, 5.0, 1.0, 2.0)  # BM25 column weights: title, tags, body, code
COVERAGE = 1.0  # share of the query's (rarity-weighted) terms a note holds
BM25_SHARE = 0.5  # BM25, relative to the best candidate
TITLE_SHARE = 0.35  # share of the query's terms in the title or tags
COMMAND_BONUS = 1.0  # the query's command line, whole, in the note: almost surely the one asked for
ALL_TERMS_BONUS = 1.0  # a short keyword query: notes with every word come first
KEYWORD_QUERY_MAX_TERMS = 4
FUNCTION_WEIGHT = 0.3  # a function word ("where", "up") against a content word as rare (0.2-0.7 did alike)
FUNCTION_MAX_SHARE = 0.5  # a function word in more of the notes than this tells them apart no more
FUNCTION_WORDS = 4  # only the rarest few are asked for (3-32 did alike on our sets)
HYBRID_WEIGHT = 0.6  # share of the semantic score in the fusion (0.5-0.7 did alike on our sets)
# Meaning weighs its full share only when the closest note is this close to the query, and less in
# proportion below: a code word such as `selfHeal` means nothing to the model, every note sits far
# from it (0.17 at best), and counting the least far as full meaning put notes without the word above
# the one that holds it (rank 9 of 10). Real matches sit at 0.3-0.75; 0.25 kept every set's recall.
MEANING_CONFIDENT = 0.25


@dataclass(frozen=True)
class Filters:
    """Hard filters: a note outside them is never a result."""

    project: str | None = None
    type: str | None = None
    tag: str | None = None
    since: str | None = None
    until: str | None = None

    def sql(self) -> tuple[str, list[Any]]:
        """These filters as SQL over `notes n` (" AND ..." and its arguments)."""
        return filter_sql(self.project, self.type, self.tag, self.since, self.until)


class Ranker(Protocol):
    """Scores for the best `pool` notes that pass `filters`, by index rowid; higher is better.

    `similarities` holds, after `rank`, the cosine of the query to each note the ranker
    compared by meaning (empty for keyword ranking): an absolute measure, unlike the scores,
    for callers that must decide whether the best note bears on the query at all."""

    name: str
    similarities: dict[int, float]

    def rank(self, index: Catalog, query: Query, filters: Filters, pool: int) -> dict[int, float]: ...


def _rowids(index: Catalog, match: str) -> set[int]:
    """Every note matching an FTS5 expression (faster than asking about a rowid list)."""
    return index.matching(match)


def _idf(total: int, found: int) -> float:
    return math.log(1 + (total - found + 0.5) / (found + 0.5))


class KeywordRanker:
    """BM25 candidates, re-scored by rarity-weighted coverage of the query."""

    name = "keyword"

    def __init__(self, require_all: bool = False) -> None:
        self.require_all = require_all
        self.similarities: dict[int, float] = {}

    def bm25(self, index: Catalog, match: str, filters: Filters, pool: int) -> list[tuple[int, float]]:
        """(rowid, BM25 score, higher better) of the best `pool` matches of an FTS5 expression."""
        return [(rowid, -score) for rowid, score in index.bm25(match, WEIGHTS, filters, pool)]

    def rank(self, index: Catalog, query: Query, filters: Filters, pool: int) -> dict[int, float]:
        return {rowid: part.total for rowid, part in self.scores(index, query, filters, pool).items()}

    def scores(
        self, index: Catalog, query: Query, filters: Filters, pool: int, *, function_words: bool = True
    ) -> dict[int, KeywordScore]:
        """The parts of each candidate's score (the hybrid ranker weighs them its own way)."""
        match = query.match_all() if self.require_all else query.match_any()
        if match is None:
            return {}
        ranked = self.bm25(index, match, filters, pool)
        if not ranked:
            return {}  # function words never answer a query alone: its content words found nothing
        best = max(score for _rowid, score in ranked) or 1.0
        total = max(1, index.count_notes())
        weights: list[float] = []
        holders: list[set[int]] = []
        titled: list[set[int]] = []
        for term in query.terms:
            found = _rowids(index, term.fts())
            weights.append(_idf(total, len(found)) * term.weight)
            holders.append(found)
            titled.append(_rowids(index, "{title tags} : " + term.fts()))
        whole = sum(weights) or 1.0
        command: set[int] = set()
        if query.command is not None:
            command = _rowids(index, query.command.fts())
        keyword_like = _keyword_like(query)
        single = [found for term, found in zip(query.terms, holders, strict=True) if not term.joined]
        out: dict[int, KeywordScore] = {}
        for rowid, score in ranked:
            out[rowid] = KeywordScore(
                coverage=sum(w for w, found in zip(weights, holders, strict=True) if rowid in found) / whole,
                in_title=sum(w for w, found in zip(weights, titled, strict=True) if rowid in found) / whole,
                bm25=score / best,
                command=rowid in command,
                all_terms=keyword_like and all(rowid in found for found in single),
            )
        if function_words and not self.require_all and len(ranked) < pool:
            out.update(self._by_function_words(index, query, filters, pool - len(ranked), total, whole, best))
        return out

    def _by_function_words(
        self, index: Catalog, query: Query, filters: Filters, room: int, total: int, whole: float, best: float
    ) -> dict[int, KeywordScore]:
        """Up to `room` notes that share none of the query's content words but some of its function words.

        A question put in other words may share only "where", "once" or "up" with its note; with
        too few candidates, those are better than none. Each counts FUNCTION_WEIGHT of a content
        word as rare (`whole` is the content words' weight), and only for notes no content word
        found, so they never reorder those. A word in more than FUNCTION_MAX_SHARE of the notes is
        not asked for: it tells notes apart no more (BM25 gives it no weight either), and "the"
        would make every note a candidate. Only the FUNCTION_WORDS rarest are asked for (they carry
        the weight), so a long chatty question costs a few small lookups, not one per word.
        """
        counted = sorted((index.count_matching(t.fts()), i, t) for i, t in enumerate(query.function_terms))
        words = [t for found, _i, t in counted if found <= FUNCTION_MAX_SHARE * total][:FUNCTION_WORDS]
        match = query.match_function_only(words)
        if match is None:
            return {}
        ranked = self.bm25(index, match, filters, room)
        if not ranked:
            return {}
        weights = [(_idf(total, len(found)) * FUNCTION_WEIGHT, found) for found in (_rowids(index, t.fts()) for t in words)]
        out: dict[int, KeywordScore] = {}
        for rowid, score in ranked:
            held = sum(weight for weight, found in weights if rowid in found) / whole
            out[rowid] = KeywordScore(
                coverage=0.0,
                in_title=0.0,
                bm25=0.0,
                command=False,
                all_terms=False,
                function=COVERAGE * held + BM25_SHARE * FUNCTION_WEIGHT * score / best,
            )
        return out


@dataclass(frozen=True)
class KeywordScore:
    """How a note matched: shares of the query (rarity-weighted) and relative BM25."""

    coverage: float  # share of the query's terms the note holds
    in_title: float  # share of them in its title or tags
    bm25: float  # relative to the best candidate
    command: bool  # holds the query's command line whole
    all_terms: bool  # a short keyword query, every word present
    function: float = 0.0  # found by the query's function words alone: their (much smaller) credit

    @property
    def total(self) -> float:
        value = COVERAGE * self.coverage + BM25_SHARE * self.bm25 + TITLE_SHARE * self.in_title + self.function
        if self.command:
            value += COMMAND_BONUS
        if self.all_terms:
            value += ALL_TERMS_BONUS
        return value

    @property
    def absolute(self) -> float:
        """0..1 on a scale that means the same for every query (no part relative to other notes)."""
        value = COVERAGE * self.coverage + TITLE_SHARE * self.in_title + (COMMAND_BONUS if self.command else 0.0)
        return min(1.0, value / (COVERAGE + TITLE_SHARE))


def _keyword_like(query: Query) -> bool:
    """A few words typed as keywords (no stop words dropped), not a sentence."""
    if not 1 < len([t for t in query.terms if not t.joined]) <= KEYWORD_QUERY_MAX_TERMS:
        return False
    words = [w for w in query.raw.split() if w.upper() != "NOT"]
    single = [t for t in parse_query(query.raw).terms if not t.joined]
    return len(words) <= KEYWORD_QUERY_MAX_TERMS and len(single) == len(words)


class SemanticRanker:
    """Cosine similarity between the query's embedding and each note's."""

    name = "semantic"

    def __init__(self, engine: SemanticEngine) -> None:
        self.engine = engine
        self.similarities: dict[int, float] = {}

    def rank(self, index: Catalog, query: Query, filters: Filters, pool: int) -> dict[int, float]:
        self.similarities = self.engine.similarity(index, query.raw, filters, pool)
        return dict(self.similarities)


class HybridRanker:
    """`w · semantic + (1 − w) · keyword` over both rankers' best notes.

    The two sides are put on scales that keep their confidence: the keyword
    score is absolute (the share of the query a note covers, with its title
    and BM25 credit, capped at 1), so a stray match on one word of a question
    stays low; the cosine is taken relative to the best one, so the closest
    note in meaning counts fully, unless even that one is far from the query
    (below MEANING_CONFIDENT): then meaning's share shrinks in proportion and
    words decide. Min-max over both (the textbook fusion)
    lifted keyword noise to 1 and buried paraphrases on our benchmark sets.
    A note with no vector yet keeps its keyword score.
    """

    name = "hybrid"

    def __init__(self, keyword: KeywordRanker, semantic: SemanticRanker, weight: float = HYBRID_WEIGHT) -> None:
        self.keyword = keyword
        self.semantic = semantic
        self.weight = weight
        self.similarities: dict[int, float] = {}

    def rank(self, index: Catalog, query: Query, filters: Filters, pool: int) -> dict[int, float]:
        parts = self.keyword.scores(index, query, filters, pool, function_words=False)
        lexical = {rowid: part.absolute for rowid, part in parts.items()}
        cosines = self.semantic.engine.similarity(index, query.raw, filters, pool, also=set(lexical))
        if self.keyword.require_all or query.excluded:
            # an explicit 'every word' or 'NOT word' is a hard rule: meaning may reorder, not add
            cosines = {rowid: c for rowid, c in cosines.items() if rowid in lexical}
        self.similarities = cosines
        union = set(lexical) | set(cosines)
        if not union:
            return {}
        top_cosine = max((cosines[rowid] for rowid in union if rowid in cosines), default=0.0)
        fused: dict[int, float] = {}
        weight = self.weight * min(1.0, top_cosine / MEANING_CONFIDENT)
        for rowid in union:
            keyword = lexical.get(rowid, 0.0)
            if rowid in cosines and top_cosine > 0:
                meaning = max(0.0, cosines[rowid]) / top_cosine
                fused[rowid] = weight * meaning + (1 - weight) * keyword
            else:  # no vector yet: keyword ranking alone
                fused[rowid] = keyword
        return fused
