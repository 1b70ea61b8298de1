"""Links between notes, safe markdown rendering and the memory map's graph data."""

from __future__ import annotations

from typing import Any

import pytest
from web_support import tags_in

from anamnesis.base.paths import Store
from anamnesis.store.links import LinkResolver, NoteKey, markdown_targets, wikilink_targets
from anamnesis.web.graph import CLIQUE_MAX, LINK, TAG, TAG_EDGES_PER_NOTE, build_graph, tag_edges
from anamnesis.web.html import Markup, html
from anamnesis.web.markdown import render_markdown

NOTES = [
    NoteKey("projects/api/facts/use-pg-bouncer-ab12cd34ef.md", "ab12cd34ef", "Use pg_bouncer"),
    NoteKey("projects/api/howto/lint-first-0123456789.md", "0123456789", "Lint first"),
    NoteKey("global/preferences/british-english-zzzzzzzzzz.md", "zzzzzzzzzz", "British English"),
]


def test_wikilinks_resolve_by_title_id_file_name_and_path() -> None:
    resolver = LinkResolver(NOTES)
    pool = NOTES[0].path
    assert resolver.wikilink("Use pg_bouncer") == pool
    assert resolver.wikilink("use PG_bouncer") == pool
    assert resolver.wikilink("ab12cd34ef") == pool
    assert resolver.wikilink("use-pg-bouncer") == pool
    assert resolver.wikilink("use-pg-bouncer-ab12cd34ef.md") == pool
    assert resolver.wikilink(pool) == pool
    assert resolver.wikilink("Nothing like it") is None


def test_ambiguous_names_resolve_to_nothing() -> None:
    twins = [
        NoteKey("a/x-1111111111.md", "1111111111", "Same"),
        NoteKey("b/y-2222222222.md", "2222222222", "Same"),
    ]
    assert LinkResolver(twins).wikilink("Same") is None


def test_markdown_links_resolve_relative_to_the_note() -> None:
    resolver = LinkResolver(NOTES)
    source = NOTES[1].path
    assert resolver.markdown(source, "../facts/use-pg-bouncer-ab12cd34ef.md") == NOTES[0].path
    assert resolver.markdown(source, "../facts/use-pg-bouncer-ab12cd34ef.md#pool") == NOTES[0].path
    assert resolver.markdown(source, "https://example.com/a.md") is None
    assert resolver.markdown(source, "../../../../etc/passwd.md") is None


@pytest.mark.timeout(60)
def test_a_long_run_of_brackets_is_not_scanned_once_per_bracket() -> None:
    # The map reads up to 200 kB of every note; a label pattern that may contain "[" rescanned the
    # rest of the line from every bracket (minutes for this body) and stalled /api/graph.
    body = "[" * 400_000 + "](x.md) and [pool](facts/pool.md)\n"
    assert markdown_targets(body) == ["x.md", "facts/pool.md"]


def test_links_in_code_are_not_links() -> None:
    body = "See [[Lint first]].\n\n```\n[[Use pg_bouncer]]\n```\n\nand `[[British English]]`\n[x](../a.md)"
    assert wikilink_targets(body) == ["Lint first"]
    assert markdown_targets(body) == ["../a.md"]
    resolver = LinkResolver(NOTES)
    assert resolver.links_of(NOTES[0].path, body) == {NOTES[1].path}


def test_markdown_is_rendered_without_raw_html_or_script_urls() -> None:
    out = render_markdown(
        '<script>alert(1)</script>\n\n<b onclick="x()">b</b>\n\n[a](javascript:alert(1)) [b](https://ok.example)\n\n'
        "![i](javascript:alert(1))\n"
    )
    assert "&lt;script&gt;" in out
    assert tags_in(out) == [
        ("p", []),
        ("p", []),
        ("p", []),
        ("a", [("href", "https://ok.example"), ("rel", "noopener noreferrer")]),
        ("p", []),
    ]


def test_note_links_become_dashboard_links() -> None:
    resolver = LinkResolver(NOTES)
    out = render_markdown(
        "[[Lint first|the lint rule]] and [[Missing note]] and [pool](../facts/use-pg-bouncer-ab12cd34ef.md)",
        source=NOTES[1].path,
        resolver=resolver,
    )
    links = {dict(attrs).get("href") for tag, attrs in tags_in(out) if tag == "a"}
    assert links == {
        "/note/projects/api/howto/lint-first-0123456789.md",
        "/note/projects/api/facts/use-pg-bouncer-ab12cd34ef.md",
    }
    assert ">the lint rule</a>" in out
    assert '<span class="wikilink missing" title="no such note">Missing note</span>' in out


def test_html_escapes_everything_it_is_not_told_is_safe() -> None:
    assert html("<p>{x}</p>", x='<img src=x onerror="y">') == "<p>&lt;img src=x onerror=&quot;y&quot;&gt;</p>"
    assert html("<p>{x}</p>", x=Markup("<b>ok</b>")) == "<p><b>ok</b></p>"
    assert html("{x}", x=["<a>", Markup("<b>")]) == "&lt;a&gt;<b>"


def test_tag_edges_are_capped() -> None:
    small = tag_edges({"rare": [0, 1, 2]}, total=100)
    assert small == {(0, 1), (0, 2), (1, 2)}  # a clique for a rare tag
    ring = tag_edges({"mid": list(range(20))}, total=100)
    assert len(ring) == 20  # a ring, not 190 pairs
    common = tag_edges({"everything": list(range(80))}, total=100)
    assert common == set()  # on 80% of the notes: says nothing, skipped
    many = {f"t{i}": list(range(i, i + CLIQUE_MAX)) for i in range(500)}
    assert len(tag_edges(many, total=600)) <= TAG_EDGES_PER_NOTE * 600 + CLIQUE_MAX * CLIQUE_MAX


