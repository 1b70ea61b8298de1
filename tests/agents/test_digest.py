"""Decisions and open items of a session: extraction, capture into the note, and SessionStart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env
from transcripts import SECRETS, Transcript

from anamnesis.agents.capture import render_body
from anamnesis.agents.digest import MAX_DECISIONS, MAX_ITEM, MAX_OPEN, digest, failing_at_end, statements
from anamnesis.agents.inject import build_context, lead_with
from anamnesis.agents.transcript import summarize
from anamnesis.base.paths import Store
from anamnesis.store.operations import load_note

COMPACT_SUMMARY = """This session is being continued from a previous conversation that ran out of context. \
The conversation is summarized below:
Analysis:
The user asked for the export job to stop timing out.

Summary:
1. Primary Request and Intent:
   Make the nightly export finish within the 10 minute window.
3. Errors and fixes:
   - The root cause was an N+1 query in the invoice loader.
6. All user messages:
   - "please make the export fast"
7. Pending Tasks:
   - Backfill the exports that failed last week
   - Tell the billing team about the new schedule
8. Current Work:
   Rewriting the invoice loader to batch its queries.
9. Optional Next Step:
   Benchmark the loader against the staging database.
"""


def _kinds(text: str, kind: str) -> list[str]:
    return [line for k, line in statements(text) if k == kind]


def test_decision_cues_in_prose_and_bullets() -> None:
    text = (
        "I looked at the pool. We decided to keep asyncpg instead of switching drivers. Tests pass.\n\n"
        "- Going with a bounded queue for the workers\n"
        "- Renamed a variable\n"
        "The fix is to retry once on a stale connection."
    )
    assert _kinds(text, "decision") == [
        "We decided to keep asyncpg instead of switching drivers.",
        "Going with a bounded queue for the workers",
        "The fix is to retry once on a stale connection.",
    ]
    assert _kinds(text, "open") == []


def test_open_items_from_boxes_todos_and_next_step_lists() -> None:
    text = (
        "Done for now.\n\n"
        "**Next steps:**\n"
        "1. Wire the metrics exporter\n"
        "2. Document the `pool_size` setting\n\n"
        "The remaining tests pass and lint is clean.\n"
        "- [ ] Bump the version\n"
        "- [x] Fix the lint warnings\n"
        "TODO: drop the debug flag before release\n"
        "The migration has not yet been run on staging.\n"
        "```python\n# TODO: this one is code, not a task\n```\n"
    )
    assert _kinds(text, "open") == [
        "Wire the metrics exporter",
        "Document the `pool_size` setting",
        "Bump the version",
        "TODO: drop the debug flag before release",
        "The migration has not yet been run on staging.",
    ]


def test_compaction_summary_sections() -> None:
    assert _kinds(COMPACT_SUMMARY, "decision") == ["The root cause was an N+1 query in the invoice loader."]
    assert _kinds(COMPACT_SUMMARY, "open") == [
        "Backfill the exports that failed last week",
        "Tell the billing team about the new schedule",
        "Benchmark the loader against the staging database.",
    ]


def test_deduplicated_bounded_one_line_latest_first() -> None:
    texts = [f"We decided to use option {n} for part {n}." for n in range(20)]
    texts += ["We DECIDED to use option 19 for part 19!", "Next step: " + "deploy the thing " * 40]
    texts += ["- [ ] Write the docs", "- [ ] write the docs."]
    found = digest(texts)
    assert len(found.decisions) == MAX_DECISIONS
    assert found.decisions[-1] == "We DECIDED to use option 19 for part 19!"  # one of the two, the later
    assert found.decisions[-2] == "We decided to use option 18 for part 18."
    assert found.decisions[0] == "We decided to use option 12 for part 12."  # the latest ones are kept
    assert len(found.open_items) == 2 and found.open_items[-1] == "write the docs."
    assert all(len(line) <= MAX_ITEM and "\n" not in line for line in found.decisions + found.open_items)
    many = digest([f"- [ ] task number {n}" for n in range(30)])
    assert len(many.open_items) == MAX_OPEN


def test_plan_and_failing_commands_lead_the_open_items() -> None:
    todos = [("Write tests", "completed"), ("Ship the release", "in_progress"), ("Announce it", "pending")]
    results = [("pytest -q", True), ("grep -rn foo src", True), ("ls", False)]
    found = digest(["Next step: update the changelog."], todos, results)
    assert found.open_items == [
        "`pytest -q` still fails at the end of the session",
        "Ship the release (in progress)",
        "Announce it",
        "Next step: update the changelog.",
    ]


def test_failing_at_end_needs_the_latest_run_to_fail() -> None:
    assert failing_at_end([("pytest -q", True), ("ruff check .", False), ("pytest -q", False)]) == []
    assert failing_at_end([("cd app && pytest", True), ("git status", False)]) == ["cd app && pytest"]
    assert failing_at_end([("rg TODO", True), ("test -f x", True)]) == []
    older = [("make build", True)] + [(f"echo {n}", False) for n in range(12)]
    assert failing_at_end(older) == []  # long before the end: not what the session ended on


def test_lead_with_moves_the_sections_first() -> None:
    body = "## Ask\n\nDo it\n\n## Outcome\n\nDone.\n\n## Decisions\n\n- a\n\n## Open items\n\n- b\n\n## Session\n\n- x"
    moved = lead_with(body, ("## Decisions", "## Open items"))
    assert moved.index("## Decisions") < moved.index("## Open items") < moved.index("## Ask")
    assert sorted(moved.split("\n")) == sorted(body.split("\n"))  # nothing lost, nothing added
    assert lead_with("## Ask\n\nx", ("## Decisions",)) == "## Ask\n\nx"


def _failed_bash(t: Transcript, command: str, output: str) -> None:
    t.bash(command, f"Exit code 1\n{output}")
    t.lines[-1]["message"]["content"][0]["is_error"] = True


def _session(cwd: str, session_id: str = "digest-sess") -> Transcript:
    """A realistic session: a plan, a decision mid-way, /compact with its summary, a failing test at the end."""
    t = Transcript(session_id, cwd=cwd, branch="perf/export")
    t.prompt("The nightly export times out, make it finish within 10 minutes")
    t.tool(
        "TodoWrite",
        {
            "todos": [
                {"content": "Profile the export job", "status": "completed", "activeForm": "Profiling"},
                {"content": "Batch the invoice queries", "status": "in_progress", "activeForm": "Batching"},
                {"content": "Add a regression test for the export time", "status": "pending", "activeForm": "x"},
            ]
        },
        "Todos have been modified successfully.",
    )
    t.bash("python -m cProfile export.py", "ncalls tottime ...")
    t.say(
        "The profile shows 40,000 single-row queries. We'll use one batched query per 500 invoices "
        f"instead of a query per invoice. {SECRETS[0][1]} is not needed for this."
    )
    t.edit_file(f"{cwd}/export/loader.py", "for i in ids:", "for chunk in batches(ids, 500):")
    t.prompt("<command-name>/compact</command-name>\n<command-message>compact</command-message>")
    t.compact(COMPACT_SUMMARY)
    t.say("Continuing with the loader rewrite.")
    for n in range(30):  # a long session: many prompts and files, so the note body is far over the budget
        t.prompt(f"Now look at module {n}: " + "check how it reads invoices and whether it batches. " * 3)
        t.edit_file(f"{cwd}/export/module_{n}.py", "a", "b")
    _failed_bash(t, "pytest -q tests/test_export.py", "FAILED tests/test_export.py::test_totals - assert 3 == 4")
    t.say(
        "I batched the loader, but `test_totals` fails: the totals are off by one invoice.\n\n"
        + "The loader now reads invoices in chunks of 500 and keeps the order of the ids. " * 25
    )
    return t


def _hook(home: Path, event: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "anamnesis.hooks", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=cli_env(home),
        timeout=60,
    )


def test_summarize_keeps_compaction_summary_plan_and_command_results(tmp_path: Path) -> None:
    s = summarize(_session("/home/dev/exporter").write(tmp_path / "t.jsonl"))
    assert any("Pending Tasks" in text for text in s.texts)
    assert s.prompts[0].startswith("The nightly export")  # the summary is still not a prompt
    assert ("Batch the invoice queries", "in_progress") in s.todos
    assert s.results[-1] == ("pytest -q tests/test_export.py", True)
    assert ("python -m cProfile export.py", False) in s.results


def test_note_and_session_start_carry_decisions_and_open_items(store: Store, tmp_path: Path) -> None:
    project_dir = tmp_path / "exporter"
    project_dir.mkdir()
    transcript = _session(str(project_dir)).write(tmp_path / "t.jsonl")
    end = _hook(
        store.home,
        "session-end",
        {
            "session_id": "digest-sess",
            "transcript_path": str(transcript),
            "cwd": str(project_dir),
            "reason": "prompt_input_exit",
        },
    )
    assert (end.returncode, end.stdout) == (0, "")
    [path] = [p for p in store.memory.rglob("*.md") if "sessions" in p.parts]
    body = load_note(store, str(path.relative_to(store.memory))).body
    decisions = body.split("## Decisions\n", 1)[1].split("\n## ", 1)[0]
    open_items = body.split("## Open items\n", 1)[1].split("\n## ", 1)[0]
    assert "We'll use one batched query per 500 invoices instead of a query per invoice." in decisions
    assert "The root cause was an N+1 query in the invoice loader." in decisions
    assert SECRETS[0][2] not in body  # redacted like every other section
    for item in (
        "`pytest -q tests/test_export.py` still fails at the end of the session",
        "Batch the invoice queries (in progress)",
        "Add a regression test for the export time",
        "Backfill the exports that failed last week",
        "Benchmark the loader against the staging database.",
    ):
        assert item in open_items
    assert "Profile the export job" not in open_items  # done in the plan

    # The project is resumed: SessionStart shows the latest session's decisions and open items,
    # even though its whole body is far bigger than the budget.
    assert len(body) > 7000
    start = _hook(
        store.home,
        "session-start",
        {"session_id": "next", "cwd": str(project_dir), "source": "resume", "transcript_path": "/x"},
    )
    assert start.returncode == 0
    context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "## Recent sessions in this project" in context
    assert "The root cause was an N+1 query" in context
    assert "`pytest -q tests/test_export.py` still fails" in context
    assert "Batch the invoice queries (in progress)" in context
    text, _shown = build_context(store, project_dir, budget=1500)
    assert "## Decisions" in text and "## Open items" in text
    assert text.index("## Decisions") < text.index("## Ask")


def test_render_body_leaves_the_sections_out_when_nothing_was_found(tmp_path: Path) -> None:
    t = Transcript("plain").prompt("What does the loader do?").say("It reads invoices in batches.")
    body = render_body(summarize(t.write(tmp_path / "t.jsonl")), "p")
    assert "## Decisions" not in body and "## Open items" not in body


# ---------------------------------------------------------------------------
# Notes that stay true to the end, through the SessionEnd hook as Claude Code runs it

DEPLOY_COMPACT = """This session is being continued from a previous conversation that ran out of context. \
The conversation is summarized below:
Summary:
1. Primary Request and Intent:
   Get the staging deploy green again; it fails on migration 0042.
