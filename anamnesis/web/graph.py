"""The memory map's data: notes as nodes, links and shared tags as edges.

Links (`[[wikilinks]]` and relative `.md` links) are all kept. Shared tags
would grow quadratically (a tag on 500 notes is 125,000 pairs), so tag edges
are built from the rarest tags first, a tag on many notes becomes a ring
rather than a clique, very common tags are skipped, and the total is capped
at a small multiple of the number of notes.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from anamnesis.index import Hit
from anamnesis.links import LinkResolver, NoteKey
from anamnesis.notes import split_front_matter
from anamnesis.paths import Store

LINK, TAG = 0, 1
CLIQUE_MAX = 6  # a tag on this many notes or fewer links every pair
TAG_SHARE_MAX = 0.25  # a tag on more than this share of the notes says little: skipped
TAG_EDGES_PER_NOTE = 2  # cap on tag edges, per note in the map
GLOBAL = "(global)"


def _read_body(store: Store, relpath: str) -> str:
    try:
        with open(os.path.join(store.memory, relpath), "rb") as handle:
            text = handle.read(200_000).decode("utf-8", errors="replace")
    except OSError:
        return ""
    return split_front_matter(text)[1]


def tag_edges(tagged: dict[str, list[int]], total: int) -> set[tuple[int, int]]:
    """Edges for notes sharing tags, within the caps described above."""
    edges: set[tuple[int, int]] = set()
    budget = max(TAG_EDGES_PER_NOTE * total, 1)
    limit = max(CLIQUE_MAX, int(total * TAG_SHARE_MAX))
    for _tag, members in sorted(tagged.items(), key=lambda kv: (len(kv[1]), kv[0])):
        n = len(members)
        if n < 2 or n > limit:
            continue
        if n <= CLIQUE_MAX:
            pairs = [(members[i], members[j]) for i in range(n) for j in range(i + 1, n)]
        else:
            pairs = [(members[i], members[(i + 1) % n]) for i in range(n)]
        for a, b in pairs:
            edges.add((min(a, b), max(a, b)))
        if len(edges) >= budget:
            break
    return edges


def build_graph(store: Store, hits: list[Hit]) -> dict[str, Any]:
    """JSON-ready graph: projects, nodes [path, title, project#, type, conflicted], edges [a, b, kind]."""
    hits = sorted(hits, key=lambda h: (h.project or "", h.path))
    position = {h.path: i for i, h in enumerate(hits)}
    resolver = LinkResolver(NoteKey(h.path, h.id, h.title) for h in hits)
    projects: dict[str, int] = {}
    nodes: list[list[Any]] = []
    tagged: dict[str, list[int]] = defaultdict(list)
    link_edges: set[tuple[int, int]] = set()
    for i, hit in enumerate(hits):
        group = projects.setdefault(hit.project or GLOBAL, len(projects))
        nodes.append([hit.path, hit.title, group, hit.type, int(hit.conflicted)])
        for tag in hit.tags:
            tagged[tag].append(i)
        for target in resolver.links_of(hit.path, _read_body(store, hit.path)):
            j = position[target]
            link_edges.add((min(i, j), max(i, j)))
    tags = tag_edges(tagged, len(hits)) - link_edges
    edges = [[a, b, LINK] for a, b in sorted(link_edges)] + [[a, b, TAG] for a, b in sorted(tags)]
    return {
        "projects": list(projects),
        "nodes": nodes,
        "edges": edges,
        "counts": {"nodes": len(nodes), "links": len(link_edges), "tag_edges": len(tags)},
    }
