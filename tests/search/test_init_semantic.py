"""`init` offers search by meaning with what it costs: asked in a terminal, said outside one, turned on
with --semantic (the model from --model-dir here: the tests never reach the model hub)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fleet import Fleet, Machine, fleet  # noqa: F401
from procs import run_in_terminal
from test_embed import model_dir  # noqa: F401  (the session fixture: the real model folder)

from anamnesis.store.operations import create_note

pytestmark = pytest.mark.timeout(240)
BASE = ["init", "--no-claude", "--agent", "codex", "--no-instructions", "--no-schedule"]


def _semantic(machine: Machine) -> dict[str, object]:
    return dict(json.loads(machine.cli("semantic", "status", "--json").stdout))


def test_init_turns_semantic_search_on_with_a_model_folder(fleet: Fleet, model_dir: Path) -> None:
    a = fleet.machine("a")
    create_note(a.store, type="semantic", title="On-call rota", body="Paged by PagerDuty.")
    proc = a.cli(*BASE, "--semantic", "--model-dir", str(model_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "search by meaning on" in proc.stdout, proc.stdout
    assert _semantic(a)["enabled"] is True
    again = a.cli(*BASE)  # on already: not offered again
    assert "search by meaning" not in again.stdout, again.stdout


def test_init_local_only_turns_semantic_search_on_when_asked(fleet: Fleet, model_dir: Path) -> None:
    """--local-only leaves out peers, agents and the schedule, not what was asked for by name:
    with --semantic it turned nothing on and said nothing."""
    a = fleet.machine("a")
    proc = a.cli("init", "--local-only", "--semantic", "--model-dir", str(model_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "search by meaning on" in proc.stdout, proc.stdout
    assert _semantic(a)["enabled"] is True
    b = fleet.machine("b")
    quiet = b.cli("init", "--local-only")  # not asked for: not offered either
    assert quiet.returncode == 0 and "search by meaning" not in quiet.stdout, quiet.stdout
    assert _semantic(b)["enabled"] is False


def test_init_outside_a_terminal_says_what_semantic_search_costs_and_changes_nothing(fleet: Fleet) -> None:
    a = fleet.machine("a")
    for i in range(3):
        create_note(a.store, type="semantic", title=f"Fact {i}", body="text")
    proc = a.cli(*BASE)
    assert proc.returncode == 0, proc.stderr
    assert "`anamnesis semantic enable` (a 90 MB model downloaded once" in proc.stdout, proc.stdout
    assert "to embed 3 notes" in proc.stdout, proc.stdout
    assert _semantic(a)["enabled"] is False
    assert "search by meaning" not in a.cli(*BASE, "--no-semantic").stdout


def test_init_in_a_terminal_asks_with_the_cost_and_a_no_changes_nothing(fleet: Fleet) -> None:
    a = fleet.machine("a")
    create_note(a.store, type="semantic", title="Fact", body="text")
    shown = run_in_terminal(
        [sys.executable, "-m", "anamnesis", *BASE], a.env(), [("Turn on search by meaning", "n\n")], 120
    )
    assert "It costs a 90 MB model downloaded once" in shown and "to embed 1 note. [Y/n]" in shown, shown
    assert _semantic(a)["enabled"] is False
    shown = run_in_terminal(
        [sys.executable, "-m", "anamnesis", *BASE], a.env(), [("Turn on search by meaning", "\x04")], 120
    )
    assert "search by meaning not turned on: no answer (stdin was closed)" in shown, shown
    assert "--semantic or --no-semantic" in shown