3. Errors and fixes:
   - The dry-run failed with: relation "orders_created_idx" already exists.
6. All user messages:
   - "The staging deploy fails on migration 0042, fix it"
   - "also make the notify step retry twice"
7. Pending Tasks:
   - Make migration 0042 idempotent
   - Re-run the staging dry-run
"""


def _deploy_session(cwd: str) -> Transcript:
    """A failing deploy fixed after a compaction; one request is never carried out."""
    t = Transcript("deploy-sess", cwd=cwd, branch="fix/migration-0042")
    t.prompt("The staging deploy fails on migration 0042, fix it")
    t.failed_bash("./deploy.sh staging --dry-run", 'ERROR: relation "orders_created_idx" already exists')
    t.say(
        "The root cause is that migration 0042 creates an index the hotfix already made. "
        "Decided to use CREATE INDEX IF NOT EXISTS in migration 0042.\n\n"
        "Next steps:\n- Make migration 0042 idempotent\n- Re-run the staging dry-run"
    )
    t.prompt("also make the notify step retry twice")
    t.say("Noted. First the migration.")
    t.prompt("<command-name>/compact</command-name>\n<command-message>compact</command-message>")
    t.compact(DEPLOY_COMPACT)
    t.edit_file(
        f"{cwd}/migrations/0042_orders_created_idx.py",
        "CREATE INDEX orders_created_idx",
        "CREATE INDEX IF NOT EXISTS orders_created_idx",
    )
    t.bash("./deploy.sh staging --dry-run", "Exit code 0\ndry-run ok: 12 migrations, 0 errors")
    t.say(
        "I went with `CREATE INDEX IF NOT EXISTS` so the migration can run twice. "
        "Migration 0042 is idempotent now and the staging dry-run passed."
    )
    return t


def _captured_body(store: Store, tmp_path: Path, t: Transcript) -> str:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    transcript = t.write(tmp_path / f"{t.session_id}.jsonl")
    payload = {"session_id": t.session_id, "transcript_path": str(transcript), "cwd": str(project)}
    end = _hook(store.home, "session-end", {**payload, "reason": "prompt_input_exit"})
    assert (end.returncode, end.stdout) == (0, "")
    [path] = [p for p in store.memory.rglob("*.md") if t.session_id[:4] in p.read_text(encoding="utf-8")]
    return load_note(store, str(path.relative_to(store.memory))).body


def _section(body: str, heading: str) -> str:
    return body.split(f"{heading}\n", 1)[1].split("\n## ", 1)[0] if heading in body else ""


def test_open_items_done_later_are_not_listed_and_undone_requests_are(store: Store, tmp_path: Path) -> None:
    body = _captured_body(store, tmp_path, _deploy_session(str(tmp_path / "project")))
    open_items = _section(body, "## Open items")
    assert "Make migration 0042 idempotent" not in open_items  # done after the compaction
    assert "Re-run the staging dry-run" not in open_items  # it ran, and passed
    assert "still fails" not in open_items  # the dry-run failed first, then passed
    assert "Asked, not done: also make the notify step retry twice" in open_items
    decisions = _section(body, "## Decisions")
    assert decisions.count("IF NOT EXISTS") == 1, decisions  # said twice in other words: kept once
    assert "I went with `CREATE INDEX IF NOT EXISTS`" in decisions  # the later wording
    assert "The root cause is that migration 0042" in decisions


def test_an_open_item_is_kept_while_nothing_did_it(store: Store, tmp_path: Path) -> None:
    t = _deploy_session(str(tmp_path / "project"))
    t.lines = t.lines[: next(i for i, line in enumerate(t.lines) if line.get("isCompactSummary")) + 1]
    body = _captured_body(store, tmp_path, t)
    open_items = _section(body, "## Open items")
    assert "Make migration 0042 idempotent" in open_items and "Re-run the staging dry-run" in open_items
    assert "`./deploy.sh staging --dry-run` still fails at the end of the session" in open_items


def _refused_edit(cwd: str, session_id: str, *, redone: bool) -> Transcript:
    """The only change asked for is an Edit the client refuses; `redone`: read, then edited again."""
    t = Transcript(session_id, cwd=cwd)
    t.prompt("Set the notify timeout to 30 seconds in config/notify.yml")
    edit = {"file_path": f"{cwd}/config/notify.yml", "old_string": "timeout: 10", "new_string": "timeout: 30"}
    t.failed_tool("Edit", edit, "File has not been read yet. Read it first before writing to it.")
    if redone:
        t.tool("Read", {"file_path": edit["file_path"]}, "timeout: 10\n")
        t.tool("Edit", edit, "The file has been updated.")
    return t.say("Done: the notify timeout is now 30 seconds.")


def test_a_failed_edit_is_never_reported_as_done(store: Store, tmp_path: Path) -> None:
    cwd = str(tmp_path / "project")
    body = _captured_body(store, tmp_path, _refused_edit(cwd, "edit-sess", redone=False))
    outcome = _section(body, "## Outcome")
    assert outcome.strip().startswith(
        "**Not done:** Edit of `config/notify.yml` failed: File has not been read yet."  # named from the project
    ), outcome
    assert "The last reply said: Done: the notify timeout is now 30 seconds." in outcome
    assert "## Files touched" not in body
    open_items = _section(body, "## Open items")
    assert "Edit of" in open_items and "failed: File has not been read yet" in open_items
    assert "Asked, not done: Set the notify timeout to 30 seconds in config/notify.yml" in open_items


def test_a_failed_edit_done_over_is_not_listed(store: Store, tmp_path: Path) -> None:
    body = _captured_body(store, tmp_path, _refused_edit(str(tmp_path / "project"), "redo-sess", redone=True))
    assert "failed" not in body and "Not done" not in body
    assert "config/notify.yml` (edit)" in body


def test_an_mcp_call_says_what_it_asked_and_what_came_back(store: Store, tmp_path: Path) -> None:
    t = Transcript("mcp-sess", cwd=str(tmp_path / "project"))
    t.prompt("What did we decide about the webhook retry policy?")
    t.mcp(
        "anamnesis",
        "search",
        {"query": "webhook retry policy", "limit": 5},
        "1. Webhook retry policy (semantic, 2026-02-11): retry 3 times with exponential backoff, then park",
    )
    t.mcp("tracker", "get_issue", {"id": "OPS-412"}, "")
    t.lines[-1]["message"]["content"][0]["is_error"] = True
    t.lines[-1]["message"]["content"][0]["content"] = [{"type": "text", "text": "Error: issue OPS-412 not found"}]
    t.say("We retry 3 times with exponential backoff, then park the event.")
    body = _captured_body(store, tmp_path, t)
    calls = _section(body, "## MCP calls")
    assert (
        "- anamnesis.search `webhook retry policy` → 1. Webhook retry policy (semantic, 2026-02-11): "
        "retry 3 times with exponential backoff, then park" in calls
    )
    assert "- tracker.get_issue `OPS-412` → Error: issue OPS-412 not found" in calls
    assert "tracker.get_issue of `OPS-412` failed: Error: issue OPS-412 not found" in _section(body, "## Open items")


def test_an_mcp_call_that_asks_for_a_secret_never_shows_the_bare_answer(store: Store, tmp_path: Path) -> None:
    # The value alone has no shape a redaction rule knows; that it answers a call for a password does.
    t = Transcript("mcp-secret", cwd=str(tmp_path / "project"))
    t.prompt("Why does the mailer fail to log in?")
    t.mcp("vault", "read_field", {"path": "secret/ledger/smtp", "field": "password"}, "Gv3nQ8zLm2Kp")
    t.mcp("onepassword", "get_item", {"vault": "ops", "item": "grafana admin"}, "hunter2-lavender")
    t.mcp("tracker", "get_issue", {"id": "OPS-7"}, "Resolved")
    t.say("The SMTP password in Vault is current; the mailer reads an old copy.")
    body = _captured_body(store, tmp_path, t)
    calls = _section(body, "## MCP calls")
    assert "Gv3nQ8zLm2Kp" not in body and "- vault.read_field `secret/ledger/smtp` → [REDACTED]" in calls, calls
    assert "- tracker.get_issue `OPS-7` → Resolved" in calls  # an answer to anything else stays
    assert "hunter2-lavender" not in body  # a password manager's item is what it asks for


def test_a_request_is_done_by_a_change_not_by_a_lookup_or_a_claim(tmp_path: Path) -> None:
    def body(*steps: str) -> str:
        t = Transcript(f"req-{len(steps)}", cwd="/w")
        t.prompt("Deploy failed again.").prompt("Also make the notify step retry twice")
        if "lookup" in steps:
            t.mcp("docs", "search_docs", {"query": "notify step retry"}, "retry: N retries a step N times")
        if "claim" in steps:
            t.say("Done: the notify step now retries twice.")
        if "edit" in steps:
            t.edit_file("/w/.ci/notify.yml", "retry: 0", "retry: 2  # the notify step retries twice")
        return _section(render_body(summarize(t.write(tmp_path / f"{len(steps)}.jsonl")), "p"), "## Open items")

    assert "Asked, not done: Also make the notify step retry twice" in body("lookup", "claim")
    assert "Asked, not done" not in body("lookup", "claim", "edit")


def test_the_first_prompt_is_done_by_any_change_after_it(tmp_path: Path) -> None:
    t = Transcript("first-ask", cwd="/w").prompt("Clean up the flaky CI runs")
    t.edit_file("/w/.github/workflows/build.yml", "retries: 0", "retries: 3")
    t.prompt("Also make the nightly export email the finance team").say("I'll do that next.")
    body = render_body(summarize(t.write(tmp_path / "t.jsonl")), "p")
    open_items = _section(body, "## Open items")
    assert "flaky CI" not in open_items  # the session worked on it: an edit after it went through
    assert "Asked, not done: Also make the nightly export email the finance team" in open_items


def test_a_decision_the_session_turned_away_from_is_not_kept_nor_its_plans_open_items() -> None:
    texts = [
        "Decided to use Redis for the rate-limit cache.\n\n- [ ] Add a Redis service to docker-compose.yml\n"
        "- [ ] Set REDIS_URL in the staging config\n- [ ] Document the limits in the README",
        "Going with functools.lru_cache in the process instead of Redis; nothing to deploy.",
    ]
    prompts = ["add a cache for the rate limiter", "Actually no, let's not use Redis: an in-process LRU cache is enough"]
    done = [(5, "Edit app/rate_limiter.py: add a functools.lru_cache cache to the rate limiter")]
    found = digest(texts, text_seqs=[1, 4], prompts=prompts, prompt_seqs=[0, 3], actions=done)
    assert found.decisions == ["Going with functools.lru_cache in the process instead of Redis; nothing to deploy."]
    assert found.open_items == ["Document the limits in the README"]  # the plan's Redis steps went with it


def test_a_decision_abandoned_without_naming_it_gives_way_to_the_next() -> None:
    texts = [
        "Decided to store naive local datetimes in the orders table.\n\n"
        "- [ ] Convert the naive datetimes in the invoices table too",
        "That breaks on the autumn clock change, so abandoning it. Decided to store all dates as UTC-aware values.",
    ]
    found = digest(texts)
    assert found.decisions == ["Decided to store all dates as UTC-aware values."]
    assert found.open_items == []


def test_two_decisions_on_different_things_both_stand() -> None:
    texts = [
        "Decided to use asyncpg for the pool.",
        "Going with a bounded queue for the workers instead of an unbounded list.",
    ]
    assert digest(texts).decisions == texts


def test_a_failing_command_that_a_later_run_covered_and_passed_is_not_open() -> None:
    """A narrower or differently written run that failed is settled by a later passing run of the
    same program over it (a test file after one test, `cd web && … | tail` after the bare command);
    a narrower, other or different passing run settles nothing."""
    assert failing_at_end([("pytest -q tests/test_refunds.py::test_partial", True), ("pytest -q tests/test_refunds.py", False)]) == []
    assert failing_at_end([("npm run build", True), ("cd web && npm run build 2>&1 | tail -3", False)]) == []
    assert failing_at_end([("pytest -q tests/a.py", True), ("pytest -q", False)]) == []
    assert failing_at_end([("pytest -q tests/", True), ("pytest -q tests/a.py", False)]) == ["pytest -q tests/"]
    assert failing_at_end([("pytest -q tests/a.py", True), ("pytest -q tests/b.py", False)]) == ["pytest -q tests/a.py"]
    assert failing_at_end([("make test", True), ("make", False)]) == ["make test"]
    assert failing_at_end([("npm run build", True), ("npm run lint", False)]) == ["npm run build"]
    assert failing_at_end([("pytest -q", False), ("pytest -q tests/a.py", True)]) == ["pytest -q tests/a.py"]


def test_an_open_item_is_done_by_what_it_names_not_by_its_cue_or_verb() -> None:
    """ "Remaining: …" and "Replace X in Y" are done by tool calls on X and Y: the cue that says the
    item is open and the verb that asks for it are not looked for in what was done."""
    texts = [
        "Flag added. Remaining: document --dry-run in the CHANGELOG and add a test for it.",
        "Next steps:\n- Replace utcnow in app/time.py\n- Replace utcnow in app/jobs.py",
        "All three uses now call the new helper.",
    ]
    done = [
        (2, "/w/tests/test_cleanup.py def test_dry_run_deletes_nothing(): ..."),
        (3, "/w/CHANGELOG.md ## Unreleased\n- cleanup: new --dry-run flag"),
        (5, "/w/app/time.py datetime.now(timezone.utc) utcnow"),
        (6, "/w/app/jobs.py datetime.now(timezone.utc) utcnow"),
    ]
    found = digest(texts, text_seqs=[1, 4, 7], actions=done)
    assert found.open_items == []


def test_a_box_ticked_later_is_not_open() -> None:
    texts = ["Plan:\n- [ ] Add limit/cursor params\n- [ ] Return next_cursor", "- [x] Add limit/cursor params\n- [x] Return next_cursor\n\nAll done."]
    assert digest(texts).open_items == []
    assert digest(texts[:1]).open_items == ["Add limit/cursor params", "Return next_cursor"]


def test_what_the_user_called_off_is_neither_left_undone_nor_open(tmp_path: Path) -> None:
    """A request called off by name ("nvm the slack retry"), and what was planned and left open in
    the turn a prompt calls off without naming it ("never mind, let's not do that. undo it"), are not
    how things stand at the end; what the prompt says next ("— just bump the timeout") is not called off."""
    t = Transcript("called-off", cwd="/w").prompt("the notify step in deploy.yml sometimes times out")
    t.bash("grep -n notify .github/workflows/deploy.yml", "42:  - name: notify")
    t.prompt("also add a retry to the slack notification step").say("Looking at how Slack is called first.")
    t.prompt("nvm the slack retry, forget about it — just bump the notify timeout to 5 min")
    t.edit_file("/w/.github/workflows/deploy.yml", "timeout-minutes: 1", "timeout-minutes: 5")
    t.prompt("migrate the settings page to hooks")
    t.tool("TodoWrite", {"todos": [
        {"content": "Convert SettingsPage", "status": "completed", "activeForm": "Converting"},
        {"content": "Convert ProfileForm to hooks", "status": "in_progress", "activeForm": "Converting"},
        {"content": "Update snapshot tests", "status": "pending", "activeForm": "Updating"},
    ]}, "Todos have been modified successfully.")
    t.edit_file("/w/web/SettingsPage.jsx", "class SettingsPage", "function SettingsPage")
    t.say("SettingsPage converted. TODO: run the visual regression suite on staging.")
    t.prompt("never mind, let's not do that now. undo it")
    t.bash("git checkout -- web/SettingsPage.jsx").say("Undone.")
    body = render_body(summarize(t.write(tmp_path / "t.jsonl")), "p")
    assert "## Open items" not in body, body
    assert "- `web/SettingsPage.jsx` (edit, reverted)" in body


def test_a_correction_drops_the_decision_it_corrects() -> None:
    texts = [
        "Decided to use the pg_trgm index for the name search.",
        "The root cause is that the tests connect to port 5432. Decided to set DB_PORT=5432 in .env.test.",
        "You're right, the host port is 5433.",
    ]
    prompts = ["the integration tests can't reach the db", "that's wrong, the port is 5433 not 5432"]
    found = digest(texts, text_seqs=[1, 2, 4], prompts=prompts, prompt_seqs=[0, 3])
    assert found.decisions == ["Decided to use the pg_trgm index for the name search."]


def test_turning_back_drops_the_decision_turned_from() -> None:
    """ "Back to Redis", "use Redis after all", "use LaunchDarkly instead" name what the session turns
    to: the decision it turns from is the latest one before, and a prompt saying so drops what was
    left open in the turn before it."""
    texts = [
        "Going with Redis for the session store.",
        "Switched to the existing Postgres table instead of Redis.",
        "Back to Redis for the session store; decided to keep the Postgres table as a fallback for a week.",
    ]
    found = digest(texts, text_seqs=[1, 3, 5], prompts=["sessions: redis", "no, postgres", "ok use redis after all"], prompt_seqs=[0, 2, 4])
    assert found.decisions == [texts[2]]
    texts = ["Wrote app/flags.py. TODO: wire flags into the settings loader."]
    prompts = ["scaffold a feature flag module", "we'll use LaunchDarkly instead, delete our module"]
    assert digest(texts, text_seqs=[1], prompts=prompts, prompt_seqs=[0, 2]).open_items == []
    assert digest(texts, text_seqs=[1], prompts=prompts[:1], prompt_seqs=[0]).open_items == [
        "TODO: wire flags into the settings loader."
    ]


@pytest.mark.parametrize(
    "called_off",
    ["no wait, don't switch to Postmark — keep Gmail SMTP", "scratch the Postmark idea, keep gmail", "no, stay on Gmail SMTP"],
)
def test_a_plan_the_user_calls_off_in_other_words_is_dropped(called_off: str) -> None:
    texts = ["I'll switch the mailer to the Postmark API instead of Gmail SMTP."]
    found = digest(texts, text_seqs=[1], prompts=["the mailer keeps timing out", called_off], prompt_seqs=[0, 2])
    assert found.decisions == [], (called_off, found.decisions)


def test_an_approach_given_up_after_it_failed_is_not_kept_as_the_fix() -> None:
    texts = [
        "The fix is to strip trailing commas with `line.rstrip(',')` before splitting.",
        "That didn't work: the quoted fields still break. Let me try a different approach.",
        "The fix is to parse each line with csv.reader, which handles the quoted commas.",
    ]
    assert digest(texts).decisions == [texts[2]]
    given_up = ["The fix is to strip trailing commas with `line.rstrip(',')`.", "Let me try a different approach."]
    assert digest(given_up).decisions == []


def test_a_command_that_passes_later_with_a_variable_set_is_not_still_failing() -> None:
    runs = [
        ("python scripts/send_test_mail.py", True),
        ('SMTP_PASSWORD="$(op read op://ops/smtp/password)" python scripts/send_test_mail.py', False),
    ]
    assert failing_at_end(runs) == []


def test_an_open_item_said_again_in_other_words_is_listed_once() -> None:
    """A plan's box and the reply's "Still to do: …" that say the same: once, in the words that say
    more; items that differ in a number are other items."""
    assert digest(["- [ ] Load-test with 150 req/min", "Still to do: load-test with 150 req/min."]).open_items == [
        "Still to do: load-test with 150 req/min."
    ]
    assert digest(["- [ ] Update Vault entry secret/reports with new value", "Remaining: update the Vault entry."]).open_items == [
        "Update Vault entry secret/reports with new value"
    ]
    assert digest(["- [ ] Load-test with 150 req/min", "- [ ] Load-test with 300 req/min"]).open_items == [
        "Load-test with 150 req/min",
        "Load-test with 300 req/min",
    ]


def test_an_open_item_named_as_one_in_the_last_reply_is_kept() -> None:
    assert digest(["Migrated.\n\nOpen item: rotate the staging key after the deploy."]).open_items == [
        "Open item: rotate the staging key after the deploy."
    ]
    assert digest(["The open items are tracked in Jira."]).open_items == []  # talk about them is none


def test_an_open_item_said_with_and_without_its_cue_is_listed_once() -> None:
    texts = ["TODO: wire flags into the settings loader.", "Pending Tasks:\n- Wire flags into the settings loader"]
    assert digest(texts).open_items == ["Wire flags into the settings loader"]


REDIS_PLAN = (
    "Decided to use Redis for the rate-limit cache.\n\n- [ ] Add a Redis service to docker-compose.yml\n"
    "- [ ] Document the cache in the README"
)


@pytest.mark.parametrize(
    "later",
    [
        "Drop Redis, we'll use Postgres for the cache table.",
        "Replaced Redis with an UNLOGGED Postgres table for the cache.",
        "We're moving off Redis to a Postgres table.",
        "Let's get rid of Redis and keep the cache in Postgres.",
        "Stop using Redis; the cache can live in Postgres.",
        "Swapped Redis out for a Postgres table.",
        "Switching the cache from Redis to Postgres.",
    ],
)
def test_a_choice_replaced_in_other_words_drops_the_earlier_one_and_its_plan(later: str) -> None:
    """Said by the person or by the assistant, a sentence that names what it replaces drops the
    decision that chose it and the plan's steps about it; what it replaces it with stays."""
    for texts, prompts, seqs in (
        ([REDIS_PLAN], ["add a cache for the rate limiter", later], [0, 2]),
        ([REDIS_PLAN, later], ["add a cache for the rate limiter"], [0]),
    ):
        found = digest(texts, text_seqs=[1, 3][: len(texts)], prompts=prompts, prompt_seqs=seqs)
        assert not any("Redis for the rate-limit" in d for d in found.decisions), (later, found)
        assert [i for i in found.open_items if not i.startswith("Asked")] == ["Document the cache in the README"], (later, found)


