"""The dashboard for daily use, in real headless Chromium against two machines that really sync.

Links both ways and links to notes not written yet, a conflicted note that
reads as its versions by machine, History with Restore in plain sight, the
phone layout (390×844, no horizontal page scroll anywhere), Sync and Reindex
that redirect after their POST, a 404 with the layout, one vocabulary for
note types, `[[` completion and a live preview in the editor, moving and
deleting notes, browsing past 500 notes a page at a time, the map as a tool
(the map around a note, labels that never overlap, a legend that hides, a
box that centres the map on a note) and superseded notes linking their
replacement.

With ANAMNESIS_SCREENSHOTS=1 the screenshots go to docs/screenshots/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_support import (  # noqa: F401  (chrome, fleet, shots: module-scoped fixtures)
    DESKTOP,
    LAPTOP,
    PHONE_VIEW,
    Dashboard,
    Fleet,
    Watched,
    chrome,
    dashboard,
    fleet,
    new_machine,
    seed_many,
    session,
    shots,
    wait_map,
)

from anamnesis.base.git import git_out
from anamnesis.base.notes import has_conflict_markers
from anamnesis.base.paths import Store

# The module-scoped fleet, dashboard and browser are made once: the file runs on one xdist worker.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("web-daily")]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Dashboard]]:
    store = new_machine(tmp_path_factory.mktemp("big") / "home", "big-store")
    seed_many(store, 2000)
    with dashboard(store.home) as running:
        yield store, running


def overlapping(labels: list[dict[str, float]]) -> list[tuple[str, str]]:
    found = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            if (
                a["x"] < b["x"] + b["w"]
                and b["x"] < a["x"] + a["w"]
                and a["y"] < b["y"] + b["h"]
                and b["y"] < a["y"] + a["h"]
            ):
                found.append((str(a["text"]), str(b["text"])))
    return found


def sync_both(made: Fleet) -> None:
    """Real syncs through the hub until both machines have what either wrote."""
    from anamnesis.sync import engine as sync

    sync.sync(made.desktop)
    sync.sync(made.laptop)
    sync.sync(made.desktop)


# -- links both ways ------------------------------------------------------------------------


def test_backlinks_from_both_link_styles_and_from_the_other_machine(
    chrome: Any, fleet: tuple[Fleet, Dashboard]
) -> None:
    made, running = fleet
    notes = made.notes
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/note/" + notes.pool)  # lint links here with a relative markdown link
        back = page.locator("#backlinks")
        assert "Lint before pushing" in back.inner_text()
        watched.open("/note/" + notes.lint)  # pool links here with a [[wikilink]]
        assert "Use pg_bouncer in transaction mode" in page.locator("#backlinks").inner_text()
        assert "Use pg_bouncer in transaction mode" in page.locator("#outlinks").inner_text()
        watched.open("/note/" + notes.deploy)  # "Rotate the API keys" was written on the desktop
        back = page.locator("#backlinks")
        assert "Rotate the API keys" in back.inner_text()
        back.locator("a", has_text="Rotate the API keys").click()
        page.wait_for_url("**/note/**rotate-the-api-keys-*")
        assert "Deploy target" in page.locator("#outlinks").inner_text()


def test_a_link_to_a_note_not_written_yet_is_created_in_one_click(
    chrome: Any, fleet: tuple[Fleet, Dashboard]
) -> None:
    from anamnesis.store.operations import create_note

    made, running = fleet
    source = create_note(
        made.desktop,
        type="procedural",
        title="Release checklist",
        body="1. Tag it.\n2. Follow [[Rollback runbook]] if it breaks.\n",
        project="github.com/acme/api",
        tags=["release"],
    )
    sync_both(made)
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/note/" + source.path)
        missing = page.locator("#not-written")
        assert "Rollback runbook" in missing.inner_text()
        assert page.locator(".markdown a.wikilink.missing", has_text="Rollback runbook").count() == 1
        missing.locator("a", has_text="Create").click()
        page.wait_for_url("**/new?**")
        assert page.input_value("input[name=title]") == "Rollback runbook"
        assert page.input_value("input[name=project]") == "github.com/acme/api"
        assert f"[[{source.id}|Release checklist]]" in page.input_value("textarea[name=body]")
        page.click("button:has-text('Create note')")
        page.wait_for_url(re.compile(r"/note/.*\?msg=created$"))
        assert "Release checklist" in page.locator("#backlinks").inner_text()
        watched.open("/note/" + source.path)
        assert page.locator("#not-written").count() == 0
        link = page.locator(".markdown a.wikilink", has_text="Rollback runbook")
        assert "missing" not in (link.get_attribute("class") or "")


# -- a conflicted note reads as its versions ------------------------------------------------


def test_a_conflicted_note_shows_each_machines_version_with_the_buttons(
    chrome: Any, fleet: tuple[Fleet, Dashboard], shots: Path
) -> None:
    made, running = fleet
    path = made.conflict
    assert has_conflict_markers((made.laptop.memory / path).read_text())
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/note/" + path)
        article = page.locator("article.note")
        assert article.locator("blockquote").count() == 0  # ">>>>>>> machine" was seven quotes deep
        text = article.inner_text()
        assert "<<<<<<<" not in text and ">>>>>>>" not in text and "=======" not in text
        sides = page.locator(".conflict-side")
        assert sides.count() == 2
        by_label = {sides.nth(i).get_attribute("data-label"): sides.nth(i).inner_text() for i in range(2)}
        assert set(by_label) == {LAPTOP, DESKTOP}
        assert "staging-eu" in by_label[LAPTOP] and "this machine" in by_label[LAPTOP]
        assert "staging-us" in by_label[DESKTOP] and "staging-eu" not in by_label[DESKTOP]
        assert "Rollback with" in text  # the text both agree on is still there, as markdown
        page.screenshot(path=str(shots / "note-conflict.png"))
        sides.filter(has_text=DESKTOP).locator("button", has_text="Keep").click()
        page.wait_for_url(re.compile(r"/note/.*\?msg=resolved$"))
        assert watched.dialogs and "Keep" in watched.dialogs[-1]
        assert page.locator(".conflict-side").count() == 0
        assert "staging-us" in page.inner_text(".markdown")
    on_disk = (made.laptop.memory / path).read_text()
    assert not has_conflict_markers(on_disk) and "staging-us" in on_disk
    assert "resolve conflict" in git_out(made.laptop.memory, "log", "-1", "--format=%s")


# -- history ----------------------------------------------------------------------------------


def test_restore_is_in_plain_sight_on_a_phone(
    chrome: Any, fleet: tuple[Fleet, Dashboard], shots: Path
) -> None:
    from anamnesis.store.operations import update_note

    made, running = fleet
    path = made.notes.british
    update_note(made.laptop, path, body="Spell color without a u.\n")
    with session(chrome, running, PHONE_VIEW) as watched:
        page = watched.page
        watched.open("/history/" + path)
        versions = page.locator("li.version")
        assert versions.count() == 2
        button = versions.nth(1).locator("button", has_text="Restore this version")
        assert button.is_visible()  # no click on anything first
        box = button.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE_VIEW["width"]
        assert versions.nth(1).locator("summary", has_text="What changed").is_visible()
        page.screenshot(path=str(shots / "phone-history.png"), full_page=True)
        button.click()
        page.wait_for_url(re.compile(r"/note/.*\?msg=restored$"))
        assert "Spell colour with a u." in page.inner_text(".markdown")


# -- phone layout -----------------------------------------------------------------------------


def test_every_page_fits_a_phone(chrome: Any, fleet: tuple[Fleet, Dashboard], shots: Path) -> None:
    made, running = fleet
    notes = made.notes
    pages = [
        ("overview", "/"),
        ("browse", "/browse"),
        ("search", "/search?q=deploy"),
        ("note", "/note/" + notes.pool),
        ("new", "/new"),
        ("edit", "/edit/" + notes.lint),
        ("history", "/history/" + notes.lint),
        ("move", "/move/" + notes.session),
        ("fleet", "/fleet"),
        ("conflicts", "/conflicts"),
        ("map", "/map"),
        ("map-around", "/map?note=" + notes.lint),
        ("missing", "/no/such/page"),
    ]
    with session(chrome, running, PHONE_VIEW) as watched:
        page = watched.page
        watched.expected_status.add(404)
        for name, path in pages:
            watched.open(path)
            if name.startswith("map"):
                wait_map(watched)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE_VIEW["width"], (path, width)
            assert not page.locator(".sidebar nav").is_visible(), path  # collapsed behind Menu
            top = page.locator("main").bounding_box()
            assert top is not None and top["y"] < 80, (path, top)  # content first, not 490 px of sidebar
            if name in ("overview", "note", "fleet", "map", "browse"):
                page.screenshot(path=str(shots / f"phone-{name}.png"), full_page=not name.startswith("map"))
        # Fleet: the table scrolls inside itself; Sync and Reindex are one tap away, on screen.
        watched.open("/fleet")
        scroller = page.locator(".table-scroll").first
        assert scroller.evaluate("e => e.scrollWidth > e.clientWidth")
        page.click("label.menu-button")
        assert page.locator(".sidebar nav").is_visible()
        for label in ("Sync now", "Reindex"):
            box = page.locator(f".side-actions button:has-text('{label}')").bounding_box()
            assert box is not None and box["x"] + box["width"] <= PHONE_VIEW["width"], label
            assert box["y"] + box["height"] <= PHONE_VIEW["height"], label
        page.screenshot(path=str(shots / "phone-menu.png"))
        page.locator(".sidebar nav a", has_text="Memory map").click()
        page.wait_for_url("**/map")
        wait_map(watched)
        canvas = page.locator("#map").bounding_box()
        assert (
            canvas is not None
            and canvas["y"] < 300
            and canvas["y"] + canvas["height"] <= PHONE_VIEW["height"] + 1
        )
        labels = page.evaluate("window.anamnesisMap.labels()")
        assert labels and overlapping(labels) == []
        assert page.locator("#map-legend").is_hidden()  # a phone starts with the legend folded away


def test_link_suggestions_stay_on_a_phones_screen(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    _made, running = fleet
    with session(chrome, running, PHONE_VIEW) as watched:
        page = watched.page
        watched.open("/new")
        body = page.locator("textarea[name=body]")
        body.click()
        body.press_sequentially("Some words first, then a link: [[f", delay=20)
        suggest = page.locator("#wikilink-suggest")
        suggest.locator("li").first.wait_for()
        box = suggest.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE_VIEW["width"], box
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE_VIEW["width"]


def test_button_and_type_chip_text_is_readable_in_both_themes(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    """WCAG AA: 4.5:1 for text this small, in the light and the dark theme."""
    made, running = fleet
    ratio = """e => {
      const rgb = s => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
      const lum = c => { const v = c / 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
      const L = s => { const [r, g, b] = rgb(s); return 0.2126 * lum(r) + 0.7152 * lum(g) + 0.0722 * lum(b); };
      let el = e, bg = getComputedStyle(el).backgroundColor;
      while (bg === "rgba(0, 0, 0, 0)" && el.parentElement) { el = el.parentElement; bg = getComputedStyle(el).backgroundColor; }
      const [a, b] = [L(getComputedStyle(e).color), L(bg)].sort((x, y) => y - x);
      return (a + 0.05) / (b + 0.05);
    }"""
    for scheme in ("light", "dark"):
        with session(chrome, running, scheme=scheme) as watched:
            page = watched.page
            watched.open("/note/" + made.notes.pool)
            for selector in ("a.btn:not(.ghost), button.btn:not(.ghost)", ".chip[class*=type-]"):
                for element in page.locator(selector).all()[:6]:
                    assert element.evaluate(ratio) >= 4.5, (scheme, selector, element.inner_text())


# -- redirect after POST, 404 ---------------------------------------------------------------


def test_sync_and_reindex_redirect_so_a_reload_does_not_run_them_again(
    chrome: Any, fleet: tuple[Fleet, Dashboard]
) -> None:
    from anamnesis.sync.synclog import recent

    made, running = fleet
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/")
        before = len(recent(made.laptop, limit=1000))
        page.click("button:has-text('Sync now')")
        page.wait_for_url(re.compile(r"/actions/report/[\w-]+$"))
        assert re.match(r"Synced: sent \d+, received \d+ commits", page.inner_text("#action-result"))
        assert len(recent(made.laptop, limit=1000)) == before + 1
        page.reload()
        page.wait_for_load_state("networkidle")
        assert "Synced" in page.inner_text("#action-result")
        assert len(recent(made.laptop, limit=1000)) == before + 1  # shown again, not run again
        page.click("button:has-text('Reindex')")
        page.wait_for_url(re.compile(r"/actions/report/[\w-]+$"))
        assert "Index up to date" in page.inner_text("#action-result")


def test_an_unknown_address_is_a_page_of_the_dashboard(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    _made, running = fleet
    with session(chrome, running) as watched:
        watched.expected_status.add(404)
        response = watched.open("/no/such/page")
        assert response.status == 404
        assert watched.page.locator(".sidebar nav a", has_text="Browse").count() == 1
        assert "Not found" in watched.page.inner_text("main h1")
        watched.page.locator("main a", has_text="Overview").click()
        watched.page.wait_for_url(running.base + "/")


# -- one vocabulary ---------------------------------------------------------------------------


def test_types_have_the_names_the_cli_and_the_files_use(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    from anamnesis.cli.notes import TYPES_HELP

    made, running = fleet
    lint = made.notes.lint
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/browse")
        chips = set(page.locator(".note-list .chip.type").all_inner_texts())
        assert chips <= {"semantic", "procedural", "episodic", "preference"} and "procedural" in chips
        facets = page.locator(".facet", has_text="Types").inner_text()
        for kind, gloss in (
            ("semantic", "facts, decisions"),
            ("procedural", "how-tos"),
            ("episodic", "what happened"),
        ):
            assert f"{kind} ({gloss})" in facets
            assert f"{kind} ({gloss})" in TYPES_HELP  # the CLI's help says the same
        assert "how-to" not in facets.replace("how-tos", "") and "fact " not in facets
        watched.open("/edit/" + lint)
        options = page.locator("select[name=type] option").all_inner_texts()
        assert "procedural (how-tos)" in options
        page.fill(
            "textarea[name=body]", page.input_value("textarea[name=body]").rstrip("\n") + "\n3. Push.\n"
        )
        page.click("button:has-text('Save')")
        page.wait_for_url(re.compile(r"/note/.*\?msg=saved$"))
    assert git_out(made.laptop.memory, "log", "-1", "--format=%s") == f"{LAPTOP}: edit {lint}"


# -- the editor -------------------------------------------------------------------------------


def test_editor_completes_wikilinks_with_the_id_and_previews_live(
    chrome: Any, fleet: tuple[Fleet, Dashboard], shots: Path
) -> None:
    from anamnesis.store.operations import load_note

    made, running = fleet
    target = load_note(made.laptop, made.notes.session)
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/new")
        page.fill("input[name=title]", "Why the login test was flaky")
        body = page.locator("textarea[name=body]")
        body.click()
        body.press_sequentially("Background: **cookies**. See [[flaky", delay=20)
        suggest = page.locator("#wikilink-suggest")
        suggest.locator("li", has_text="Fixed the flaky login test").wait_for()
        page.screenshot(path=str(shots / "edit-wikilink.png"))
        body.press("Enter")
        value = body.input_value()
        assert f"[[{target.id}|Fixed the flaky login test]]" in value
        assert suggest.is_hidden()
        preview = page.locator("#preview")
        preview.locator("a.wikilink", has_text="Fixed the flaky login test").wait_for()
        assert preview.locator("strong", has_text="cookies").count() == 1
        href = preview.locator("a.wikilink").get_attribute("href")
        assert href == "/note/" + target.path
        page.click("button:has-text('Create note')")
        page.wait_for_url(re.compile(r"/note/.*\?msg=created$"))
        page.locator(".markdown a.wikilink", has_text="Fixed the flaky login test").click()
        page.wait_for_url("**/note/" + target.path)
        assert "Why the login test was flaky" in page.locator("#backlinks").inner_text()


# -- move and delete --------------------------------------------------------------------------


def test_move_keeps_the_id_rewrites_links_and_syncs(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    from anamnesis.store.operations import load_note
    from anamnesis.sync import engine as sync

    made, running = fleet
    old = made.notes.pool
    before = load_note(made.laptop, old)
    new = "projects/github.com-acme-api/facts/database/pgbouncer-pool-" + before.id + ".md"
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/note/" + old)
        page.click("a:has-text('Move / rename')")
        page.wait_for_url("**/move/**")
        assert "1 note links here" in page.inner_text("main")
        page.fill("input[name=new_path]", new)
        page.click("button:has-text('Move')")
        page.wait_for_url(re.compile(r"/note/.*\?msg=moved$"))
        assert page.url.split("/note/", 1)[1].split("?")[0] == new
        assert "Lint before pushing" in page.locator("#backlinks").inner_text()
        watched.open("/note/" + made.notes.lint)
        page.locator(".markdown a.notelink").click()  # the rewritten relative link
        page.wait_for_url("**/note/" + new)
    moved = load_note(made.laptop, new)
    assert moved.id == before.id and moved.body == before.body
    assert not (made.laptop.memory / old).exists()
    lint_text = (made.laptop.memory / made.notes.lint).read_text()
    assert "database/pgbouncer-pool-" in lint_text
    log = git_out(made.laptop.memory, "show", "--stat", "--format=%s", "HEAD")
    assert log.startswith(f"{LAPTOP}: move {old} to {new}") and made.notes.lint.rsplit("/", 1)[1] in log
    sync.sync(made.laptop)
    sync.sync(made.desktop)
    assert (made.desktop.memory / new).is_file() and not (made.desktop.memory / old).exists()


def test_delete_goes_through_the_core_and_asks_first(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    from anamnesis.store.operations import create_note

    made, running = fleet
    note = create_note(made.laptop, type="semantic", title="Short-lived fact", body="Gone soon.\n")
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/note/" + note.path)
        page.click("button:has-text('Delete')")
        page.wait_for_url("**/browse?msg=deleted")
        assert watched.dialogs and "Delete this note" in watched.dialogs[-1]
        assert "Note deleted" in page.inner_text(".flash")
    assert not (made.laptop.memory / note.path).exists()
    assert git_out(made.laptop.memory, "log", "-1", "--format=%s") == f"{LAPTOP}: delete {note.path}"


# -- superseded notes -------------------------------------------------------------------------


def test_a_superseded_note_links_its_replacement(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    from anamnesis.search.engine import search as search_notes
    from anamnesis.search.index import open_index
    from anamnesis.store.operations import create_note

    made, running = fleet
    old = create_note(
        made.laptop, type="semantic", title="Cache TTL is 60 s", body="The cache TTL is 60 s.\n"
    )
    sync_both(made)
    newer = create_note(
        made.desktop,
        type="semantic",
        title="Cache TTL is now 300 s",
        body="Raised the cache TTL to 300 s.\n",
        supersedes=[old.id],
    )
    sync_both(made)
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/search?q=cache+TTL")
        titles = page.locator(".results .note-title").all_inner_texts()
        with open_index(made.laptop) as index:
            expected = [hit.title for hit in search_notes(index, "cache TTL", limit=50)]
        assert titles == expected and titles.index(newer.title) < titles.index(old.title)
        badge = page.locator(".note-item", has_text=old.title).locator(".badge.superseded")
        assert "superseded by" in badge.inner_text()
        badge.locator("a", has_text=newer.title).click()
        page.wait_for_url("**/note/" + newer.path)
        assert old.title in page.inner_text("#supersedes")
        watched.open("/note/" + old.path)
        banner = page.locator("#superseded")
        assert "Superseded" in banner.inner_text()
        banner.locator("a", has_text=newer.title).click()
        page.wait_for_url("**/note/" + newer.path)


# -- the map as a tool ------------------------------------------------------------------------


def test_map_around_a_note_shows_links_backlinks_and_tag_neighbours(
    chrome: Any, fleet: tuple[Fleet, Dashboard], shots: Path
) -> None:
    made, running = fleet
    lint = made.notes.lint
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/note/" + lint)
        page.click("a:has-text('Map around it')")
        page.wait_for_url("**/map?note=**")
        wait_map(watched)
        roles = page.evaluate("window.anamnesisMap.roles()")
        assert roles[lint] == 0
        pool = [path for path in roles if "pg-bouncer" in path or "pgbouncer" in path]
        assert len(pool) == 1 and roles[pool[0]] == 3  # links both ways
        assert roles[made.notes.session] == 4  # shares the tag "ci"
        assert made.notes.british not in roles  # nothing to do with it
        labels = page.evaluate("window.anamnesisMap.labels()")
        assert {label["text"] for label in labels} >= {"Lint before pushing", "Fixed the flaky login test"}
        assert overlapping(labels) == []
        page.screenshot(path=str(shots / "map-around.png"))


def test_browse_goes_past_500_with_the_filters_kept(chrome: Any, big: tuple[Store, Dashboard]) -> None:
    from urllib.parse import unquote

    from anamnesis.search.index import open_index

    store, running = big
    with open_index(store) as index:
        procedural = [h.path for h in index.list_notes(type="procedural", limit=None)]
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/browse")
        assert "1–100 of 2,000" in page.inner_text("#shown")
        page.locator(".pager a[rel=last]").first.click()
        page.wait_for_url("**page=20")
        assert "1,901–2,000 of 2,000" in page.inner_text("#shown")
        watched.open("/browse?type=procedural")
        seen: list[str] = []
        while True:
            seen += [
                href.split("/note/", 1)[1]
                for href in page.locator(".note-list .note-title").evaluate_all(
                    "els => els.map(e => e.getAttribute('href'))"
                )
            ]
            older = page.locator(".pager a[rel=next]").first
            if older.count() == 0:
                break
            older.click()
            page.wait_for_load_state("networkidle")
            assert "type=procedural" in page.url
        assert len(seen) == len(procedural) > 500
        assert [unquote(p) for p in seen] == procedural


def test_map_of_2000_notes_draws_fast_with_labels_that_never_overlap(
    chrome: Any, big: tuple[Store, Dashboard], shots: Path, record_property: Any
) -> None:
    from anamnesis.search.index import open_index

    store, running = big
    with open_index(store) as index:
        wanted = index.list_notes(limit=50)[17]
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/map")
        info = wait_map(watched)
        assert info["nodes"] == 2000
        record_property("map_2000_render_ms", round(info["renderMs"]))
        assert info["renderMs"] <= 1500, info  # about 0.6 s here: 1 s is the target, slack for a busy CI
        page.screenshot(path=str(shots / "map-2000.png"))
        # Find a note: the box lists it, Enter centres the map on it and marks it.
        box = page.locator("#map-find")
        box.fill(wanted.title.lower())
        page.locator("#map-results li", has_text=wanted.title).first.wait_for()
        box.press("Enter")
        focus = page.evaluate("window.anamnesisMap.focusPath()")
        assert focus == wanted.path
        point = page.evaluate(f"window.anamnesisMap.screenPoint({focus!r})")
        canvas = page.locator("#map").bounding_box()
        assert abs(point["x"] - (canvas["x"] + canvas["width"] / 2)) < 2
        assert abs(point["y"] - (canvas["y"] + canvas["height"] / 2)) < 2
        page.wait_for_timeout(100)
        labels = page.evaluate("window.anamnesisMap.labels()")
        assert len([label for label in labels if label["kind"] == "note"]) >= 10
        assert overlapping(labels) == []
        page.screenshot(path=str(shots / "map-find.png"))
        # Zoomed in everywhere else too: still no two labels on top of each other.
        for k in (1.5, 3, 6):
            page.evaluate(f"window.anamnesisMap.zoomTo({focus!r}, {k})")
            assert overlapping(page.evaluate("window.anamnesisMap.labels()")) == []
        # The legend hides, and stays hidden on the next visit.
        assert page.locator("#map-legend").is_visible()
        page.click("#map-legend-toggle")
        assert page.locator("#map-legend").is_hidden()
        watched.open("/map")
        wait_map(watched)
        assert page.locator("#map-legend").is_hidden()
        assert page.get_attribute("#map-legend-toggle", "aria-pressed") == "false"


def test_long_project_keys_and_unbroken_titles_fit_a_phone(chrome: Any, tmp_path: Path) -> None:
    """Real keys run long (a company's own git host, a group, a repository) and a title can be one
    long word: the page wraps them and never scrolls sideways."""
    from anamnesis.store.operations import create_note

    store = new_machine(tmp_path / "home", "phone-keys")
    key = "gitlab.example-company.com/platform-infrastructure/terraform-aws-modules"
    note = create_note(
        store, type="semantic", title="Terraform state lives in the platform-infrastructure bucket",
        body="State is in s3://platform-tf-state, locked by DynamoDB.\n", project=key, tags=["terraform"],
    )
    long = create_note(
        store, type="procedural", title="x" * 120, body="one long word as a title\n", project=key, tags=["y" * 80]
    )
    pages = [
        "/", "/browse", f"/note/{note.path}", "/timeline", "/search?q=terraform",
        f"/history/{long.path}", f"/move/{long.path}", f"/note/{long.path}", f"/edit/{long.path}",
    ]
    with dashboard(store.home) as running, session(chrome, running, PHONE_VIEW) as watched:
        for path in pages:
            watched.open(path)
            width = watched.page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE_VIEW["width"], (path, width)
