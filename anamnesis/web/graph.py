"""The memory map's data: notes as nodes, links and shared tags as edges; and one note's
neighbourhood (its links, backlinks and tag neighbours) for the map around a note.

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

from anamnesis.base.notes import split_front_matter
from anamnesis.base.paths import Store
from anamnesis.search import Hit
from anamnesis.store import LinkGraph, LinkResolver, NoteKey

LINK, TAG = 0, 1
CLIQUE_MAX = 6  # a tag on this many notes or fewer links every pair
TAG_SHARE_MAX = 0.25  # a tag on more than this share of the notes says little: skipped
TAG_EDGES_PER_NOTE = 2  # cap on tag edges, per note in the map
GLOBAL = "(global)"
# Roles of the notes around one note (the map of a neighbourhood).
CENTRE, LINKS_TO, LINKED_FROM, BOTH, SHARES_TAGS = 0, 1, 2, 3, 4
MAX_TAG_NEIGHBOURS = 24


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


def build_graph(store: Store, hits: list[Hit], links: LinkGraph | None = None) -> dict[str, Any]:
    """JSON-ready graph: projects, nodes [path, title, project#, type, conflicted], edges [a, b, kind].

    `links` (the dashboard keeps one per index state) saves reading every note's file.
    """
    hits = sorted(hits, key=lambda h: (h.project or "", h.path))
    position = {h.path: i for i, h in enumerate(hits)}
    resolver = LinkResolver(NoteKey(h.path, h.id, h.title) for h in hits) if links is None else None
    projects: dict[str, int] = {}
    nodes: list[list[Any]] = []
    tagged: dict[str, list[int]] = defaultdict(list)
    link_edges: set[tuple[int, int]] = set()
    for i, hit in enumerate(hits):
        group = projects.setdefault(hit.project or GLOBAL, len(projects))
        nodes.append([hit.path, hit.title, group, hit.type, int(hit.conflicted)])
        for tag in hit.tags:
            tagged[tag].append(i)
        targets = (
            links.links_of(hit.path)
            if links is not None
            else resolver.links_of(hit.path, _read_body(store, hit.path))  # type: ignore[union-attr]
        )
        for target in targets:
            j = position.get(target)
            if j is not None:
                link_edges.add((min(i, j), max(i, j)))
    tags = tag_edges(tagged, len(hits)) - link_edges
    edges = [[a, b, LINK] for a, b in sorted(link_edges)] + [[a, b, TAG] for a, b in sorted(tags)]
    return {
        "projects": list(projects),
        "nodes": nodes,
        "edges": edges,
        "counts": {"nodes": len(nodes), "links": len(link_edges), "tag_edges": len(tags)},
    }


def neighbourhood(hits: list[Hit], links: LinkGraph, centre: str) -> dict[str, Any]:
    """The map around one note: the note, the notes it links to and that link to it, and the
    notes sharing most of its tags (rarest tags first, at most MAX_TAG_NEIGHBOURS).

    The same shape as `build_graph`, each node with its role as a sixth field
    (CENTRE, LINKS_TO, LINKED_FROM, BOTH, SHARES_TAGS) and `focus`, the centre's index.
    """
    by_path = {h.path: h for h in hits}
    if centre not in by_path:
        return {"projects": [], "nodes": [], "edges": [], "focus": None, "counts": {"nodes": 0}}
    note = by_path[centre]
    out = links.links_of(centre) & by_path.keys()
    back = links.backlinks_of(centre) & by_path.keys()
    roles: dict[str, int] = {centre: CENTRE}
    for path in sorted(out | back):
        roles[path] = BOTH if path in out and path in back else (LINKS_TO if path in out else LINKED_FROM)
    if note.tags:
        sizes: dict[str, int] = defaultdict(int)
        for hit in hits:
            for tag in hit.tags:
                sizes[tag] += 1
        mine = set(note.tags)
        shared: list[tuple[float, str]] = []
        for hit in hits:
            if hit.path in roles:
                continue
            common = mine.intersection(hit.tags)
            if common:
                # more shared tags first; among equals, rarer tags say more
                shared.append((-sum(1.0 / sizes[t] for t in common) - len(common), hit.path))
        for _score, path in sorted(shared)[:MAX_TAG_NEIGHBOURS]:
            roles[path] = SHARES_TAGS
    ordered = sorted(roles, key=lambda p: (roles[p], by_path[p].project or "", by_path[p].title.lower(), p))
    position = {path: i for i, path in enumerate(ordered)}
    projects: dict[str, int] = {}
    nodes: list[list[Any]] = []
    for path in ordered:
        hit = by_path[path]
        group = projects.setdefault(hit.project or GLOBAL, len(projects))
        nodes.append([hit.path, hit.title, group, hit.type, int(hit.conflicted), roles[path]])
    link_edges: set[tuple[int, int]] = set()
    for path in ordered:
        for target in links.links_of(path):
            if target in position and target != path:
                a, b = position[path], position[target]
                link_edges.add((min(a, b), max(a, b)))
    tag_pairs = {(0, position[p]) for p in ordered if roles[p] == SHARES_TAGS}
    edges = [[a, b, LINK] for a, b in sorted(link_edges)] + [[a, b, TAG] for a, b in sorted(tag_pairs)]
    return {
        "projects": list(projects),
        "nodes": nodes,
        "edges": edges,
        "focus": 0,
        "counts": {"nodes": len(nodes), "links": len(link_edges), "tag_edges": len(tag_pairs)},
    }
