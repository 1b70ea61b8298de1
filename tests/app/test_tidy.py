"""`anamnesis tidy`: what it proposes and why, applying a plan (twice), the archive, a terminal, two machines."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, RunCli, cli_env
from fleet import Fleet, Machine, fleet  # noqa: F401
from mcp.client.session import ClientSession
from test_embed import model_dir  # noqa: F401  (the session fixture: the real model folder)
from test_inject import _note
from test_mcp import Call, _data, _drive

from anamnesis.base import repo
from anamnesis.base.notes import Note, parse_note
from anamnesis.base.paths import Store

API = "github.com/acme/api"
POOL = (
    "The api talks to postgres through pg_bouncer in transaction mode.\n"
    "Prepared statements are off because transaction mode breaks them.\n"
    "The pool lives in deploy/pgbouncer.ini and is reloaded with SIGHUP.\n"
    "Monitoring comes from the pgbouncer admin console on port 6432.\n"
)
POOL_AGAIN = (
    "The api talks to postgres through pg_bouncer in transaction mode.\n"
    "Prepared statements are off because transaction mode breaks them.\n"
    "The pool lives in deploy/pgbouncer.ini and is reloaded with SIGHUP.\n"
    "Idle clients are dropped after 600 seconds by client_idle_timeout.\n"
)
SESSION = (
    "## Ask\n\nwhy do the nightly exports time out\n\n## Outcome\n\n"
    "Found the exports ran in one transaction holding locks for an hour.\n\n## Decisions\n\n"
    "- Exports stream rows with a server side cursor in batches of 5000 rows\n"
    "- The export job runs at 03:00 after the vacuum finishes\n\n"
    "## Commands run\n\n- `make export`\n"
)
PARAPHRASES = (
    "The API reaches the database through pg_bouncer running in transaction mode, so prepared statements are disabled.\n",
    "Our service talks to postgres via pgbouncer in transaction pooling mode; that is why prepared statements are turned off.\n",
)
FACT = "Exports stream rows with a server side cursor in batches of 5000 rows.\nThe export job runs at 03:00 after the vacuum finishes.\n"


def _put(store: Store, kind: str, title: str, body: str, days: int) -> Note:
    return _note(store, kind, title, body, API, days_old=days)


def _seed(store: Store) -> dict[str, Note]:
    """Notes to tidy (a duplicate, a replaced note, a stale session) and ones to leave, committed."""
    notes = {
        "dup_old": _put(store, "semantic", "Postgres goes through pg_bouncer", POOL, 40),
        "dup_new": _put(store, "semantic", "The api uses pg_bouncer for postgres", POOL_AGAIN, 10),
        "pool20": _put(
            store, "semantic", "Worker pool size is 20", "workers = 20, set in config/workers.toml\n", 50
        ),
        "pool40": _put(
            store,
            "semantic",
            "Worker pool size is now 40",
            "Raised to 40 after the March load test showed queueing.\n",
            5,
        ),
        "session": _put(store, "episodic", "why do the nightly exports time out", SESSION, 90),
        "fact": _put(store, "semantic", "Exports stream with a server side cursor", FACT, 89),
        "recent": _put(store, "episodic", "why do the nightly exports time out again", SESSION, 3),
        "decoy": _put(
            store, "semantic", "Deploys go out with blue green rollout", "Blue green, canary first.\n", 20
        ),
    }
    repo.commit_all(store, "test: notes to tidy")
    return notes


def _plan(run_cli: RunCli) -> dict:  # type: ignore[type-arg]
    proc = run_cli("tidy", "--json")
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def _head(store: Store) -> str:
    return subprocess.run(
        ["git", "-C", str(store.memory), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout


def test_proposals_with_evidence_then_apply_twice_and_restore(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    notes = _seed(store)
    head = _head(store)
    plan = _plan(run_cli)
    got = {(p["action"], p["keep"]["id"], p["other"]["id"]): p for p in plan["proposals"]}
    assert set(got) == {
        ("merge", notes["dup_new"].id, notes["dup_old"].id),
        ("supersede", notes["pool40"].id, notes["pool20"].id),
        ("archive", notes["fact"].id, notes["session"].id),
    }
    merge = got[("merge", notes["dup_new"].id, notes["dup_old"].id)]
    assert (
        "Monitoring comes from the pgbouncer admin console on port 6432."
        in merge["evidence"]["only_in_other"]
    )
    assert merge["evidence"]["dates"] == {"keep": notes["dup_new"].created, "other": notes["dup_old"].created}
    archive = got[("archive", notes["fact"].id, notes["session"].id)]
    assert any("server side cursor" in line for line in archive["evidence"]["lines_in_both"])
    printed = run_cli("tidy", "--print")
    assert printed.returncode == 0 and "3 proposals" in printed.stdout and "port 6432" in printed.stdout
    assert _head(store) == head  # --json and --print change nothing

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    # a repo left on a detached HEAD: refused like every writer (exit 12), never "3 skipped", exit 0
    subprocess.run(["git", "-C", str(store.memory), "checkout", "-q", "--detach"], check=True)
    for args in (("--apply", str(plan_file)), ("--yes",)):
        refused = run_cli("tidy", *args)
        assert refused.returncode == 12 and "detached HEAD" in refused.stderr, (refused.returncode, refused.stdout)
    subprocess.run(["git", "-C", str(store.memory), "checkout", "-q", "main"], check=True)
    assert _head(store) == head
    applied = run_cli("tidy", "--apply", str(plan_file))
    assert applied.returncode == 0, applied.stderr
    assert "3 applied" in applied.stdout
    log = subprocess.run(
        ["git", "-C", str(store.memory), "rev-list", "--count", f"{head.strip()}..HEAD"],
        capture_output=True,
        text=True,
    )
    assert log.stdout.strip() == "3"  # one commit per change

    merged = parse_note((store.memory / notes["dup_new"].path).read_text(), notes["dup_new"].path)
    assert "port 6432" in merged.body and "client_idle_timeout" in merged.body
    assert merged.supersedes == [notes["dup_old"].id]
    assert (store.memory / notes["dup_old"].path).read_text().count("port 6432") == 1  # the old note is kept
    assert parse_note((store.memory / notes["pool40"].path).read_text(), "x").supersedes == [
        notes["pool20"].id
    ]
    assert not (store.memory / notes["session"].path).exists()
    assert (store.memory / ".archive" / notes["session"].path).read_text().count("server side cursor") == 1
    found = json.loads(run_cli("search", "nightly exports time out", "--json").stdout)
    assert notes["session"].id not in {h["id"] for h in found} and notes["recent"].id in {
        h["id"] for h in found
    }
    pool = {h["id"]: h for h in json.loads(run_cli("search", "worker pool size", "--json").stdout)}
    assert pool[notes["pool20"].id]["superseded_by"] == [notes["pool40"].id]

    head = _head(store)
    again = run_cli("tidy", "--apply", str(plan_file))
    assert again.returncode == 0 and "3 already" in again.stdout and _head(store) == head
    assert _plan(run_cli)["proposals"] == []  # nothing left to propose

    assert run_cli("tidy", "--archived").stdout.strip() == f".archive/{notes['session'].path}"
    assert json.loads(run_cli("tidy", "--archived", "--json").stdout) == [f".archive/{notes['session'].path}"]
    fragment = notes["session"].path.rsplit("/", 1)[-1][:6]  # a piece of the file name names nothing
    assert "no archived note" in run_cli("tidy", "--restore", fragment).stderr
    restored = run_cli("tidy", "--restore", notes["session"].id)
    assert restored.returncode == 0, restored.stderr
    assert (store.memory / notes["session"].path).exists()
    found = json.loads(run_cli("search", "nightly exports time out", "--json").stdout)
    assert notes["session"].id in {h["id"] for h in found}
    # restoring is the person's answer: neither a new plan nor the old one archives it again
    assert notes["session"].id not in {p["other"]["id"] for p in _plan(run_cli)["proposals"]}
    head = _head(store)
    reapplied = run_cli("tidy", "--apply", str(plan_file), "--json")
    outcomes = {a["detail"].split(" ", 1)[0]: a["outcome"] for a in json.loads(reapplied.stdout)["applied"]}
    assert outcomes.get(notes["session"].path) == "skipped", outcomes
    assert _head(store) == head and (store.memory / notes["session"].path).exists()
    assert (
        subprocess.run(
            ["git", "-C", str(store.memory), "status", "--porcelain"], capture_output=True, text=True
        ).stdout
        == ""
    )


def test_bad_plans_and_flags_are_one_line_errors(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    _seed(store)
    head = _head(store)
    for args, words in (
        (("--apply", str(tmp_path / "missing.json")), "cannot read the plan"),
        (("--apply", "-"), "not JSON"),
        (("--json", "--print"), "give one of"),
        (("--restore", "nothing-like-this"), "no archived note"),
    ):
        proc = run_cli("tidy", *args, input="{not json")
        assert proc.returncode != 0 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, (
            args
        )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "proposals": [{"action": "delete", "kind": "duplicate"}]}))
    proc = run_cli("tidy", "--apply", str(bad))
    assert proc.returncode == 2 and "unknown action" in proc.stderr
    for proposal, words in (({}, "has no 'action' field"), ({"action": "merge", "kind": "duplicate", "keep": 3}, "wrong kind")):
        bad.write_text(json.dumps({"version": 1, "proposals": [proposal]}))
        proc = run_cli("tidy", "--apply", str(bad))
        assert proc.returncode == 2 and words in proc.stderr and "Error" not in proc.stderr, proc.stderr
    assert _head(store) == head


def test_a_hand_edited_plan_cannot_archive_a_fact_or_join_two_projects(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    notes = _seed(store)
    web = _note(store, "semantic", "Worker pool size is 30", "workers = 30\n", "github.com/acme/web", days_old=1)
    repo.commit_all(store, "test: a note of another project")
    head = _head(store)

    def ref(note: Note) -> dict[str, str]:
        return {"id": note.id, "path": note.path, "title": note.title, "created": note.created, "updated": note.updated}

    plan = {
        "version": 1,
        "proposals": [
            {"action": "archive", "kind": "stale-session", "keep": ref(notes["fact"]), "other": ref(notes["decoy"])},
            {"action": "supersede", "kind": "replaced", "keep": ref(web), "other": ref(notes["pool20"])},
        ],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    proc = run_cli("tidy", "--apply", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    outcomes = [a["outcome"] for a in json.loads(proc.stdout)["applied"]]
    assert outcomes == ["skipped", "skipped"], proc.stdout
    assert "archives only session notes" in proc.stdout and "same project and type" in proc.stdout
    assert _head(store) == head and (store.memory / notes["decoy"].path).exists()


def test_a_plan_with_a_proposal_that_names_anything_applies_the_rest_and_says_what_it_skipped(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    notes = _seed(store)

    def ref(note: Note, **changed: str) -> dict[str, str]:
        fields = {"id": note.id, "path": note.path, "title": note.title, "created": note.created, "updated": note.updated}
        return {**fields, **changed}

    good = {"action": "supersede", "kind": "replaced", "keep": ref(notes["pool40"]), "other": ref(notes["pool20"])}
    plan = {
        "version": 1,
        "proposals": [
            good,
            {"action": "archive", "kind": "stale-session", "keep": ref(notes["fact"]), "other": ref(notes["session"], id="zzzzzzzzzz", path="../../x")},
            {"action": "archive", "kind": "stale-session", "keep": ref(notes["fact"]), "other": ref(notes["session"], id="*", path="nowhere.md")},
            {**good, "keep": good["other"], "other": good["keep"]},  # swapped: the two would hide each other
        ],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    proc = run_cli("tidy", "--apply", str(path), "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    applied = json.loads(proc.stdout)["applied"]
    assert applied[0]["outcome"] == "applied", applied
    assert all(a["outcome"] in ("skipped", "stale") for a in applied[1:]), applied
    assert "loop" in applied[3]["detail"], applied[3]
    old = parse_note((store.memory / notes["pool20"].path).read_text(), notes["pool20"].path)
    assert notes["pool40"].id not in old.supersedes


def _tidy_in_a_terminal(store: Store, answers: list[bytes]) -> str:
    """`anamnesis tidy` run in a pseudo-terminal, given `answers` one per question; what it printed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "anamnesis", "tidy"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=cli_env(store.home, COLUMNS="200"),
        cwd=ROOT,
    )
    os.close(follower)
    seen = b""
    asked = len(answers)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        seen += chunk
        if answers and seen.count(b"apply?") > asked - len(answers):
            os.write(leader, answers.pop(0))
    proc.wait(timeout=60)
    os.close(leader)
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text
    return text