@pytest.mark.parametrize(
    "later",
    [
        "Replaced the print calls with structlog in app/jobs.py.",
        "I'll add Redis to compose and replace the in-process dict with it.",
        "Moved the helper from utils.py to app/time.py.",
        "Dropped the unused import.",
    ],
)
def test_replacing_something_else_leaves_a_decision_standing(later: str) -> None:
    found = digest([REDIS_PLAN, later], text_seqs=[1, 3])
    assert found.decisions[0] == "Decided to use Redis for the rate-limit cache.", (later, found)
    assert "Add a Redis service to docker-compose.yml" in found.open_items, (later, found)


def test_a_correction_in_other_words_drops_the_value_it_corrects() -> None:
    texts = ["Decided to set DB_PORT=5432 in .env.test.", "Going with pgbouncer in front of the pool."]
    found = digest(texts, text_seqs=[1, 2], prompts=["tests can't reach the db", "it's port 6432, not 5432"], prompt_seqs=[0, 3])
    assert found.decisions == ["Going with pgbouncer in front of the pool."]
    # a "not" before a word is no correction of a value
    found = digest(texts, text_seqs=[1, 2], prompts=["tests can't reach the db", "it's slow, not broken"], prompt_seqs=[0, 3])
    assert found.decisions == texts


@pytest.mark.parametrize(
    ("asked", "tool", "args"),
    [
        ("add a health check endpoint to the api", "write_file", ("/w/app/routes/health.py", "def healthz():\n    return {'ok': True}\n")),
        ("bump the request timeout to 30 seconds", "edit_file", ("/w/app/config.py", "TIMEOUT = 10", "TIMEOUT = 30")),
        ("add pagination to the orders endpoint", "edit_file", ("/w/app/api/orders.py", "def list_orders():", "def list_orders(page: int = 1):")),
        ("document the new env vars in the readme", "edit_file", ("/w/README.md", "## Config", "## Config\n\nSTRIPE_KEY, SENTRY_DSN")),
        ("upgrade the stripe sdk", "bash", ("pip install -U stripe",)),
    ],
)
def test_a_request_carried_out_in_its_own_turn_is_done(asked: str, tool: str, args: tuple[str, ...], tmp_path: Path) -> None:
    """In the turn a prompt starts, a change that acts on one word of its request does it; a change
    that shares none with it, or a run that changes nothing, does not."""
    def open_items(act: bool, unrelated: bool = False) -> str:
        t = Transcript("turn", cwd="/w").prompt("look around the api").say("Looked.").prompt(asked)
        if act:
            getattr(t, tool)(*args)
        if unrelated:
            t.edit_file("/w/app/migrations/0042.py", "CREATE INDEX", "CREATE INDEX IF NOT EXISTS")
        t.bash("pytest -q", "12 passed").say("Done.").prompt("thanks, that's all")
        return _section(render_body(summarize(t.write(tmp_path / "t.jsonl")), "p"), "## Open items")

    assert "Asked, not done" not in open_items(act=True), asked
    assert f"Asked, not done: {asked}" in open_items(act=False, unrelated=True)
    assert f"Asked, not done: {asked}" in open_items(act=False)


