"""Every error the CLI can exit with has a code of the one registry (errors.ExitCode), documented in
docs/cli.md, and two meanings never share a code: scripts and timers branch on them."""

from __future__ import annotations

import importlib
import pkgutil
import re

from conftest import ROOT

import anamnesis
from anamnesis.base.errors import AnamnesisError, ExitCode


def _every_error_class() -> list[type[AnamnesisError]]:
    for module in pkgutil.walk_packages(anamnesis.__path__, "anamnesis."):
        if module.name.startswith("anamnesis.hooks"):
            continue  # what Claude Code runs: importing it reads stdin-shaped entry points, no errors live there
        importlib.import_module(module.name)
    found: list[type[AnamnesisError]] = []
    todo: list[type[AnamnesisError]] = [AnamnesisError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _documented() -> set[int]:
    table = (ROOT / "docs" / "cli.md").read_text()
    codes: set[int] = set()
    for cell in re.findall(r"(?m)^\| ([0-9][0-9, ]*) \|", table):
        codes.update(int(code) for code in cell.split(","))
    return codes


def test_every_error_class_exits_with_a_registered_documented_code() -> None:
    documented = _documented()
    classes = _every_error_class()
    assert len(classes) > 20  # the walk found the package's errors, not just the base
    for cls in classes:
        code = cls.exit_code
        assert code in set(ExitCode), f"{cls.__module__}.{cls.__name__} exits {code}, not an ExitCode"
        assert int(code) in documented, f"{cls.__name__}'s exit code {int(code)} is not in docs/cli.md"
    assert set(map(int, ExitCode)) <= documented, sorted(set(map(int, ExitCode)) - documented)


def test_an_agent_config_we_cannot_edit_and_semantic_search_unavailable_are_told_apart() -> None:
    from anamnesis.agents.files import AgentConfigError
    from anamnesis.search.semantic import SemanticError

    assert AgentConfigError.exit_code == ExitCode.AGENT_CONFIG
    assert SemanticError.exit_code == ExitCode.SEMANTIC_UNAVAILABLE
    assert AgentConfigError.exit_code != SemanticError.exit_code