def test_in_a_terminal_it_asks_about_each_proposal(store: Store) -> None:
    notes = _seed(store)
    head = _head(store)
    text = _tidy_in_a_terminal(store, [b"y\n", b"n\n", b"q\n"])
    assert "merge" in text and "tidy: 1 applied" in text
    log = subprocess.run(
        ["git", "-C", str(store.memory), "log", "--format=%s", f"{head.strip()}..HEAD"],
        capture_output=True,
        text=True,
    )
    assert len(log.stdout.splitlines()) == 1  # only the accepted proposal: the first, the merge
    assert parse_note((store.memory / notes["dup_new"].path).read_text(), "x").supersedes == [
        notes["dup_old"].id
    ]


def test_a_proposal_answered_no_is_not_asked_again_until_one_of_its_notes_changes(
    store: Store, run_cli: RunCli
) -> None:
    _seed(store)
    before = _plan(run_cli)["proposals"]
    assert len(before) >= 2
    text = _tidy_in_a_terminal(store, [b"n\n", b"q\n"])  # no to the first, then quit
    assert "tidy: nothing to do" in text
    declined = before[0]
    after = _plan(run_cli)  # the rest are still asked: quitting is not saying no
    assert [p["key"] for p in after["proposals"]] == [p["key"] for p in before[1:]], after
    assert after["declined"] == 1
    listed = run_cli("tidy", "--print")
    assert "1 proposal you declined before not shown" in listed.stdout and "--all" in listed.stdout
    shown = json.loads(run_cli("tidy", "--json", "--all").stdout)["proposals"]
    assert [p["key"] for p in shown] == [p["key"] for p in before]
    # an edit by hand (its `updated` left alone) is a change: asked again
    edited = store.memory / declined["other"]["path"]
    edited.write_text(edited.read_text(encoding="utf-8") + "\nOne more line, by hand.\n", encoding="utf-8")
    again = _plan(run_cli)
    assert declined["key"] in [p["key"] for p in again["proposals"]] and again["declined"] == 0, again