@pytest.mark.parametrize(
    ("failed", "passed"),
    [
        ("pytest -q tests/test_a.py", "python -m pytest -q"),
        ("pytest -q", "uv run pytest -q"),
        ("npm test", "npm run test"),
        ("npm run build", "pnpm build"),
        ("npx jest src/a.test.ts", "npx jest"),
        ("cargo test parser", "cargo test"),
        ("go test ./pkg/a", "go test ./..."),
        ("pytest tests/a.py -k slow", "poetry run pytest tests/a.py"),
        ("tox -e py311", "tox"),
    ],
)
def test_a_failing_run_is_settled_by_a_passing_run_of_it_in_another_form(failed: str, passed: str) -> None:
    """Run through a runner (`python -m`, `uv run`, `npx`), as npm's kin run a script, or wider (no
    selector, the parent folder): the later passing run covers the failed one; narrower does not."""
    assert failing_at_end([(failed, True), (passed, False)]) == [], (failed, passed)
    the_same = {("pytest -q", "uv run pytest -q"), ("npm test", "npm run test"), ("npm run build", "pnpm build")}
    assert failing_at_end([(passed, True), (failed, False)]) == ([] if (failed, passed) in the_same else [passed])


def test_the_outcome_says_a_check_still_fails_whatever_the_last_reply_claims(tmp_path: Path) -> None:
    t = Transcript("claims", cwd="/w").prompt("make the refund tests pass")
    t.edit_file("/w/app/refunds.py", "total - fee", "total - fee - tax")
    t.failed_bash("pytest -q tests/test_refunds.py", "1 failed, 11 passed")
    t.say("All refund tests pass now.")
    outcome = _section(render_body(summarize(t.write(tmp_path / "t.jsonl")), "p"), "## Outcome")
    assert outcome.strip().startswith("**Still failing:** `pytest -q tests/test_refunds.py`"), outcome
    assert "The last reply said: All refund tests pass now." in outcome
    t.bash("python -m pytest -q", "12 passed")
    outcome = _section(render_body(summarize(t.write(tmp_path / "t.jsonl")), "p"), "## Outcome")
    assert "Still failing" not in outcome and outcome.strip() == "All refund tests pass now.", outcome


