"""The dashboard's writes over real HTTP: resolve (both / edit), restore, sync and reindex buttons."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from conftest import RunCli
from web_support import Dashboard, Seeded, dashboard, seed_store

from anamnesis.base.git import git_out, run_git
from anamnesis.base.notes import has_conflict_markers
from anamnesis.base.paths import Store
from anamnesis.store import history
from anamnesis.store.operations import update_note
from anamnesis.web.security import csrf_for

CONFLICTED_BODY = """Intro line.

<<<<<<< desktop-91bc
Use port 5432.
=======
Use port 6432.
>>>>>>> laptop-7f3a

Outro line.
"""


@pytest.fixture
def served(store: Store) -> Iterator[tuple[Dashboard, Store, Seeded]]:
    seeded = seed_store(store)
    with dashboard(store.home) as running:
        yield running, store, seeded


def client(running: Dashboard) -> httpx.Client:
    return httpx.Client(
        base_url=running.base, cookies={f"anamnesis_{running.port}": running.token}, timeout=30
    )


def make_conflict(store: Store, path: str) -> str:
    """Put conflict markers in a note's body and commit it, as sync leaves a same-line conflict."""
    text = (store.memory / path).read_text()
    head, _sep, _body = text.rpartition("---\n")
    (store.memory / path).write_text(head + "---\n\n" + CONFLICTED_BODY)
    run_git(store.memory, "commit", "-q", "-am", "laptop-7f3a: sync: conflict")
    return (store.memory / path).read_text()


def base_of(page: str) -> str:
    found = re.search(r'name="base" value="([0-9a-f]+)"', page)
    assert found is not None
    return found.group(1)


def test_keep_both_resolves_through_the_conflicts_module(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, store, seeded = served
    make_conflict(store, seeded.deploy)
    with client(running) as http:
        listing = http.get("/conflicts").text
        assert "Deploy target" in listing and "desktop-91bc ↔ laptop-7f3a" in listing
        page = http.get("/conflicts/" + seeded.deploy).text
        form = {"action": "both", "base": base_of(page), "_csrf": csrf_for(running.token)}
        response = http.post("/conflicts/" + seeded.deploy, data=form, follow_redirects=False)
    assert response.status_code == 303
    text = (store.memory / seeded.deploy).read_text()
    assert not has_conflict_markers(text)
    assert text.index("Use port 5432.") < text.index("Use port 6432.") < text.index("Outro line.")
    assert git_out(store.memory, "log", "-1", "--format=%s").endswith(f"resolve conflict in {seeded.deploy}")
    assert git_out(store.memory, "status", "--porcelain") == ""


def test_edited_resolution_must_remove_the_markers(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, store, seeded = served
    conflicted = make_conflict(store, seeded.deploy)
    with client(running) as http:
        base = base_of(http.get("/conflicts/" + seeded.deploy).text)
        form = {"action": "edit", "base": base, "text": conflicted, "_csrf": csrf_for(running.token)}
        form["text"] = conflicted.replace("Outro line.", "Outro line, my merge in progress.")
        refused = http.post("/conflicts/" + seeded.deploy, data=form, follow_redirects=False)
        assert refused.status_code == 400 and "conflict markers" in refused.text
        # The page comes back with the user's text in the box, not an error page that loses it.
        assert "Outro line, my merge in progress." in refused.text and "Save resolution" in refused.text
        resolved = conflicted.replace(
            CONFLICTED_BODY, "Intro line.\n\nUse port 6432 (pgbouncer).\n\nOutro line.\n"
        )
        form["text"] = resolved
        response = http.post("/conflicts/" + seeded.deploy, data=form, follow_redirects=False)
    assert response.status_code == 303
    text = (store.memory / seeded.deploy).read_text()
    assert "Use port 6432 (pgbouncer)." in text and not has_conflict_markers(text)
    assert "title: Deploy target" in text
    assert "resolve conflict" in git_out(store.memory, "log", "-1", "--format=%s")


def test_resolve_writes_only_a_note_that_has_a_conflict(served: tuple[Dashboard, Store, Seeded]) -> None:
    # "Edit" on the resolve page saves whole text; without this check it wrote any path it was
    # posted to, a clean note or a new file of any name.
    from anamnesis.web.context import text_sha

    running, store, seeded = served
    clean = (store.memory / seeded.british).read_text()
    before = git_out(store.memory, "rev-parse", "HEAD")
    replacement = "---\ntitle: Replaced\ntype: semantic\n---\nReplaced.\n"
    with client(running) as http:
        for path, base, status in (
            (seeded.british, text_sha(clean), 400),  # a clean note: "no conflict" in the page
            ("global/facts/made-up.txt", text_sha(""), 404),  # no note at all: not found
        ):
            form = {"action": "edit", "base": base, "text": replacement, "_csrf": csrf_for(running.token)}
            response = http.post("/conflicts/" + path, data=form, follow_redirects=False)
            assert response.status_code == status, (path, response.status_code)
            assert "no conflict" in response.text or "no note at" in response.text
    assert (store.memory / seeded.british).read_text() == clean
    assert not (store.memory / "global/facts/made-up.txt").exists()
    assert git_out(store.memory, "rev-parse", "HEAD") == before


def test_keeping_a_side_that_leaves_markers_is_an_error_not_resolved(
    served: tuple[Dashboard, Store, Seeded],
) -> None:
    # Markers inside the front matter (a merge made by hand with git) are not blocks that keeping
    # a side removes: this said "resolved" and committed nothing.
    running, store, _seeded = served
    path = "global/facts/hand-merged.md"
    (store.memory / path).parent.mkdir(parents=True, exist_ok=True)
    text = "---\n<<<<<<< a\ntitle: One\n=======\ntitle: Two\n>>>>>>> b\ntype: semantic\n---\nbody\n"
    (store.memory / path).write_text(text)
    run_git(store.memory, "add", path)
    run_git(store.memory, "commit", "-q", "-m", "laptop-7f3a: hand merge")
    with client(running) as http:
        page = http.get("/conflicts/" + path).text
        form = {"action": "theirs", "base": base_of(page), "_csrf": csrf_for(running.token)}
        response = http.post("/conflicts/" + path, data=form, follow_redirects=False)
    assert response.status_code == 400 and "edit it" in response.text
    assert (store.memory / path).read_text() == text


def test_resolution_refused_when_the_note_changed_meanwhile(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, store, seeded = served
    make_conflict(store, seeded.deploy)
    with client(running) as http:
        base = base_of(http.get("/conflicts/" + seeded.deploy).text)
        path = store.memory / seeded.deploy
        path.write_text(path.read_text().replace("Intro line.", "Intro line, edited meanwhile."))
        form = {"action": "ours", "base": base, "_csrf": csrf_for(running.token)}
        response = http.post("/conflicts/" + seeded.deploy, data=form, follow_redirects=False)
    assert response.status_code == 409
    assert has_conflict_markers(path.read_text()) and "edited meanwhile" in path.read_text()


def test_restore_over_http_and_its_stale_check(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, store, seeded = served
    update_note(store, seeded.british, body="Spell color without a u.\n")
    old = history.note_history(store, seeded.british)[1]
    with client(running) as http:
        page = http.get("/history/" + seeded.british).text
        assert "Restore this version" in page
        form = {"commit": old.commit, "base": base_of(page), "_csrf": csrf_for(running.token)}
        update_note(store, seeded.british, body="Changed again meanwhile.\n")
        stale = http.post("/restore/" + seeded.british, data=form, follow_redirects=False)
        assert stale.status_code == 409
        assert "Changed again meanwhile." in (store.memory / seeded.british).read_text()
        form["base"] = base_of(http.get("/history/" + seeded.british).text)
        response = http.post("/restore/" + seeded.british, data=form, follow_redirects=False)
        assert response.status_code == 303
        form["commit"] = "--output=/tmp/x"
        assert http.post("/restore/" + seeded.british, data=form).status_code == 400
    assert "Spell colour with a u." in (store.memory / seeded.british).read_text()


def test_sync_and_reindex_buttons_report_in_json(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, store, _seeded = served
    (store.memory / "global" / "facts" / "by-hand.md").parent.mkdir(parents=True, exist_ok=True)
    (store.memory / "global" / "facts" / "by-hand.md").write_text("# Added by hand\n")
    headers = {"Accept": "application/json", "X-CSRF-Token": csrf_for(running.token)}
    with client(running) as http:
        reindex = http.post("/actions/reindex", headers=headers).json()
        assert reindex["ok"] and reindex["result"]["added"] >= 1
        synced = http.post("/actions/sync", headers=headers).json()
    assert synced["result"]["outcome"] == "synced" and synced["result"]["exit_code"] == 0
    assert "global/facts/by-hand.md" in synced["result"]["committed"]
    assert git_out(store.memory, "status", "--porcelain") == ""


def test_a_new_note_with_a_path_for_a_project_is_refused_as_the_cli_refuses_it(
    served: tuple[Dashboard, Store, Seeded],
) -> None:
    running, store, _seeded = served
    before = sorted(p.relative_to(store.memory).as_posix() for p in store.memory.rglob("*.md"))
    with client(running) as http:
        for key in ("../../etc", "/home/user/secret", ".git"):
            form = {"title": "Sneaky", "type": "semantic", "body": "x", "project": key, "_csrf": csrf_for(running.token)}
            refused = http.post("/new", data=form, follow_redirects=False)
            assert refused.status_code == 400 and "is refused" in refused.text, (key, refused.text[:300])
            assert "Create note" in refused.text  # the form comes back, the text with it
    assert sorted(p.relative_to(store.memory).as_posix() for p in store.memory.rglob("*.md")) == before


def test_an_edited_resolution_with_broken_front_matter_is_refused_and_kept(
    served: tuple[Dashboard, Store, Seeded],
) -> None:
    running, store, seeded = served
    conflicted = make_conflict(store, seeded.deploy)
    with client(running) as http:
        base = base_of(http.get("/conflicts/" + seeded.deploy).text)
        merged = conflicted.replace(CONFLICTED_BODY, "Intro line.\n\nUse port 6432.\n\nOutro line.\n")
        broken = merged.replace("title: Deploy target", "title: Deploy target\ntags: [deploy")
        form = {"action": "edit", "base": base, "text": broken, "_csrf": csrf_for(running.token)}
        refused = http.post("/conflicts/" + seeded.deploy, data=form, follow_redirects=False)
    assert refused.status_code == 400 and "front matter" in refused.text and "tags: [deploy" in refused.text
    assert (store.memory / seeded.deploy).read_text() == conflicted  # nothing written


def test_a_note_whose_front_matter_is_broken_is_edited_as_its_whole_text(
    served: tuple[Dashboard, Store, Seeded],
) -> None:
    running, store, seeded = served
    path = store.memory / seeded.british
    good = path.read_text()
    broken = good.replace("tags:\n- style\n", "tags: [style, misc\n")
    assert broken != good
    path.write_text(broken)
    run_git(store.memory, "commit", "-q", "-am", "broken by hand")
    with client(running) as http:
        page = http.get(f"/edit/{seeded.british}").text
        assert 'name="raw"' in page and "front matter is not right" in page and 'name="title"' not in page
        base = base_of(page)
        form = {"mode": "raw", "base": base, "raw": broken, "_csrf": csrf_for(running.token)}
        still = http.post(f"/edit/{seeded.british}", data=form, follow_redirects=False)
        assert still.status_code == 400 and "still not right" in still.text and "[style, misc" in still.text
        assert path.read_text() == broken
        form["raw"] = broken.replace("tags: [style, misc\n", "tags: [style, misc]\n")
        saved = http.post(f"/edit/{seeded.british}", data=form, follow_redirects=False)
    assert saved.status_code == 303, saved.text[:500]
    text = path.read_text()
    assert "tags: [style, misc]" in text and text.count("\n---\n") == 1 and "title: Answer in British English" in text
    assert "edit " + seeded.british in git_out(store.memory, "log", "-1", "--format=%s")
    with client(running) as http:  # a path through a note is no note: not found, not a server error
        assert http.get(f"/note/{seeded.british}/edit").status_code == 404


def test_a_long_note_in_a_script_of_many_bytes_a_character_is_saved_from_the_editor(
    served: tuple[Dashboard, Store, Seeded],
) -> None:
    """300,000 CJK characters: 900 KB as UTF-8, under the note limit, but 2.7 MB once URL-encoded."""
    running, store, seeded = served
    body = ("記憶は機械を越えて続く。" * 25_000)[:300_000]
    update_note(store, seeded.lint, body=body)
    with client(running) as http:
        page = http.get(f"/edit/{seeded.lint}").text
        form = {
            "title": "Lint before pushing", "type": "procedural", "tags": "ci database",
            "body": body + "\n最後の行。", "base": base_of(page), "_csrf": csrf_for(running.token),
        }
        saved = http.post(f"/edit/{seeded.lint}", data=form, follow_redirects=False)
        preview = http.post("/api/preview", data={"body": body, "_csrf": csrf_for(running.token)})
    assert saved.status_code == 303, saved.text[:300]
    assert (store.memory / seeded.lint).read_text().rstrip().endswith("最後の行。")
    assert preview.status_code == 200 and "記憶" in preview.json()["html"]


def test_a_conflicts_page_of_no_note_is_not_found_and_a_page_past_the_end_says_so(
    served: tuple[Dashboard, Store, Seeded],
) -> None:
    running, _store, _seeded = served
    with client(running) as http:
        assert http.get("/conflicts/projects/nope.md").status_code == 404
        past = http.get("/browse?page=999")
    assert past.status_code == 200 and "There is no page 999" in past.text, past.text[-800:]


def test_uninstall_stops_a_running_dashboard(store: Store, run_cli: RunCli) -> None:
    with dashboard(store.home) as running:
        planned = run_cli("uninstall", "--print")
        assert f"stop the dashboard (`anamnesis web`, pid {running.proc.pid})" in planned.stdout, planned.stdout
        assert running.proc.poll() is None  # --print changes nothing
        done = run_cli("uninstall")
        assert done.returncode == 0, done.stderr
        assert f"stopped `anamnesis web` (pid {running.proc.pid})" in done.stdout, done.stdout
        assert running.proc.wait(timeout=10) is not None  # gone by the time uninstall returned
    from anamnesis.base.running import held_in

    assert held_in(store.state_dir / "dashboards") == []  # and the file it held is tidied away