def test_the_mcp_tool_proposes_and_changes_nothing(store: Store, tmp_path: Path, run_cli: RunCli) -> None:
    notes = _seed(store)
    head = _head(store)

    async def script(session: ClientSession, call: Call) -> None:
        got = _data(await call("tidy", {"notes": [notes["pool20"].path]}))
        assert [(p["action"], p["other"]["id"]) for p in got["proposals"]] == [
            ("supersede", notes["pool20"].id)
        ]
        assert got["accept"] == f"anamnesis tidy --apply {got['plan_file']}"
        assert (await call("tidy", {"project": "/abs"})).is_error
        applied = run_cli("tidy", "--apply", got["plan_file"])
        assert applied.returncode == 0 and "1 applied" in applied.stdout
        for _ in range(12):  # an agent asking again and again keeps only the latest plans
            await call("tidy", {})
        assert len(list((store.state_dir / "tidy").glob("proposed-*.json"))) == 10

    assert _head(store) == head
    _drive(store, tmp_path, script)


def _lines_of(machine: Machine) -> dict[str, set[str]]:
    """Every note's body lines by id, wherever the note is (memory/ or the archive)."""
    out: dict[str, set[str]] = {}
    for path in machine.memory.rglob("*.md"):
        if ".git" in path.parts:
            continue
        note = parse_note(path.read_text(), str(path))
        out.setdefault(note.id, set()).update(line for line in note.body.splitlines() if line.strip())
    return out


@pytest.mark.e2e
def test_two_machines_tidying_at_once_converge_and_lose_nothing(fleet: Fleet, tmp_path: Path) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    notes = _seed(a.store)
    assert a.sync().exit_code == 0 and b.sync().exit_code == 0
    before = _lines_of(a)
    # both tidy the same memory before either syncs; b also edits one of the notes by hand meanwhile
    for machine in (a, b):
        plan = tmp_path / f"{machine.name}.json"
        proc = machine.cli("tidy", "--json")
        plan.write_text(proc.stdout)
        applied = machine.cli("tidy", "--apply", str(plan))
        assert applied.returncode == 0 and "3 applied" in applied.stdout, applied.stdout + applied.stderr
    edited = b.read(notes["pool20"].path) + "\nChecked again on b.\n"
    b.write(notes["pool20"].path, edited)
    for machine in (a, b, a):
        result = machine.sync()
        assert result.exit_code == 0, result.to_dict()
    assert a.tree() == b.tree()
    assert a.git("status", "--porcelain") == "" and b.git("status", "--porcelain") == ""
    after = _lines_of(a)
    for note_id, lines in before.items():
        assert lines <= after[note_id], note_id  # nothing lost
    assert "Checked again on b." in after[notes["pool20"].id]
    assert not any("<<<<<<<" in line for lines in after.values() for line in lines)
    merged = a.read(notes["dup_new"].path)
    assert merged.count("## Merged from") == 1 and merged.count("port 6432") == 1
    assert json.loads(a.cli("tidy", "--json").stdout)["proposals"] == []


def test_with_semantic_search_on_a_paraphrase_is_a_duplicate(store: Store, run_cli: RunCli, model_dir: Path) -> None:
    from anamnesis.search.semantic import enable_semantic as enable
    from anamnesis.search.semantic import update_vectors

    one = _put(store, "semantic", "Postgres connections go through pg_bouncer", PARAPHRASES[0], 30)
    two = _put(store, "semantic", "Database access uses a connection pooler", PARAPHRASES[1], 3)
    _put(store, "semantic", "Deploys use blue green rollout", "Every release goes out blue green, canary first.\n", 9)
    _put(store, "semantic", "Login page colours", "The login page uses the brand palette; dark mode is open.\n", 9)
    repo.commit_all(store, "test: paraphrases")
    assert _plan(run_cli)["proposals"] == []  # few words in common: words alone see nothing
    enable(store, model_dir)
    update_vectors(store)
    plan = _plan(run_cli)
    assert plan["mode"] == "meaning"
    assert [(p["action"], p["keep"]["id"], p["other"]["id"]) for p in plan["proposals"]] == [
        ("merge", two.id, one.id)
    ]
    assert plan["proposals"][0]["evidence"]["meaning"] > 0.7
    words_only = json.loads(run_cli("tidy", "--json", "--words").stdout)
    assert words_only["mode"] == "words" and words_only["proposals"] == []


def _merges_by_model(run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, standin: Any) -> Any:
    """`tidy --apply PLAN --model` with the plan's merges only, the model being `standin` (the
    Messages API stand-in, started here and stopped after)."""
    standin.start()
    try:
        monkeypatch.setenv("ANAMNESIS_TEST_TIDY_KEY", "sk-ant-tidy-test-0000")
        enabled = run_cli(
            "summary", "enable", "--provider", "api", "--base-url", standin.url, "--key-env", "ANAMNESIS_TEST_TIDY_KEY"
        )
        assert enabled.returncode == 0, enabled.stderr
        plan = _plan(run_cli)
        plan["proposals"] = [p for p in plan["proposals"] if p["action"] == "merge"]
        assert plan["proposals"]
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(json.dumps(plan))
        return run_cli("tidy", "--apply", str(plan_file), "--model")
    finally:
        standin.stop()


def test_a_model_written_merge_is_redacted_both_ways_and_keeps_every_line(
    store: Store, run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--model`: the person's own model (the summary settings; here the Messages API stand-in) writes
    the merged text on top; the secret in a note never reaches it, the secret in its answer never
    reaches the note, and every line of both notes stays below."""
    from claude_standin import StandIn, request_text, text

    secret, answered = "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "AKIAIOSFODNN7EXAMPLE"
    notes = _seed(store)
    old = store.memory / notes["dup_old"].path
    old.write_text(old.read_text() + f"The admin token is {secret}.\n")
    repo.commit_all(store, "test: a secret in a note")
    refused = run_cli("tidy", "--json", "--model")
    assert refused.returncode == 2 and "--model: no model is set up" in refused.stderr, refused.stderr

    standin = StandIn(lambda body: text(f"pg_bouncer runs in transaction mode; key {answered}"))
    applied = _merges_by_model(run_cli, tmp_path, monkeypatch, standin)
    assert applied.returncode == 0, applied.stderr
    assert "model-written merge" in applied.stdout, applied.stdout
    assert len(standin.requests) == 1
    sent = request_text(standin.requests[0])
    assert secret not in sent and "port 6432" in sent and "client_idle_timeout" in sent
    merged = (store.memory / notes["dup_new"].path).read_text()
    assert merged.index("## Merged (model-written)") < merged.index("client_idle_timeout")
    assert "pg_bouncer runs in transaction mode" in merged and answered not in merged
    for line in (POOL + POOL_AGAIN).splitlines():
        assert line in merged, line
    log = subprocess.run(["git", "-C", str(store.memory), "log", "-p"], capture_output=True, text=True).stdout
    assert answered not in log


def test_notes_that_name_different_things_are_not_proposed_whatever_their_words(
    store: Store, run_cli: RunCli
) -> None:
    v1 = _put(store, "semantic", "API v1 request timeout is 30 seconds", "The v1 gateway cuts requests at 30 s.\n", 30)
    v2 = _put(store, "semantic", "API v2 request timeout is 60 seconds", "The v2 gateway cuts requests at 60 s.\n", 5)
    old = _put(store, "semantic", "Cache TTL is 60 seconds for users", "ttl = 60\n", 30)
    new = _put(store, "semantic", "Cache TTL is 300 seconds for users", "ttl = 300\n", 5)
    repo.commit_all(store, "test: notes")
    pairs = [{p["keep"]["id"], p["other"]["id"]} for p in _plan(run_cli)["proposals"]]
    assert {v1.id, v2.id} not in pairs  # v1 and v2: two APIs
    assert {old.id, new.id} in pairs  # 60 and 300: one TTL, changed


def test_of_two_notes_written_in_the_same_second_the_one_committed_later_is_the_newer(
    store: Store, run_cli: RunCli
) -> None:
    stamp = "2026-11-20T10:00:00Z"
    folder = store.memory / "projects" / "github.com-acme-api" / "facts"
    folder.mkdir(parents=True, exist_ok=True)
    for name, ttl in (("zz-cache-ttl-60-aaaaaaaaaa.md", 60), ("aa-cache-ttl-300-bbbbbbbbbb.md", 300)):
        (folder / name).write_text(
            f"---\nid: {name[-13:-3]}\ntitle: Cache TTL is {ttl} seconds for users\ntype: semantic\n"
            f"project: {API}\ncreated: '{stamp}'\nupdated: '{stamp}'\n---\nttl = {ttl}\n"
        )
        repo.commit_all(store, f"test: ttl {ttl}")
    (proposal,) = [p for p in _plan(run_cli)["proposals"] if "Cache TTL" in p["keep"]["title"]]
    assert proposal["keep"]["title"] == "Cache TTL is 300 seconds for users", proposal


def test_an_edit_made_while_a_merge_is_written_is_kept_and_the_merge_is_stale(
    store: Store, run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model takes its time; the person edits the note it merges into meanwhile: their edit
    stays, and tidy writes nothing over it (it says so, and a later tidy proposes again)."""
    from claude_standin import StandIn, text

    notes = _seed(store)
    keep = store.memory / notes["dup_new"].path
    edit = "IMPORTANT: the prod pooler is pgb-3\n"

    def answer(body: object) -> object:
        keep.write_text(keep.read_text() + edit)  # the person saves in their editor, mid-merge
        return text("pg_bouncer runs in transaction mode")

    applied = _merges_by_model(run_cli, tmp_path, monkeypatch, StandIn(answer))
    assert applied.returncode == 0, applied.stderr
    assert "changed while tidy worked on it" in applied.stdout, applied.stdout
    after = keep.read_text()
    assert edit in after and "## Merged (model-written)" not in after


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."),
        ("Deploys on Friday afternoon are forbidden.", "Deploys on Friday afternoon are allowed."),
    ],
)
def test_a_note_that_changed_a_value_replaces_the_older_instead_of_taking_its_old_value(
    store: Store, run_cli: RunCli, tmp_path: Path, old: str, new: str
) -> None:
    common = "Set in config/api.yaml under http.timeout, read at start.\nOwned by the platform team.\n"
    older = _put(store, "semantic", "API timeout", f"{old}\n{common}", 20)
    newer = _put(store, "semantic", "API timeout", f"{new}\n{common}", 2)
    repo.commit_all(store, "test: a value changed")
    plan = _plan(run_cli)
    (proposal,) = [p for p in plan["proposals"] if {p["keep"]["id"], p["other"]["id"]} == {older.id, newer.id}]
    assert (proposal["action"], proposal["keep"]["id"]) == ("supersede", newer.id), proposal
    assert proposal["evidence"]["changed"] == [[old, new]]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert run_cli("tidy", "--apply", str(path)).returncode == 0
    assert old not in (store.memory / newer.path).read_text()


def test_a_merged_line_from_a_code_block_stays_in_a_code_block() -> None:
    from anamnesis.app.tidy import _in_their_fences, _shared_and_differing

    keep = "Install:\n\n```bash\npip install x\n```\n"
    other = "Install:\n\n```bash\n# install deps first\npip install x\nmake deps\n```\n\nThen run it.\n"
    _shared, only = _shared_and_differing(keep, other)
    assert _in_their_fences(only, other) == ["```bash", "# install deps first", "make deps", "```", "Then run it."]
    _shared, only = _shared_and_differing("Install it.\n", other)  # the fence itself only in the other note
    assert _in_their_fences(only, other) == [
        "Install:", "```bash", "# install deps first", "pip install x", "make deps", "```", "Then run it.",
    ]


def test_a_session_archived_under_a_project_renamed_since_is_restored_into_the_new_projects_folder(
    store: Store, run_cli: RunCli
) -> None:
    # What a sync leaves when one machine archived the session while another renamed the project:
    # the file under the old folder in the archive, its `project` field the new key.
    archived = store.memory / ".archive" / "projects" / "github.com-acme-old" / "sessions" / "why-exports-time-out-k3v9x2m7qa.md"
    archived.parent.mkdir(parents=True)
    archived.write_text(
        "---\nid: k3v9x2m7qa\ntype: episodic\ntitle: why exports time out\nproject: github.com/acme/new\n"
        "created: '2026-01-01T00:00:00Z'\nupdated: '2026-01-01T00:00:00Z'\n---\nThe cursor fix worked.\n"
    )
    repo.commit_all(store, "test: archived before the rename")
    restored = run_cli("tidy", "--restore", "k3v9x2m7qa")
    assert restored.returncode == 0, restored.stderr
    assert (store.memory / "projects" / "github.com-acme-new" / "sessions" / archived.name).is_file()
    assert not (store.memory / "projects" / "github.com-acme-old").exists()
