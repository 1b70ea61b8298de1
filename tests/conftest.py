"""Shared fixtures: a real store in a temp ANAMNESIS_HOME and the real CLI as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from anamnesis.paths import Store

ROOT = Path(__file__).resolve().parent.parent

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment for running `anamnesis` against `home` with no user config leaking in
    or out: Claude Code's config and systemd/launchd folders point beside `home`, never at
    the real user's."""
    env = dict(os.environ)
    env["ANAMNESIS_HOME"] = str(home)
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["CLAUDE_CONFIG_DIR"] = str(home.parent / "claude-config")
    env["XDG_CONFIG_HOME"] = str(home.parent / "xdg-config")
    env.pop("VISUAL", None)
    env.update(extra)
    return env


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty ANAMNESIS_HOME, set in the environment of this test."""
    path = tmp_path / "home"
    monkeypatch.setenv("ANAMNESIS_HOME", str(path))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    return path


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    """An initialised store (real git repo, real index) in a temp ANAMNESIS_HOME."""
    from anamnesis.paths import open_store
    from anamnesis.store import init_store

    store = open_store(home)
    init_store(store)
    yield store


@pytest.fixture
def run_cli(home: Path) -> RunCli:
    """Run `python -m anamnesis ARGS` as a real process against `home` (or home=...)."""

    def run(
        *args: str,
        input: str | None = None,
        home_dir: Path | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "anamnesis", *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            cwd=cwd or ROOT,
            env=cli_env(home_dir or home, **(env or {})),
            timeout=timeout,
        )

    return run