BUILDKIT = "Decided to use BuildKit cache mounts for the pip layer.\n\nNext steps:\n- Enable BuildKit cache mounts in the CI runner config"


@pytest.mark.parametrize(
    "turned",
    [
        "nope. put it back how it was",
        "cancel that, our CI runners don't support it",
        "hmm let's not go down that road",
        "back it out please",
        "hmm on second thought, let's keep the plain pip install",
        "ugh, buildkit is overkill here",
        "ditch it, the plain install is fine",
    ],
)
def test_a_prompt_turning_away_in_everyday_words_drops_the_decision_and_its_plan(turned: str) -> None:
    found = digest([BUILDKIT], text_seqs=[1], prompts=["speed up the docker build", turned], prompt_seqs=[0, 2])
    assert found.decisions == [], (turned, found)
    assert not any("BuildKit" in item for item in found.open_items), (turned, found)


@pytest.mark.parametrize(
    ("texts", "kept"),
    [
        (["I'll decided on OffscreenCanvas since it runs in a worker.",
          "OffscreenCanvas isn't available for our Safari 15 target, so that's a dead end."], []),
        (["Root cause: the LRU cache in resolve_user() is unbounded.",
          "Actually I was wrong, that cache is bounded at 1024. The real root cause is that the metrics registry makes a Counter per job id."],
         ["The real root cause is that the metrics registry makes a Counter per job id."]),
    ],
)
def test_the_assistant_correcting_itself_drops_what_it_corrected(texts: list[str], kept: list[str]) -> None:
    assert digest(texts).decisions == kept


@pytest.mark.parametrize(
    ("decided", "correction"),
    [
        ("Decided to set DATABASE_REPLICA_URL to postgres://db-replica-2.internal:5432/app.", "no its port 6432, pgbouncer sits in front"),
        ("Decided to add FEATURE_X_ENABLED to config/dev.env.", "wrong file. it goes in config/base.env, dev.env is generated"),
        ("I'll use npm to install date-fns.", "wait we use yarn here, not npm. there's a yarn.lock"),
        ("Decided to retry 5 times with exponential backoff.", "actually 3 retries, not 5. we have a timeout budget"),
    ],
)
def test_a_correction_in_a_prompt_drops_the_decision_it_corrects(decided: str, correction: str) -> None:
    found = digest([decided], text_seqs=[1], prompts=["wire it up", correction], prompt_seqs=[0, 2])
    assert found.decisions == [], (correction, found)


def test_words_that_only_look_like_turning_away_leave_decisions_standing() -> None:
    """ "undo stack", a TODO to revert something later, "never mind" after a side question and a
    switch of git branch turn away from nothing."""
    texts = [
        "Decided to use the command pattern: each edit is a Command with apply() and revert(), kept on two stacks.",
        "Going with a cap of 100 entries on the undo stack. Undo/redo works via Ctrl+Z.",
    ]
    assert digest(texts).decisions == [*texts[:1], "Going with a cap of 100 entries on the undo stack."]
    texts = ["Decided to log the full event at DEBUG level, gated by PAYMENTS_DEBUG.",
             "TODO: revert the temporary debug logging in payments/webhook.py once the incident is closed."]
    found = digest(texts)
    assert found.decisions == texts[:1] and found.open_items == texts[1:]
    texts = ["The fix is to take a Postgres advisory lock instead of relying on a single replica.", "No, only here."]
    prompts = ["two pods run the cron", "is the lock id 4242 used anywhere else?", "ok cool never mind then"]
    assert digest(texts, text_seqs=[1, 3], prompts=prompts, prompt_seqs=[0, 2, 4]).decisions == texts[:1]
    assert digest(["Switched to main; the TAX change came along."]).decisions == []


