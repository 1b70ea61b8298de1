"""Supersession: a note saying, in its `supersedes` field, which older notes it replaces.

Writing the links lives in `store` (`resolve_supersedes`, `create_note`,
`update_note`); this module reads them back and finds notes that probably
should be linked and are not: two notes of one project and type whose titles
say nearly the same thing. `anamnesis doctor` reports both.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING

from anamnesis.base.notes import parse_note

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

SIMILAR_TITLES = 0.6  # Jaccard similarity of title words from which two notes look like one
SIMILAR_TYPES = ("semantic", "procedural")  # sessions and preferences repeat their titles by nature
# Words that say nothing about what a title is about.
TITLE_STOPWORDS = frozenset(
    (
        "a an and are as at be but by can could do does for from had has have how i if in into is it its "
        "me my no not of on or our should so that the their them then there these they this to up us was "
        "we were what when where which who why will with would you your"
    ).split()
)
_WORD = re.compile(r"[^\W_]+")


def title_words(title: str) -> frozenset[str]:
    """The words of a title that carry meaning: lower case, stop words dropped."""
    return frozenset(w for w in _WORD.findall(title.lower()) if w not in TITLE_STOPWORDS)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared words over all words (0 when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def read_links(store: Store, paths: Iterable[str]) -> dict[str, list[str]]:
    """{path: ids it supersedes} for the notes at `paths` (memory/-relative) that supersede any.

    Only files that mention `supersedes` at all are parsed, so reading
    10,000 notes costs little more than reading their bytes.
    """
    links: dict[str, list[str]] = {}
    for relpath in paths:
        full = store.memory / relpath
        try:
            if full.is_symlink():
                continue
            data = full.read_bytes()
        except OSError:
            continue
        if b"supersedes" not in data:
            continue
        note = parse_note(data.decode("utf-8", errors="replace"), relpath)
        if note.supersedes:
            links[relpath] = note.supersedes
    return links


def similar_pairs(
    items: Sequence[tuple[Hashable, str]],
    *,
    threshold: float = SIMILAR_TITLES,
    skip: Callable[[int, int], bool] | None = None,
    limit: int = 1000,
    budget: int = 2_000_000,
) -> list[tuple[int, int, float]]:
    """(i, j, similarity) for items with the same group whose titles are at least `threshold` alike.

    `items` are (group, title); only items of one group are compared. Pairs
    `skip(i, j)` accepts are left out. Prefix filtering (words ordered rarest
    first: two titles this alike must share one of the first few words of
    each) keeps this far from comparing every pair; `limit` pairs and
    `budget` comparisons bound the work whatever the titles.
    """
    groups: dict[Hashable, list[int]] = defaultdict(list)
    words: list[frozenset[str]] = []
    for i, (group, title) in enumerate(items):
        words.append(title_words(title))
        if words[i]:
            groups[group].append(i)
    found: list[tuple[int, int, float]] = []
    checks = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        frequency = Counter(w for i in members for w in words[i])
        ordered = {i: sorted(words[i], key=lambda w: (frequency[w], w)) for i in members}
        postings: dict[str, list[int]] = defaultdict(list)
        for i in sorted(members, key=lambda m: len(words[m])):
            size = len(words[i])
            prefix = ordered[i][: size - math.ceil(threshold * size - 1e-9) + 1]
            seen: set[int] = set()
            for word in prefix:
                for j in postings[word]:
                    if j in seen or len(words[j]) < threshold * size - 1e-9:
                        continue
                    seen.add(j)
                    checks += 1
                    if checks > budget:
                        return found
                    score = jaccard(words[i], words[j])
                    if score >= threshold - 1e-9 and not (skip and skip(j, i)):
                        found.append((j, i, score))
                        if len(found) >= limit:
                            return found
            for word in prefix:
                postings[word].append(i)
    return found


class Components:
    """Union-find over note ids: notes joined by `supersedes` links, directly or not."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        root = key
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while key != root:  # path compression
            self.parent[key], key = root, self.parent.get(key, key)
        return root

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb
