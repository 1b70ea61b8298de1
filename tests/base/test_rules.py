"""Rules every writer shares, each in one place: note types, tags, global preferences, stale writes,
and the periodic index refresh of the long-running adapters."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from conftest import RunCli
from fleet import Fleet, fleet  # noqa: F401
from mcp.client.session import ClientSession
from test_mcp import Call, _data, _drive
from test_web_actions import client as web_client
from web_support import dashboard

from anamnesis.base.errors import AnamnesisError, NoteChanged, UsageError
from anamnesis.base.notes import (
    TAG_INPUT_PATTERN,
    check_type,
    is_note_path,
    normalize_tags,
    note_project,
    note_relpath,
)
from anamnesis.base.paths import Store
from anamnesis.importers.plan import note_files
from anamnesis.search.index import open_index
from anamnesis.search.refresh import PeriodicRefresh
from anamnesis.search.scan import scan_tree
from anamnesis.store.operations import (
    create_note,
    move_note,
    read_note,
    resolve_ref,
    save_edited_text,
    update_note,
)
from anamnesis.sync.stamping import stamp_edits
from anamnesis.web.security import csrf_for


def test_tags_are_lower_case_without_hash_or_repeats_in_order() -> None:
    assert normalize_tags(["#Deploy", "deploy", " Ops ", "", None]) == ["deploy", "ops"]
    assert normalize_tags("Deploy, #ops  db") == ["deploy", "ops", "db"]
    assert normalize_tags(tag for tag in ("B", "a")) == ["b", "a"]  # any collection, not only lists
    assert normalize_tags(None) == []


def test_an_unknown_type_is_one_usage_error_naming_the_types() -> None:
    assert check_type("procedural") == "procedural"
    with pytest.raises(UsageError, match="unknown type 'fact'; use one of semantic, procedural"):
        check_type("fact")


def test_preferences_belong_to_no_project() -> None:
    assert note_project("preference", "github.com/acme/api") is None
    assert note_project("semantic", " github.com/acme/api ") == "github.com/acme/api"
    assert note_project("semantic", None) is None
    assert note_project("semantic", "  ") == ""  # refused when the note is validated, never made global
    assert note_relpath("preference", "Be brief", "abc", "github.com/acme/api").startswith("global/preferences/")


def test_the_store_applies_the_rules(store: Store) -> None:
    note = create_note(
        store, type="preference", title="British English", body="Always.", project="github.com/acme/api",
        tags=["#Style", "style", "Writing"],
    )
    assert note.project is None and note.path.startswith("global/preferences/")
    assert note.tags == ["style", "writing"]
    changed = update_note(store, note.id, tags=(t for t in ("#Tone", "TONE")))
    assert changed.tags == ["tone"]
    with pytest.raises(UsageError):
        create_note(store, type="fact", title="x", body="y")


def test_a_stale_write_is_refused_by_class_and_nothing_is_lost(store: Store) -> None:
    note = create_note(store, type="semantic", title="Pool size", body="40")
    path = store.memory / note.path
    seen = path.read_text(encoding="utf-8")
    path.write_text(seen.replace("40", "60"), encoding="utf-8")  # someone else's edit
    with pytest.raises(NoteChanged):
        update_note(store, note.id, body="50", expected_text=seen)
    with pytest.raises(NoteChanged, match="changed on disk"):
        save_edited_text(store, note.path, seen.replace("40", "50").encode(), expected=seen.encode())
    assert "60" in path.read_text(encoding="utf-8")
    assert issubclass(NoteChanged, AnamnesisError)  # adapters still show it as one line


def test_the_periodic_refresh_picks_up_hand_edits_once_its_period_passed(store: Store) -> None:
    note = create_note(store, type="semantic", title="Cache", body="ttl 60")
    refresher = PeriodicRefresh(store, every=0.5)
    with refresher.open() as index:  # the first open always scans
        assert index.find_ref(note.id) == [note.path]
    hand = store.memory / "global" / "facts" / "typed-by-hand.md"
    hand.write_text("---\ntitle: Typed by hand\n---\nbody\n", encoding="utf-8")
    with refresher.open() as index:
        assert index.find_ref("global/facts/typed-by-hand.md") == []  # within the period: no scan
    time.sleep(0.6)
    with refresher.open(fresh=False) as index:
        assert index.find_ref("global/facts/typed-by-hand.md") == []  # not asked to be fresh
    with refresher.open() as index:
        assert index.find_ref("global/facts/typed-by-hand.md") == ["global/facts/typed-by-hand.md"]
    hand.unlink()
    refresher.expire()  # after a sync: the next open scans whatever the period says
    with refresher.open() as index:
        assert index.find_ref("global/facts/typed-by-hand.md") == []


DRAFT = "projects/github.com-acme-api/.drafts/x.md"  # a person's drafts folder: not notes
NORMAL = "projects/github.com-acme-api/facts/pool-size.md"
ARCHIVED = ".archive/global/facts/old.md"  # where `tidy` archives a note: out of search


def _note_text(title: str) -> str:
    return f"---\ntitle: {title}\ntype: semantic\n---\n{title} body\n"


def _ours(paths: Iterable[str]) -> set[str]:
    return {p for p in paths if p in (DRAFT, NORMAL, ARCHIVED)}


def test_every_caller_agrees_on_which_files_are_notes(fleet: Fleet) -> None:
    """One rule (`notes.is_note_path`): a refresh of named paths (after a write or a sync), the full
    refresh's scan, a reindex, sync's stamping and its counts all see the same notes."""
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    for path in (DRAFT, NORMAL, ARCHIVED):
        a.write(path, _note_text(path.rsplit("/", 1)[-1]))
    assert {p for p in (DRAFT, NORMAL, ARCHIVED) if is_note_path(p)} == {NORMAL}

    # sync's stamping: only the note is stamped, the draft is committed as the person left it
    assert _ours(stamp_edits(a.memory, "a")) == {NORMAL}
    assert a.read(DRAFT) == _note_text("x.md")
    result = a.sync()
    assert result.exit_code == 0
    assert "sync: 1 note changed" in a.git("log", "-1", "--format=%s")

    # the refresh of the paths a sync brought in
    result = b.sync()
    assert result.exit_code == 0 and (b.memory / DRAFT).is_file()
    assert _ours(result.changed) == {NORMAL}
    with open_index(b.store) as index:
        after_sync = _ours(index.paths())
        # the refresh after a write names the written path
        index.refresh([DRAFT, NORMAL, ARCHIVED])
        after_write = _ours(index.paths())
        # the full refresh, its scan, and a reindex
        full = index.refresh()
        after_full = _ours(index.paths())
        index.rebuild()
        after_rebuild = _ours(index.paths())
    assert _ours(scan_tree(str(b.memory))) == {NORMAL}
    assert after_sync == after_write == after_full == after_rebuild == {NORMAL}
    assert full.changed == 0  # nothing the earlier refreshes indexed is taken out again

    # a write, a move and a reference take the same rule
    with pytest.raises(UsageError, match="not a note"):
        resolve_ref(b.store, DRAFT)
    assert resolve_ref(b.store, NORMAL) == NORMAL
    with pytest.raises(UsageError, match="not a note path"):
        create_note(b.store, type="semantic", title="Draft", body="x", path="global/.drafts/y.md")
    with pytest.raises(UsageError, match="not a note path"):
        move_note(b.store, NORMAL, "global/.drafts/pool-size.md")


TAG_INPUT = ["a b", "#C,d"]  # one item with a space, one with a comma and a '#'
TAGS = ["a", "b", "c", "d"]


def test_the_same_tags_come_out_of_every_way_in(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    """One tag rule (`notes.normalize_tags`): Python, the CLI, MCP, the web form, front matter and
    an import all read `"a b"` as two tags, and MCP's schema lets through what the rule takes."""
    assert normalize_tags(TAG_INPUT) == normalize_tags(", ".join(TAG_INPUT)) == TAGS
    assert create_note(store, type="semantic", title="From Python", body="x", tags=TAG_INPUT).tags == TAGS

    made = run_cli("new", "From the CLI", "--body", "x", "--tag", TAG_INPUT[0], "--tag", TAG_INPUT[1], "--json")
    assert made.returncode == 0, made.stderr
    assert read_note(store, json.loads(made.stdout)["path"]).tags == TAGS

    written: dict[str, Any] = {}

    async def script(session: ClientSession, call: Call) -> None:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        item = listed["write"].input_schema["properties"]["tags"]["anyOf"][0]["items"]
        written["pattern"] = item["pattern"]
        written.update(_data(await call("write", {"title": "From MCP", "body": "x", "tags": TAG_INPUT})))
        written["refused"] = (await call("write", {"title": "No tag", "body": "x", "tags": ["#", " , "]})).is_error

    _drive(store, tmp_path, script)
    assert written["pattern"] == TAG_INPUT_PATTERN and written["refused"]
    assert read_note(store, written["written"]).tags == TAGS

    with dashboard(store.home) as running, web_client(running) as http:
        form = {"title": "From the web", "type": "semantic", "body": "x", "tags": " ".join(TAG_INPUT)}
        response = http.post("/new", data={**form, "_csrf": csrf_for(running.token)}, follow_redirects=False)
    assert response.status_code == 303, response.text
    path = unquote(response.headers["location"].split("?", 1)[0].removeprefix("/note/"))
    assert read_note(store, path).tags == TAGS

    hand = "global/facts/typed-by-hand.md"
    (store.memory / hand).write_text('---\ntitle: By hand\ntags: ["a b", "#C,d"]\n---\nx\n', encoding="utf-8")
    assert read_note(store, hand).tags == TAGS

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "imported.md").write_text('---\ntitle: Imported\ntags: ["a b"]\n---\nx\n', encoding="utf-8")
    done = run_cli("import", "markdown", str(vault), "--tag", TAG_INPUT[1], "--json")
    assert done.returncode == 0, done.stderr
    [imported] = [p for p in note_files(store.memory) if "imported" in p]
    assert read_note(store, imported).tags == TAGS


def test_a_tag_filter_follows_the_tag_rule(store: Store, run_cli: RunCli) -> None:
    """`--tag` reads its value by the same rule as tags are written: '#A' is a, and 'a b' asks for
    notes holding both tags, in search and in list."""
    from anamnesis.store.operations import create_note

    both = create_note(store, type="semantic", title="Pool sizes", body="pool size 20", tags=["a", "b"])
    other = create_note(store, type="semantic", title="Pool modes", body="pool mode session", tags=["a", "c"])

    def paths(*args: str) -> list[str]:
        proc = run_cli(*args, "--json")
        assert proc.returncode == 0, proc.stderr
        return sorted(hit["path"] for hit in json.loads(proc.stdout))

    assert paths("search", "pool", "--tag", "a b") == [both.path]
    assert paths("list", "--tag", "#B") == [both.path]
    assert paths("list", "--tag", "a, c") == [other.path]
    assert paths("search", "pool", "--tag", "#") == []
