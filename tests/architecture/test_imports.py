"""Imports inside functions are kept only where start-up time needs them, each saying why.

An import inside a function hides a dependency from the reader and from
nothing else (import-linter still sees it: tests/architecture/test_layers.py). It earns
its place only on a start-up path (`--help`, a CLI command, a hook, the MCP
server), so each one carries a `# lazy: <reason>` comment naming what it keeps
off which path. The second half runs those paths as real processes and checks
the heavy packages they must not load.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env
from test_faces import lazy_face_names

from anamnesis.base.paths import open_store
from anamnesis.store.operations import create_note, init_store

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "anamnesis", ROOT / "hooks"]
MARK = "# lazy:"


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _deferred_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function body (TYPE_CHECKING blocks excepted)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                found.append(child)
            visit(
                child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            )

    visit(tree, False)
    return found


def _reason(lines: list[str], node: ast.stmt) -> str:
    """The text after `# lazy:` on the import's lines or on the comment line just above it."""
    end = node.end_lineno or node.lineno
    candidates = lines[node.lineno - 1 : end]
    if node.lineno >= 2 and lines[node.lineno - 2].strip().startswith(MARK):
        candidates.append(lines[node.lineno - 2])
    for line in candidates:
        if MARK in line:
            return line.split(MARK, 1)[1].strip()
    return ""


def _top_level_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(_modules(node))
    return names


def _face(package: str) -> dict[str, tuple[str, str]]:
    """What a package's lazy face offers (base/face.py); {} for a package without one."""
    return lazy_face_names(ROOT / Path(*package.split(".")) / "__init__.py") or {}


def _modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import loads: a name from a lazy face counts as its own module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not node.module or node.level:
        return []
    face = _face(node.module)
    if not face:
        return [node.module]
    return [face[alias.name][0] if alias.name in face else f"{node.module}.{alias.name}" for alias in node.names]


def _python_files() -> list[Path]:
    return sorted(
        path for folder in SOURCES for path in folder.rglob("*.py") if "__pycache__" not in path.parts
    )


def test_the_checker_finds_a_deferred_import_and_its_reason() -> None:
    source = (
        "import os\n"
        "def f():\n"
        "    import json  # lazy: keeps json off the hook\n"
        "    from os import path\n"
        "    if TYPE_CHECKING:\n"
        "        import typing\n"
        "    def g():\n"
        "        # lazy: inner\n"
        "        from x import (\n"
        "            y,\n"
        "        )\n"
        "import sys\n"
    )
    tree = ast.parse(source)
    found = _deferred_imports(tree)
    lines = source.splitlines()
    assert [(n.lineno, _reason(lines, n)) for n in found] == [
        (3, "keeps json off the hook"),
        (4, ""),
        (9, "inner"),
    ]
    assert _top_level_modules(tree) == {"os", "sys"}


def test_every_import_inside_a_function_says_why_it_is_deferred() -> None:
    unexplained: list[str] = []
    for path in _python_files():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in _deferred_imports(ast.parse(text)):
            if not _reason(lines, node):
                unexplained.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}"
                )
    assert not unexplained, (
        f"{len(unexplained)} imports inside functions without '# lazy: <reason>':\n" + "\n".join(unexplained)
    )


def test_no_deferred_import_of_what_the_module_already_imports_at_the_top() -> None:
    pointless: list[str] = []
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = _top_level_modules(tree)
        for node in _deferred_imports(tree):
            pointless += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for name in _modules(node) if name in top
            ]
    assert not pointless, "\n".join(pointless)


# -- the start-up paths, as real processes ------------------------------------------------------

HEAVY = {
    "yaml",
    "frontmatter",
    "rich",
    "typer",
    "git",
    "mcp",
    "watchdog",
    "zeroconf",
    "numpy",
    "tokenizers",
    "tomlkit",
}

# path -> heavy top-level packages it may load (everything else in HEAVY it must not)
ALLOWED = {
    "help": {"typer"},
    "search": {"typer"},
    "session-start": {"yaml"},  # a note whose front matter the fast reader does not handle
    "user-prompt-submit": {"yaml"},
    "session-end": {"yaml", "frontmatter"},  # it writes a note
}


def _imported(args: list[str], env: dict[str, str], stdin: str = "", cwd: Path | None = None) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    return {name.split(".")[0] for name in names}


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Top-level packages each start-up path imports, on a small store with a session transcript."""
    home = tmp_path_factory.mktemp("machine") / "home"
    project = tmp_path_factory.mktemp("project")
    env = cli_env(home)
    store = open_store(home)
    init_store(store)
    create_note(store, title="Connection pool", body="Pool size is 40; retries stay at 3.", type="semantic")
    transcript = project / "session.jsonl"
    rows = []
    for turn in range(4):
        stamp = f"2026-11-20T10:00:0{turn}Z"
        rows.append(
            {
                "type": "user",
                "sessionId": "s1",
                "cwd": str(project),
                "timestamp": stamp,
                "message": {"role": "user", "content": f"fix the connection pool bug {turn} in the api"},
            }
        )
        rows.append(
            {
                "type": "assistant",
                "sessionId": "s1",
                "cwd": str(project),
                "timestamp": stamp,
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"Raised the pool to {40 + turn}."}],
                },
            }
        )
    transcript.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    event = json.dumps(
        {
            "session_id": "s1",
            "cwd": str(project),
            "transcript_path": str(transcript),
            "source": "startup",
            "prompt": "how big is the connection pool",
        }
    )
    paths = {
        "help": _imported(["-m", "anamnesis", "--help"], env),
        "search": _imported(["-m", "anamnesis", "search", "connection pool"], env),
    }
    for name in ("session-start", "user-prompt-submit", "session-end"):
        paths[name] = _imported(["-P", "-m", "anamnesis.hooks", name], env, stdin=event, cwd=project)
    return paths


@pytest.mark.parametrize("path", sorted(ALLOWED))
def test_start_up_paths_leave_heavy_packages_alone(started: dict[str, set[str]], path: str) -> None:
    loaded = started[path]
    assert "anamnesis" in loaded  # the measurement itself works
    assert sorted((loaded & HEAVY) - ALLOWED[path]) == []