def test_graph_of_a_store_links_notes_and_groups_by_project(store: Store) -> None:
    from anamnesis.search.index import open_index
    from anamnesis.store.operations import create_note

    pool = create_note(
        store, type="semantic", title="Use pg_bouncer", body="See [[Lint first]].", project="api"
    )
    lint = create_note(
        store, type="procedural", title="Lint first", body="Run make lint.", project="api", tags=["ci"]
    )
    other = create_note(store, type="semantic", title="Web CI", body="No links.", project="web", tags=["ci"])
    with open_index(store) as index:
        graph = build_graph(store, index.list_notes(limit=None))
    paths = [n[0] for n in graph["nodes"]]
    projects = graph["projects"]
    assert sorted(projects) == ["api", "web"]
    i, j, k = paths.index(pool.path), paths.index(lint.path), paths.index(other.path)
    assert [min(i, j), max(i, j), LINK] in graph["edges"]
    assert [min(j, k), max(j, k), TAG] in graph["edges"]
    assert projects[graph["nodes"][i][2]] == "api" and projects[graph["nodes"][k][2]] == "web"
    assert graph["counts"] == {"nodes": 3, "links": 1, "tag_edges": 1}


def test_link_graph_has_backlinks_and_links_to_no_note() -> None:
    from anamnesis.store.links import LinkGraph

    graph = LinkGraph(
        [
            (NOTES[0], "See [[Lint first]] and [[Runbook]] and [x](../howto/missing-note.md)."),
            (NOTES[1], "[pool](../facts/use-pg-bouncer-ab12cd34ef.md) `[[Runbook]]`"),
            (NOTES[2], "Nothing."),
        ]
    )
    assert graph.backlinks_of(NOTES[0].path) == {NOTES[1].path}
    assert graph.backlinks_of(NOTES[1].path) == {NOTES[0].path}
    assert graph.backlinks_of(NOTES[2].path) == set()
    missing = graph.unresolved_of(NOTES[0].path)
    assert [(m.target, m.kind, m.title) for m in missing] == [
        ("Runbook", "wikilink", "Runbook"),
        ("../howto/missing-note.md", "markdown", "Missing note"),
    ]
    assert graph.unresolved_of(NOTES[1].path) == []  # a link in code is no link


def test_rewrite_links_follows_a_moved_note_and_nothing_else() -> None:
    from anamnesis.store.links import rewrite_links

    resolver = LinkResolver(NOTES)
    old, new = NOTES[0], "global/facts/db/pool-ab12cd34ef.md"
    body = (
        "[[use-pg-bouncer]] [[Use pg_bouncer|by title]] [[ab12cd34ef]] [[use-pg-bouncer-ab12cd34ef.md#x|f]]\n"
        "[p](../facts/use-pg-bouncer-ab12cd34ef.md#s) `[[use-pg-bouncer]]` [[Lint first]]\n"
    )
    out = rewrite_links(body, NOTES[1].path, resolver, old, new)
    assert out == (
        "[[pool]] [[Use pg_bouncer|by title]] [[ab12cd34ef]] [[pool-ab12cd34ef.md#x|f]]\n"
        "[p](../../../global/facts/db/pool-ab12cd34ef.md#s) `[[use-pg-bouncer]]` [[Lint first]]\n"
    )
    # The moved note's own relative links still reach their notes from its new folder.
    own = "[lint](../howto/lint-first-0123456789.md) [[Lint first]]"
    moved = rewrite_links(own, new, resolver, old, new, moved_from=old.path)
    assert moved == "[lint](../../../projects/api/howto/lint-first-0123456789.md) [[Lint first]]"


def test_move_note_is_one_commit_that_keeps_the_id(store: Store, run_cli: Any) -> None:
    import json

    from anamnesis.base.errors import UsageError
    from anamnesis.base.git import git_out
    from anamnesis.store.operations import create_note, load_note, move_note

    pool = create_note(store, type="semantic", title="Pool size", body="pool_size = 20\n", project="api")
    name = pool.path.rsplit("/", 1)[1]
    lint = create_note(
        store,
        type="procedural",
        title="Lint first",
        body=f"[[{name[:-3]}]] and [p](../facts/{name})\n",
        project="api",
    )
    before = int(git_out(store.memory, "rev-list", "--count", "HEAD"))
    moved = move_note(store, pool.id, f"global/facts/{name}")
    assert moved.note.path == f"global/facts/{name}" and moved.rewritten == [lint.path]
    assert load_note(store, moved.note.path).id == pool.id
    assert not (store.memory / pool.path).exists()
    assert (store.memory / lint.path).read_text().count(f"../../../global/facts/{name}") == 1
    assert int(git_out(store.memory, "rev-list", "--count", "HEAD")) == before + 1
    assert git_out(store.memory, "status", "--porcelain") == ""
    with pytest.raises(UsageError, match="already exists"):
        move_note(store, pool.id, lint.path)
    with pytest.raises(UsageError, match="not a note path"):
        move_note(store, pool.id, "global/facts/x.txt")
    proc = run_cli("mv", pool.id, f"global/facts/moved-{name}", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rewritten"] == [lint.path]
    assert f"global/facts/moved-{name}" in (store.memory / lint.path).read_text()