@pytest.mark.parametrize(
    ("asked", "called_off"),
    [
        ("also could you add retry w/ backoff to the email sender", "actually nvm the retry stuff, we're replacing that sender"),
        ("and bump the eslint config to flat config", "ugh ok forget it then"),
        ("also set up the sentry release tracking in the deploy script", "actually don't bother with release tracking"),
    ],
)
def test_a_request_called_off_in_everyday_words_is_not_left_undone(asked: str, called_off: str) -> None:
    prompts = ["tidy the mailer", asked, called_off]
    found = digest(["Looking at it."], text_seqs=[3], prompts=prompts, prompt_seqs=[0, 2, 4])
    assert not any(asked in item for item in found.open_items), (called_off, found)
    assert any(asked in item for item in digest(["Looking at it."], text_seqs=[3], prompts=prompts[:2], prompt_seqs=[0, 2]).open_items)


@pytest.mark.parametrize(
    "asked",
    ["oh and pls update the README install section to mention uv", "could you also update the README install section for uv",
     "don't forget to update the README install section for uv"],
)
def test_a_request_with_a_lead_in_is_still_a_request(asked: str) -> None:
    found = digest(["Done with the parser."], text_seqs=[3], prompts=["fix the parser", asked], prompt_seqs=[0, 2])
    assert f"Asked, not done: {asked}" in found.open_items, found


