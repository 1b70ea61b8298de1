"""The import contracts in pyproject.toml: the layers, the named boundaries, no import cycles.

`lint-imports` (import-linter) checks them in CI; these tests run it on the
package; on a copy of the package with one violation planted for each
contract (hidden inside a function, where a reader would not see it), to show
each contract fails on it; and on a small package, for how the checks treat
cycles and TYPE_CHECKING imports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"

TOY_CONFIG = """
[importlinter]
root_package = toy
exclude_type_checking_imports = True

[importlinter:contract:layers]
name = toy layers
type = layers
containers = toy
exhaustive = True
layers =
    cli
    core_a : core_b
    base

[importlinter:contract:cycles]
name = toy cycles
type = acyclic_siblings
ancestors = toy
"""


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run(
        [str(LINT), "--no-cache", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _toy(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "toy"
    package.mkdir()
    for name in ("__init__", "cli", "core_a", "core_b", "base"):
        (package / f"{name}.py").write_text(files.get(name, ""), encoding="utf-8")
    (tmp_path / ".importlinter").write_text(TOY_CONFIG, encoding="utf-8")
    return tmp_path


def test_the_package_keeps_its_layers_and_has_no_import_cycle() -> None:
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Contracts: 14 kept, 0 broken." in proc.stdout


PLANTED = {
    "Layers: ": ("base/planted.py", "from anamnesis.store import create_note"),
    "Search knows nothing of sync or agents": ("search/planted.py", "from anamnesis.agents import build_recall"),
    "Sync knows nothing of agents or importers": ("sync/planted.py", "from anamnesis.importers import mirror_all"),
    "The store knows nothing of sync": ("store/planted.py", "from anamnesis.sync import sync"),
    "No import cycles": ("store/planted.py", "from anamnesis.store import transaction"),
}
# one package reaching past another's face, for each package with one: a module of it, imported by name
for _package in ("store", "search", "sync", "agents", "importers", "app", "mcp", "web", "cli"):
    _module = min(path.stem for path in (ROOT / "anamnesis" / _package).glob("*.py") if path.stem != "__init__")
    _source = "cli" if _package == "app" else "app" if _package != "cli" else "mcp"
    PLANTED[f"Others use {_package} only through its face"] = (
        f"{_source}/planted.py",
        f"from anamnesis.{_package} import {_module}",
    )


@pytest.mark.parametrize("contract", sorted(PLANTED))
def test_each_contract_fails_on_a_violation_planted_in_a_copy_of_the_package(tmp_path: Path, contract: str) -> None:
    shutil.copytree(ROOT / "anamnesis", tmp_path / "anamnesis", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    relpath, line = PLANTED[contract]
    (tmp_path / "anamnesis" / relpath).write_text(f"def later() -> object:\n    {line}\n    return None\n")
    if contract == "No import cycles":  # a module of the store importing the planted one back closes a cycle
        with (tmp_path / "anamnesis" / "store" / "transaction.py").open("a") as module:
            module.write("\n\ndef planted_back() -> object:\n    from anamnesis.store import planted\n    return planted\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0, proc.stdout[-3000:]
    broken = [line for line in proc.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(line.startswith(contract) for line in broken), proc.stdout[-3000:]


def test_a_clean_toy_package_passes(tmp_path: Path) -> None:
    root = _toy(tmp_path, {"cli": "from toy import core_a\n", "core_a": "from toy import base, core_b\n"})
    proc = _lint(root)
    assert proc.returncode == 0, proc.stdout


def test_a_cycle_through_an_import_inside_a_function_is_caught(tmp_path: Path) -> None:
    root = _toy(
        tmp_path,
        {"core_a": "from toy import core_b\n", "core_b": "def later():\n    from toy import core_a\n    return core_a\n"},
    )
    proc = _lint(root)
    assert proc.returncode != 0
    assert "toy cycles BROKEN" in proc.stdout
    assert "toy layers KEPT" in proc.stdout  # siblings of one layer may import each other: only the cycle is wrong


def test_base_importing_core_inside_a_function_is_caught(tmp_path: Path) -> None:
    root = _toy(tmp_path, {"base": "def later():\n    from toy import core_a\n    return core_a\n"})
    proc = _lint(root)
    assert proc.returncode != 0
    assert "toy layers BROKEN" in proc.stdout
    assert "toy.base -> toy.core_a" in proc.stdout


def test_type_checking_imports_are_no_cycle(tmp_path: Path) -> None:
    root = _toy(
        tmp_path,
        {
            "core_a": "from toy import core_b\n",
            "core_b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy import core_a\n",
        },
    )
    proc = _lint(root)
    assert proc.returncode == 0, proc.stdout
