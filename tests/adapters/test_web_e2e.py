"""The dashboard in real headless Chromium, against real stores that really synced.

Two machines (laptop, desktop) sync through a bare hub and end with a real
same-line conflict; the laptop's `anamnesis web` runs as a real process and
the browser opens every page, searches, creates, edits, reads the history,
restores, resolves the conflict, syncs, reindexes and clicks the memory map.
The daily-use features (links both ways, the conflicted note, the phone
layout, move and delete, paging, the map as a tool, 2,000 notes) are in
test_web_daily.py.

Screenshots of every page go to a temp folder, or to docs/screenshots/ with
ANAMNESIS_SCREENSHOTS=1 (that is how the ones in the docs are made).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from web_support import (  # noqa: F401  (chrome, fleet, shots: module-scoped fixtures)
    DESKTOP,
    LAPTOP,
    Dashboard,
    Fleet,
    chrome,
    fleet,
    session,
    shots,
    wait_map,
)

from anamnesis.base.git import git_out
from anamnesis.base.notes import has_conflict_markers

# The module-scoped fleet, dashboard and browser are made once: the file runs on one xdist worker.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("web-e2e")]


def test_every_page_renders(chrome: Any, fleet: tuple[Fleet, Dashboard], shots: Path) -> None:
    made, running = fleet
    notes = made.notes
    pages = [
        ("overview", "/", ["Overview", "conflicts", LAPTOP]),
        (
            "browse",
            "/browse?project=github.com/acme/api",
            ["Use pg_bouncer in transaction mode", "Rotate the API keys"],
        ),
        ("search", "/search?q=pool", ["Use pg_bouncer in transaction mode"]),
        ("note", "/note/" + notes.pool, ["pg_bouncer", "Lint before pushing", "Front matter"]),
        ("new", "/new", ["New note", "Create note"]),
        ("edit", "/edit/" + notes.pool, ["Edit note", "Save"]),
        ("history", "/history/" + notes.deploy, ["History of", "staging"]),
        ("fleet", "/fleet", [LAPTOP, DESKTOP, "hub"]),
        ("conflicts", "/conflicts", ["Deploy target"]),
        ("resolve", "/conflicts/" + notes.deploy, ["staging-eu", "staging-us", "Keep ours", "Keep theirs"]),
    ]
    for scheme in ("light", "dark"):
        with session(chrome, running, scheme=scheme) as watched:
            for name, path, expected in pages:
                response = watched.open(path)
                assert response.status == 200, (path, response.status)
                text = watched.page.inner_text("main")
                for words in expected:
                    assert words in text, (path, words)
                if name == "edit":
                    assert "pool_size = 20" in watched.page.input_value("textarea[name=body]")
                if scheme == "light" or name in ("overview", "note"):
                    suffix = "" if scheme == "light" else "-dark"
                    watched.page.screenshot(path=str(shots / f"{name}{suffix}.png"))
            watched.open("/map")
            info = wait_map(watched)
            assert info["nodes"] == 7
            watched.page.screenshot(path=str(shots / ("map.png" if scheme == "light" else "map-dark.png")))


def test_search_uses_the_index_ranking(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    from anamnesis.search.engine import search as search_notes
    from anamnesis.search.index import open_index

    made, running = fleet
    with session(chrome, running) as watched:
        watched.open("/")
        box = watched.page.locator(".side-search input")
        box.fill("deploy")
        box.press("Enter")
        watched.page.wait_for_url("**/search?q=deploy")
        titles = watched.page.locator(".results .note-title").all_inner_texts()
        marks = watched.page.locator(".results mark").all_inner_texts()
    with open_index(made.laptop) as index:
        expected = [hit.title for hit in search_notes(index, "deploy", limit=50)]
    assert titles == expected and len(titles) >= 2
    assert marks and all(m.lower().startswith("deploy") for m in marks)


def test_create_edit_history_restore(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    made, running = fleet
    store = made.laptop
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/new")
        page.fill("input[name=title]", "Warm the cache before a release")
        page.select_option("select[name=type]", "procedural")
        page.fill("input[name=project]", "github.com/acme/api")
        page.fill("input[name=tags]", "cache, release")
        page.fill("textarea[name=body]", "Run `make warm` before tagging.")
        page.click("button:has-text('Create note')")
        page.wait_for_url(re.compile(r"/note/.*\?msg=created$"))
        assert "Note created" in page.inner_text(".flash")
        path = page.url.split("/note/", 1)[1].split("?", 1)[0]
        assert path.startswith("projects/github.com-acme-api/howto/warm-the-cache-before-a-release-")
        assert "make warm" in (store.memory / path).read_text()
        assert git_out(store.memory, "status", "--porcelain") == ""  # committed

        page.click("a:has-text('Edit')")
        page.wait_for_url("**/edit/**")
        page.fill("textarea[name=body]", "Run `make warm-all` before tagging.")
        page.click("button:has-text('Save')")
        page.wait_for_url(re.compile(r"/note/.*\?msg=saved$"))
        assert "make warm-all" in page.inner_text(".markdown")
        assert "make warm-all" in (store.memory / path).read_text()

        page.click("a:has-text('History')")
        page.wait_for_url("**/history/**")
        versions = page.locator("li.version")
        assert versions.count() == 2
        assert "+Run `make warm-all` before tagging." in versions.nth(0).inner_text()
        older = versions.nth(1)
        older.locator("summary").click()
        older.locator("button:has-text('Restore this version')").click()
        page.wait_for_url(re.compile(r"/note/.*\?msg=restored$"))
        assert watched.dialogs and "Restore" in watched.dialogs[-1]
        body = page.inner_text(".markdown")
        assert "make warm before" in body.replace("`", "") and "warm-all" not in body
        text = (store.memory / path).read_text()
        assert "make warm`" in text and "warm-all" not in text
        watched.open("/history/" + path)
        assert page.locator("li.version").count() == 3
        assert "restore" in page.locator("li.version").nth(0).inner_text()


def test_a_change_on_disk_during_an_edit_is_not_overwritten(
    chrome: Any, fleet: tuple[Fleet, Dashboard]
) -> None:
    from anamnesis.store.operations import update_note

    made, running = fleet
    store = made.laptop
    lint = made.notes.lint
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/edit/" + lint)
        watched.expected_status.add(409)
        update_note(store, lint, body="1. Run `make lint-all` (changed in an editor meanwhile)\n")
        page.fill("textarea[name=body]", "My browser edit.")
        with page.expect_response(lambda r: "/edit/" in r.url and r.request.method == "POST") as posted:
            page.click("button:has-text('Save')")
        assert posted.value.status == 409
        page.wait_for_load_state("networkidle")
        assert "changed on disk" in page.inner_text(".flash")
        assert page.input_value("textarea[name=body]") == "My browser edit."
        assert "make lint-all" in page.inner_text("details")
    text = (store.memory / lint).read_text()
    assert "make lint-all" in text and "My browser edit." not in text


def test_resolve_the_conflict_then_sync_it_to_the_other_machine(
    chrome: Any, fleet: tuple[Fleet, Dashboard], shots: Path
) -> None:
    made, running = fleet
    path = made.conflict
    assert has_conflict_markers((made.laptop.memory / path).read_text())
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/conflicts")
        item = page.locator("li.note-item", has_text="Deploy target")
        assert f"{DESKTOP} ↔ {LAPTOP}" in item.inner_text()
        item.locator("a:has-text('Resolve')").click()
        page.wait_for_url("**/conflicts/**")
        side = page.locator("section.side", has_text="Keep theirs")
        theirs = side.locator("mark.pick").inner_text()
        page.click("button:has-text('Keep theirs')")
        page.wait_for_url(re.compile(r"/note/.*\?msg=resolved$"))
        body = page.inner_text(".markdown")
        assert theirs.strip().replace("**", "") in body
        text = (made.laptop.memory / path).read_text()
        assert not has_conflict_markers(text)
        assert "resolve conflict" in git_out(made.laptop.memory, "log", "-1", "--format=%s")
        watched.open("/conflicts")
        assert "No conflicts" in page.inner_text("main")

        watched.open("/")
        page.click("button:has-text('Sync now')")
        page.wait_for_selector("#action-result")
        result = page.inner_text("#action-result")
        assert re.match(r"Synced: sent [1-9]\d*, received \d+ commits", result), result
        assert "hub" in page.inner_text("main")
        page.screenshot(path=str(shots / "sync.png"))
    from anamnesis.sync import engine as sync

    sync.sync(made.desktop)
    desktop_text = (made.desktop.memory / path).read_text()
    assert not has_conflict_markers(desktop_text) and theirs.strip() in desktop_text


def test_reindex_button_shows_what_it_did(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    made, running = fleet
    (made.laptop.memory / "global" / "facts").mkdir(parents=True, exist_ok=True)
    (made.laptop.memory / "global" / "facts" / "hand-written.md").write_text(
        "# Written by hand\n\nIn an editor.\n"
    )
    with session(chrome, running) as watched:
        watched.open("/")
        watched.page.click("button:has-text('Reindex')")
        watched.page.wait_for_selector("#action-result")
        result = watched.page.inner_text("#action-result")
        assert "Index up to date" in result
        watched.open("/search?q=editor")
        assert "Written by hand" in watched.page.inner_text("main")


def test_script_in_a_note_does_not_run(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    made, running = fleet
    with session(chrome, running) as watched:
        watched.open("/note/" + made.notes.script)
        assert "<script>" in watched.page.inner_text(".markdown")
        assert watched.page.evaluate("typeof window.__pwned") == "undefined"
        watched.page.locator(".markdown").click()
        assert watched.page.evaluate("typeof window.__pwned") == "undefined"
        assert watched.dialogs == []


def test_memory_map_zooms_and_a_click_opens_the_note(chrome: Any, fleet: tuple[Fleet, Dashboard]) -> None:
    made, running = fleet
    target = made.notes.lint
    with session(chrome, running) as watched:
        page = watched.page
        watched.open("/map")
        info = wait_map(watched)
        assert info["nodes"] >= 7 and info["edges"] >= 2
        legend = page.inner_text("#map-legend")
        assert "github.com/acme/api" in legend and "(global)" in legend
        page.click("#map-zoom-in")
        page.click("#map-zoom-in")
        point = page.evaluate(f"window.anamnesisMap.screenPoint({target!r})")
        page.mouse.move(point["x"], point["y"])
        assert "Lint before pushing" in page.inner_text("#map-tip")
        page.mouse.click(point["x"], point["y"])
        page.wait_for_url("**/note/" + target)
        assert page.inner_text("h1") == "Lint before pushing"