def test_a_check_narrowed_or_hidden_by_a_pipe_still_fails_and_a_wider_one_settles_it() -> None:
    assert failing_at_end([("pytest -q", True), ("pytest -q --ignore=tests/integration", False)]) == ["pytest -q"]
    assert failing_at_end([("mypy src", True), ("mypy .", False)]) == []
    assert failing_at_end([("git checkout -- docker-compose.override.yml", True)]) == []  # no check


def test_a_run_piped_into_tail_that_printed_a_failure_still_fails(tmp_path: Path) -> None:
    t = Transcript("piped", cwd="/w").prompt("make the integration tests pass")
    t.failed_bash("pytest tests/integration -q", "1 failed, 22 passed")
    t.edit_file("/w/app/client.py", "timeout=1", "timeout=5")
    t.bash("pytest tests/integration -q 2>&1 | tail -3", "FAILED tests/integration/test_api.py::test_roundtrip - TimeoutError\n1 failed, 22 passed")
    t.say("Fixed.")
    outcome = _section(render_body(summarize(t.write(tmp_path / "t.jsonl")), "p"), "## Outcome")
    assert "**Still failing:** `pytest tests/integration -q 2>&1 | tail -3`" in outcome, outcome


def test_a_build_step_that_runs_the_tests_settles_a_failed_test_run() -> None:
    assert failing_at_end([("mvn test", True), ("mvn -q verify", False)]) == []
    assert failing_at_end([("./gradlew test", True), ("./gradlew build", False)]) == []
    assert failing_at_end([("mvn verify", True), ("mvn test", False)]) == ["mvn verify"]


def test_a_request_naming_a_number_is_done_by_the_change_that_writes_it(tmp_path: Path) -> None:
    t = Transcript("number", cwd="/w").prompt("look at the session timeout").say("It is 60 minutes.")
    t.prompt("make it 30 minutes, security asked for that")
    t.edit_file("/w/app/settings.py", "IDLE_TIMEOUT = 60 * 60", "IDLE_TIMEOUT = 30 * 60").say("Done.")
    assert "Asked, not done" not in _section(render_body(summarize(t.write(tmp_path / "t.jsonl")), "p"), "## Open items")
