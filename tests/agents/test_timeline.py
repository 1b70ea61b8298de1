"""The timeline: two weeks of sessions on two machines that sync, read as text, markdown, JSON, MCP and a page."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, Machine, fleet  # noqa: F401
from mcp.client.session import ClientSession
from test_mcp import Call, _data, _drive
from web_support import chrome, dashboard, session  # noqa: F401

from anamnesis.agents.capture import DECISIONS, OPEN_ITEMS
from anamnesis.base.notes import Note, new_id, note_relpath
from anamnesis.store.operations import save_note

API = "github.com/acme/api"
WEB = "github.com/acme/web"
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def _ago(days: int, hour: int = 10) -> str:
    when = (NOW - dt.timedelta(days=days)).replace(hour=hour, minute=15, second=0)
    return when.isoformat().replace("+00:00", "Z")


def _session(
    machine: Machine, days: int, project: str, ask: str, decided: list[str], open_: list[str]
) -> Note:
    body = [f"## Ask\n\n{ask}\n", f"## Outcome\n\nDid: {ask.lower()}.\n"]
    if decided:
        body.append(f"{DECISIONS}\n\n" + "".join(f"- {d}\n" for d in decided))
    if open_:
        body.append(f"{OPEN_ITEMS}\n\n" + "".join(f"- {o}\n" for o in open_))
    body.append("## Session\n\n- project\n")
    note_id = new_id()
    stamp = _ago(days)
    note = Note(
        path=note_relpath("episodic", ask, note_id, project),
        id=note_id,
        type="episodic",
        title=ask,
        body="\n".join(body),
        project=project,
        tags=["session"],
        created=stamp,
        updated=stamp,
        machine=machine.name,
        source="claude-code",
    )
    return save_note(machine.store, note)


def _fact(machine: Machine, days: int, title: str, supersedes: list[str] | None = None) -> Note:
    note_id = new_id()
    stamp = _ago(days, 11)
    note = Note(
        path=note_relpath("semantic", title, note_id, API),
        id=note_id,
        type="semantic",
        title=title,
        body=title + ".",
        project=API,
        created=stamp,
        updated=stamp,
        machine=machine.name,
        supersedes=supersedes or [],
    )
    return save_note(machine.store, note)


def _two_weeks(fleet: Fleet) -> tuple[Machine, Machine]:
    hub = fleet.hub()
    desk = fleet.machine("desk", {"hub": fleet.url(hub)})
    laptop = fleet.machine("laptop", {"hub": fleet.url(hub)})
    _session(desk, 13, API, "Set up the connection pool", ["Going with pg_bouncer"], ["Load test the pool"])
    old = _fact(desk, 12, "Pool size is 20")
    _session(laptop, 10, WEB, "Restyle the login page", [], ["Dark mode colours"])
    _session(
        desk, 8, API, "Chase the pool timeouts", ["Root cause: idle connections"], ["Raise the pool size"]
    )
    _session(laptop, 2, API, "Raise the pool size", ["Switched to 40 connections"], ["Watch the error rate"])
    _fact(laptop, 2, "Pool size is 40", [old.id])
    _session(desk, 1, WEB, "Fix the login redirect", ["The fix is a relative URL"], [])
    for machine in (desk, laptop, desk):
        assert machine.sync().exit_code == 0
    return desk, laptop


def test_two_weeks_on_two_machines_read_the_same_everywhere(fleet: Fleet) -> None:
    desk, laptop = _two_weeks(fleet)
    whole = json.loads(desk.cli("timeline", "--since", "14d", "--json").stdout)
    assert whole == json.loads(laptop.cli("timeline", "--since", "14d", "--json").stdout) | {
        "since": whole["since"]
    }
    assert whole["machines"] == ["desk", "laptop"]
    days = [d["date"] for d in whole["days"]]
    assert days == sorted(days, reverse=True) and len(days) == 6
    entries = [e for d in whole["days"] for e in d["entries"]]
    by_title = {e["title"]: e for e in entries}
    assert by_title["Raise the pool size"]["machine"] == "laptop"
    assert by_title["Raise the pool size"]["decisions"] == ["Switched to 40 connections"]
    assert by_title["Pool size is 40"]["supersedes"] == ["Pool size is 20"]
    assert by_title["Pool size is 40"]["change"] == "added"
    # still open: what the latest session of each project left, not what was settled since
    assert [(i["project"], i["item"]) for i in whole["still_open"]] == [(API, "Watch the error rate")]

    week = json.loads(desk.cli("timeline", "--json").stdout)  # the default: 7 days
    titles = {e["title"] for d in week["days"] for e in d["entries"]}
    assert titles == {"Raise the pool size", "Pool size is 40", "Fix the login redirect"}
    web = json.loads(desk.cli("timeline", "--since", "14d", "-p", WEB, "--json").stdout)
    assert {e["project"] for d in web["days"] for e in d["entries"]} == {WEB}
    assert [i["item"] for i in web["still_open"]] == []  # the last web session left nothing open

    text = desk.cli("timeline", "--since", "2w").stdout
    assert "session: Raise the pool size" in text and "decided: Switched to 40 connections" in text
    assert "laptop · github.com/acme/api" in text and "Still open" in text
    assert text.index(by_title["Fix the login redirect"]["when"][:10]) < text.index(
        by_title["Set up the connection pool"]["when"][:10]
    )  # newest day first
    md = desk.cli("timeline", "--since", "14d", "--md").stdout
    assert md.startswith("# Timeline since") and "## Still open" in md and "- [ ] Watch the error rate" in md
    bad = desk.cli("timeline", "--since", "last tuesday")
    assert bad.returncode == 2 and "cannot read date" in bad.stderr and bad.stdout == ""
    both = desk.cli("timeline", "--md", "--json")
    assert both.returncode == 2 and "one of --md and --json" in both.stderr and both.stdout == ""


def test_the_mcp_tool_returns_what_the_cli_does(fleet: Fleet, tmp_path: Path) -> None:
    desk, _laptop = _two_weeks(fleet)
    expected = json.loads(desk.cli("timeline", "--since", "14d", "-p", API, "--json").stdout)

    async def script(session: ClientSession, call: Call) -> None:
        got = _data(await call("timeline", {"since": "14d", "project": API}))
        assert got["days"] == expected["days"] and got["still_open"] == expected["still_open"]
        assert (await call("timeline", {"since": "x" * 100})).is_error

    _drive(desk.store, tmp_path, script)


@pytest.mark.e2e
def test_the_timeline_page_in_chromium(fleet: Fleet, chrome: Any) -> None:
    desk, _laptop = _two_weeks(fleet)
    with dashboard(desk.home) as running, session(chrome, running) as watched:
        watched.open("/")
        watched.page.click("nav a[href='/timeline']")
        watched.page.wait_for_url("**/timeline")
        text = watched.page.inner_text("main")
        assert "Fix the login redirect" in text and "Raise the pool size" not in text.split("Still open")[0]
        watched.page.click("text=two weeks")
        watched.page.wait_for_url("**/timeline?since=14d*")
        text = watched.page.inner_text("main")
        assert "Set up the connection pool" in text and "Switched to 40 connections" in text
        assert "Watch the error rate" in watched.page.inner_text("#still-open")
        heads = watched.page.locator(".tl-day h2").all_inner_texts()
        assert heads == sorted(heads, reverse=True) and len(heads) == 6
        watched.page.click("text=Raise the pool size")
        watched.page.wait_for_url("**/note/**")
        assert "Switched to 40 connections" in watched.page.inner_text("main")


def test_a_note_added_earlier_in_the_span_and_changed_today_shows_on_both_days(fleet: Fleet) -> None:
    from anamnesis.agents.timeline import build_timeline
    from anamnesis.store.operations import load_note

    desk = fleet.machine("desk")
    note = _fact(desk, 5, "How to release the API")
    changed = load_note(desk.store, note.path)
    changed.body += "\nTag, then promote.\n"
    changed.updated = _ago(0, 9)
    save_note(desk.store, changed)
    days = {day: [(e.change, e.title) for e in entries] for day, entries in build_timeline(desk.store).days}
    assert ("added", "How to release the API") in days[_ago(5)[:10]]
    assert ("updated", "How to release the API") in days[_ago(0)[:10]], days


def test_notes_whose_date_is_no_date_or_ahead_of_now_are_left_out_and_said(fleet: Fleet) -> None:
    from anamnesis.agents.timeline import build_timeline, render_text

    desk = fleet.machine("desk")
    _fact(desk, 1, "A real fact")
    facts = desk.store.memory / "global" / "facts"
    facts.mkdir(parents=True, exist_ok=True)
    for name, created in (("garbage", "garbage"), ("list", "[1, 2]"), ("future", "'2099-01-01T00:00:00Z'"), ("packed", "20261127")):
        (facts / f"{name}.md").write_text(f"---\ntitle: {name}\ntype: semantic\ncreated: {created}\n---\nbody\n")
    timeline = build_timeline(desk.store, since="0d")
    days = [day for day, _entries in timeline.days]
    assert all(day[:4].isdigit() and day[4] == "-" and day < "2099" for day in days), days
    assert sorted(p.rsplit("/", 1)[-1] for p in timeline.undated) == ["future.md", "garbage.md", "list.md", "packed.md"]
    assert "Left out: 4 notes whose date is no date or ahead of now" in render_text(timeline)
    assert build_timeline(desk.store, since="2100-01-01").days == []


def test_a_note_added_on_one_machine_and_edited_on_another_credits_neither_wrongly(fleet: Fleet) -> None:
    """A note names only its latest writer: the adding is not credited to the machine that edited
    it (`?`), and the edit, the same day too, is an entry of its own with that machine."""
    from anamnesis.agents.timeline import build_timeline
    from anamnesis.store.operations import load_note

    desk = fleet.machine("desk")
    note = _fact(desk, 0, "Pool size")
    changed = load_note(desk.store, note.path)
    changed.body += "\nRaised to 40.\n"
    changed.updated, changed.machine = _ago(0, 15), "laptop"
    save_note(desk.store, changed)
    entries = [(e.change, e.machine) for _day, day in build_timeline(desk.store).days for e in day if e.title == "Pool size"]
    assert entries == [("added", ""), ("updated", "laptop")], entries
