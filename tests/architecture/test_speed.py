"""The start-up paths made fast in issue 12 show what the slow ones showed.

`anamnesis --help` is drawn without rich (anamnesis.cli._help) and search
results go to a pipe as plain text: both must say exactly what typer and rich
say, only sooner.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from anamnesis.search.catalog import MARK_END, MARK_START, Hit

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _panels(text: str) -> dict[str, list[str]]:
    """Panel title -> the names in its left column, from a drawn help screen."""
    panels: dict[str, list[str]] = {}
    title = ""
    for line in ANSI.sub("", text).splitlines():
        if line.startswith("╭─ "):
            title = line[3:].split(" ─")[0].strip()
            panels[title] = []
        elif line.startswith("│ ") and len(line) > 2 and line[2] != " " and title:
            panels[title].append(line[2:].split()[0])
    return panels


def test_top_level_help_lists_what_typer_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    from anamnesis.cli import app
    from anamnesis.cli._help import render

    monkeypatch.setenv("COLUMNS", "100")
    theirs = CliRunner().invoke(app, ["--help"], terminal_width=100)  # typer's own (rich) help screen
    assert theirs.exit_code == 0
    ours = render(app, width=100, color=False)
    expected = _panels(theirs.output)
    assert len(expected) >= 5 and "search" in expected["Notes"]
    assert _panels(ours) == expected  # every panel, every command, in typer's order
    for row in ("Search notes, best match first.", "Show this message and exit."):
        assert row in ours
    coloured = render(app, width=100, color=True)
    assert "\x1b[" in coloured and ANSI.sub("", coloured) == ours


def test_help_starts_without_rich() -> None:
    """The whole process: `--help` prints the command list and never imports rich."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "anamnesis", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    assert "Usage:" in proc.stdout and "reindex" in proc.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "import time:" in line]
    assert "typer" in imported  # the measurement itself works
    assert not [name for name in imported if name == "rich" or name.startswith("rich.")]


def _hits() -> list[Hit]:
    return [
        Hit(
            path="global/facts/[draft] pool-abc.md",
            id="abc",
            title="Pool [/red] settings",
            type="semantic",
            project=None,
            tags=[],
            updated="2026-11-20T10:00:00Z",
            snippet=f"the  {MARK_START}connection pool{MARK_END}\nis   40 {MARK_START}now{MARK_END} …",
            conflicted=True,
            superseded_by=["def"],
        ),
        Hit(
            path="projects/acme/howto/x.md",
            id="x",
            title="Plain",
            type="procedural",
            project="github.com/acme/api",
            tags=[],
            updated="2026-11-21",
            snippet="   ",
        ),
    ]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_search_results_in_a_pipe_are_the_terminal_text_without_styles(monkeypatch: pytest.MonkeyPatch) -> None:
    from anamnesis.cli.notes import _hits_table

    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)
    _hits_table(_hits(), with_snippet=True)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setenv("COLUMNS", "300")
    _hits_table(_hits(), with_snippet=True)
    assert "\x1b[" in terminal.getvalue()  # rich drew it, with styles
    assert ANSI.sub("", terminal.getvalue()) == piped.getvalue()
    assert piped.getvalue().splitlines() == [
        "Pool [/red] settings (conflict) (superseded by def)  semantic · global · 2026-11-20",
        "  global/facts/[draft] pool-abc.md",
        "  the connection pool is 40 now …",
        "Plain  procedural · github.com/acme/api · 2026-11-21",
        "  projects/acme/howto/x.md",
        "  ",
    ]
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)
    _hits_table([], with_snippet=True)
    assert piped.getvalue() == "no notes found\n"
