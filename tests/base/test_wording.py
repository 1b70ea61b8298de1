"""What the messages say: a count agrees with its noun, a conflict counts its versions, a retry is said once."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from fleet import Fleet, Machine, fleet  # noqa: F401

from anamnesis.base.text import plural

PACKAGE = Path(__file__).resolve().parents[2] / "anamnesis"


def test_plural_puts_the_noun_in_the_number_of_the_count() -> None:
    assert plural(1, "note") == "1 note"
    assert plural(0, "note") == "0 notes"
    assert plural(3, "commit") == "3 commits"
    assert plural(2, "copy", "copies") == "2 copies"
    assert plural(1, "note has", "notes have") == "1 note has"
    assert plural(4, "note has", "notes have") == "4 notes have"


def _messages(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a module that are not docstrings."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_message_hedges_a_plural_or_spells_its_own() -> None:
    """Every count meets its noun through `text.plural`: no `note(s)`, no `'s' if n != 1 else ''`,
    no `f"{len(found)} notes"`."""
    hedged: list[str] = []
    inline: list[str] = []
    counted: list[str] = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "hooks").rglob("*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(PACKAGE.parent)
        hedged += [f"{where}:{c.lineno}: {c.value!r}" for c in _messages(tree) if "(s)" in c.value]
        for node in ast.walk(tree):
            if not isinstance(node, ast.JoinedStr):
                continue
            for value, after in zip(node.values, node.values[1:], strict=False):
                if (
                    isinstance(value, ast.FormattedValue)
                    and isinstance(value.value, ast.Call)
                    and isinstance(value.value.func, ast.Name)
                    and value.value.func.id == "len"
                    and isinstance(after, ast.Constant)
                    and re.match(r" [a-z]+s\b", str(after.value))
                ):
                    counted.append(f"{where}:{node.lineno}: {{len(...)}}{after.value!r}")
        for node in ast.walk(tree):
            if not isinstance(node, ast.IfExp):
                continue
            words = sorted(
                (b.value for b in (node.body, node.orelse) if isinstance(b, ast.Constant) and isinstance(b.value, str)),
                key=len,
            )
            if len(words) == 2 and words[1] == words[0] + "s":  # 's' if n != 1 else '', "note" if n == 1 else "notes"
                inline.append(f"{where}:{node.lineno}: {words}")
    assert hedged == [], hedged
    assert inline == [], inline
    assert counted == [], counted


def test_status_counts_one_conflicted_note_in_the_singular(fleet: Fleet) -> None:
    (a, b), _note = fleet.one_line_edited_everywhere(("a", "b"))
    a.sync()
    assert b.sync().exit_code == 10
    out = b.cli("status").stdout
    assert "1 note — run `anamnesis conflicts`" in out, out
    assert "1 notes" not in out


def test_a_conflict_of_three_machines_says_three_versions_were_kept(fleet: Fleet) -> None:
    (a, b, c), note = fleet.one_line_edited_everywhere(("a", "b", "c"))
    assert a.cli("sync").returncode == 0
    proc = b.cli("sync")
    assert proc.returncode == 10 and f"conflict in {note.path}" in proc.stdout, proc.stdout
    assert "— both versions kept: a, b" in proc.stdout, proc.stdout
    proc = c.cli("sync")
    assert proc.returncode == 10, proc.stderr
    assert "— all 3 versions kept: a, b, c" in proc.stdout, proc.stdout
    assert "both versions" not in proc.stdout


def test_a_peer_that_is_off_is_retried_and_that_is_said_once(fleet: Fleet, tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on: ssh's "Connection refused"
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    a = fleet.machine("a", {"off": f"ssh://nobody@127.0.0.1:{port}/srv/memory"})
    proc = a.cli("sync")
    assert proc.returncode == 11, proc.stderr
    said = " ".join(proc.stdout.split())
    assert "off, asleep or not running ssh" in said, said
    assert said.count("retr") == 1 and "will retry next sync" in said, said


def test_init_peer_counts_what_it_received(fleet: Fleet, tmp_path: Path) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    a.sync()  # the hub holds one commit: the store's first
    newcomer = Machine("new", tmp_path / "new")
    proc = newcomer.cli("init", "--peer", str(hub), "--no-schedule", "--no-claude", "--json")
    assert proc.returncode == 0, proc.stderr
    joined = next(line for line in json.loads(proc.stdout)["done"] if line.startswith("joined"))
    assert "received 1 commit, 0 notes;" in joined, joined
