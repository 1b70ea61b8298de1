"""`init`'s questions at a real terminal whose input ends (Ctrl-D, a closed stdin), and an init that fails
half-way: it says what it did and did not, and running it again finishes the job."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fleet import Fleet, Machine, fleet  # noqa: F401
from procs import run_in_terminal

from anamnesis.store.operations import create_note

pytestmark = pytest.mark.timeout(180)

EOF = "\x04"  # Ctrl-D at a terminal: the input ends, as when stdin is closed


def at_a_terminal(machine: Machine, args: list[str], answers: list[tuple[str, str]], expect: int = 0) -> str:
    """`anamnesis ARGS` run as `machine` on a pseudo-terminal, each prompt answered as `answers` say."""
    return run_in_terminal([sys.executable, "-m", "anamnesis", *args], machine.env(), answers, 120, expect)


def test_init_peer_with_stdin_closed_at_the_timer_question_says_what_it_did(fleet: Fleet, tmp_path: Path) -> None:
    hub, note = fleet.hub_with_a_note()
    b = Machine("b", tmp_path / "b")
    args = ["init", "--peer", str(hub), "--no-claude", "--agent", "codex", "--no-instructions", "--no-semantic"]
    shown = at_a_terminal(b, args, [("Sync automatically every 5m", EOF)])
    assert shown.count("[Y/n]") == 1 and "aborted" not in shown, shown
    assert "joined" in shown and "received" in shown, shown
    assert "sync timer not installed: no answer (stdin was closed)" in shown, shown
    assert "--schedule" in shown and "anamnesis schedule install" in shown, shown
    assert (b.memory / note.path).exists()
    assert [p["name"] for p in json.loads(b.cli("peers", "list", "--json").stdout)] == ["hub"]
    # Again: nothing is done twice, the question comes again, the answer still has a default.
    shown = at_a_terminal(b, args, [("Sync automatically every 5m", EOF)])
    assert shown.count("[Y/n]") == 1, shown
    assert "created" not in shown and "received 0 commits" in shown, shown


def test_a_closed_stdin_at_the_memory_block_question_takes_the_default_and_names_the_flag(
    fleet: Fleet, tmp_path: Path
) -> None:
    hub = fleet.hub()
    b = fleet.machine("b", {"hub": fleet.url(hub)})  # a peer already: init looks for no other machine
    shown = at_a_terminal(b, ["init", "--no-claude", "--agent", "codex", "--no-schedule", "--no-semantic"], [("Add a short block", EOF)])
    assert "memory block added (the default): no answer (stdin was closed)" in shown, shown
    assert "--instructions or --no-instructions" in shown
    assert "aborted" not in shown
    assert "anamnesis" in (b.home.parent / ".b-codex" / "AGENTS.md").read_text()


def test_rm_at_a_terminal_whose_input_ends_deletes_nothing_and_names_yes(fleet: Fleet) -> None:
    a = fleet.machine("a")
    note = create_note(a.store, type="semantic", title="Keep me", body="text\n")
    shown = at_a_terminal(a, ["rm", note.id], [("Delete", EOF)], expect=2)
    assert "nothing was deleted" in shown and "--yes" in shown and "aborted" not in shown, shown
    assert (a.memory / note.path).exists()


def test_a_failed_init_peer_says_what_it_did_and_a_second_run_finishes_it(fleet: Fleet, tmp_path: Path) -> None:
    hub, note = fleet.hub_with_a_note()
    b = Machine("b", tmp_path / "b")
    typo = str(fleet.root / "hubb.git")
    proc = b.cli("init", "--peer", typo, "--no-schedule", "--no-claude")
    assert proc.returncode != 0 and "cannot join" in proc.stderr
    done, not_done = proc.stdout.split("Not done")
    assert "created git repo" in done, proc.stdout
    assert f"join {typo} as peer" in not_done, proc.stdout
    assert "the sync timer" not in not_done, proc.stdout  # --no-schedule: no timer was to be installed
    unasked = b.cli("init", "--peer", typo, "--no-schedule", "--no-claude", "--no-semantic")
    assert "Not done" in unasked.stdout and "search by meaning" not in unasked.stdout, unasked.stdout
    # no repo at that address: what to run again names the right address to give, not the typo
    assert "run `anamnesis init --peer HOST:PATH --no-schedule --no-claude` again" in " ".join(not_done.split())
    # The same as JSON: one document on stdout, the error on stderr.
    proc = b.cli("init", "--peer", typo, "--no-schedule", "--no-claude", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == report["exit_code"] != 0
    assert report["not_done"][0].startswith(f"join {typo}") and "cannot join" in report["error"]
    # Fixed (the right URL), the second run finishes what the first one began.
    proc = b.cli("init", "--peer", str(hub), "--no-schedule", "--no-claude")
    assert proc.returncode == 0, proc.stderr
    assert "created git repo" not in proc.stdout and "joined" in proc.stdout
    assert (b.memory / note.path).exists()
    assert b.cli("sync").returncode == 0
