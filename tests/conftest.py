"""Shared fixtures: a real store in a temp ANAMNESIS_HOME and the real CLI (in-process or as a subprocess)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from procs import run_anamnesis

from anamnesis.base.paths import Store

ROOT = Path(__file__).resolve().parent.parent

# The tests live in one folder per package (tests/store/, tests/sync/, ...: docs/architecture.md)
# and a few import helpers from a test module of another folder (`from test_mcp import _drive`);
# every folder is on the path, as pytest puts the running test's own folder there.
for _folder in sorted(Path(__file__).resolve().parent.iterdir()):
    if _folder.is_dir() and any(_folder.glob("test_*.py")) and str(_folder) not in sys.path:
        sys.path.append(str(_folder))

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
    env["CODEX_HOME"] = str(home.parent / "codex-home")  # other agents' config: never the real user's
    env["GEMINI_CLI_HOME"] = str(home.parent / "gemini-home")
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
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "gemini-home"))
    return path


@pytest.fixture(scope="session")
def initialised_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store made by `init_store` per test worker, for `store` to copy: init runs git several
    times (~20 ms), a copy takes a few ms, and hundreds of tests start from a fresh store."""
    from anamnesis.base.paths import open_store
    from anamnesis.store.operations import init_store

    path = tmp_path_factory.mktemp("initialised") / "home"
    init_store(open_store(path))
    for sample in (path / "memory" / ".git" / "hooks").glob("*.sample"):
        sample.unlink()  # git's examples: nothing reads them
    return path


@pytest.fixture
def store(home: Path, initialised_home: Path) -> Iterator[Store]:
    """An initialised store (real git repo, real index) in a temp ANAMNESIS_HOME: a copy of what
    `init_store` made for this worker (see `initialised_home`)."""
    from anamnesis.base.paths import open_store

    shutil.copytree(initialised_home, home, symlinks=True)
    yield open_store(home)


@pytest.fixture
def run_cli(home: Path) -> RunCli:
    """Run `anamnesis ARGS` against `home` (or home_dir=...): in this process through the CLI's own
    `main`, or with `real_process=True` as `python -m anamnesis` (see procs.run_anamnesis)."""

    def run(
        *args: str,
        input: str | None = None,
        home_dir: Path | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
        real_process: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        return run_anamnesis(
            args,
            cli_env(home_dir or home, **(env or {})),
            input=input if input is not None else "",
            cwd=cwd or ROOT,
            timeout=timeout,
            real_process=real_process,
        )

    return run


# Files whose tests run first, so that under xdist the longest ones do not start last and
# leave one worker busy after the others are done (they wait on timers, sshd, mDNS, the disk).
SLOW_FIRST = (
    "test_sync_random.py",  # with the next two: the e2e "kill-timing" group, minutes on one worker
    "test_conflicts_nway.py",
    "test_power_cut.py",
    "test_secrets_e2e.py",
    "test_watch.py",
    "test_discovery.py",
    "test_ssh_errors.py",
    "test_careful_writers.py",
)

# Files whose tests mostly wait (debounce timers, ssh connect timeouts, mDNS, slow model stand-ins),
# in two lanes: under `--dist loadgroup` each lane runs on one worker, so at most two workers wait
# while the others keep both cores busy. (Run first all at once, they left the cores idle for a
# quarter of the suite.)
# A lane takes the place of any xdist_group in its file: the whole file shares one worker anyway.
WAIT_LANES = {
    "test_watch.py": "waits-a",
    "test_ssh_errors.py": "waits-b",
    "test_discovery.py": "waits-b",
}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow files first; files that mostly wait in two lanes (WAIT_LANES); and `xdist_group` marks
    honoured under `--dist loadgroup`.

    pytest-xdist groups a test by appending `@group` to its node id, but it
    writes the attribute pytest 8 kept the id in; pytest 9 keeps it in `_id`,
    so without this the marks are ignored and a module-scoped fixture is
    built once per worker instead of once.
    """
    rank = {name: number for number, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept otherwise
    if getattr(config.option, "loadgroup", False) is not True:  # what xdist sets on workers for loadgroup
        return
    from _pytest.nodeid import NodeId

    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        if item.path.name in WAIT_LANES:
            names = {WAIT_LANES[item.path.name]}
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = NodeId.parse(item.nodeid + suffix)
