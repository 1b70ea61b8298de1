"""The README's set-up commands are real: a user's first two lines install and set up, the two
one-command sections exist, CI runs the test one, the demo one works from a fresh clone."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from procs import clone_working_tree

ROOT = Path(__file__).resolve().parents[2]


def test_readme_names_the_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```sh\n(\./scripts/\w+)\n```", readme)
    assert commands == ["./scripts/demo", "./scripts/test"]
    for command in commands:
        assert os.access(ROOT / command, os.X_OK)
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()


def test_a_users_first_lines_are_install_then_init_and_the_peer_steps_are_there() -> None:
    readme = (ROOT / "README.md").read_text()
    first_block = re.search(r"```sh\n(.*?)```", readme, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["./scripts/install", "anamnesis init"]
    assert os.access(ROOT / "scripts" / "install", os.X_OK)
    install = readme[readme.index("## Install") : readme.index("## Try it")]
    assert "`ssh HOST true`" in install and "anamnesis init --peer HOST:" in install
    assert "anamnesis uninstall --everything" in install and "./scripts/install --semantic" in install
    for script in set(re.findall(r"\./scripts/(\w[\w-]*)", readme)):
        assert os.access(ROOT / "scripts" / script, os.X_OK), script


@pytest.mark.e2e
def test_demo_command_works_from_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone_working_tree(clone)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "ANAMNESIS_HOME")}
    env["HOME"] = str(tmp_path / "user")
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    result = subprocess.run(
        ["./scripts/demo"], cwd=clone, capture_output=True, text=True, env=env, timeout=900
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "done in" in result.stdout
    assert not (tmp_path / "user" / ".anamnesis").exists()  # the demo never touches the real store
