"""scripts/install and `anamnesis uninstall --everything`: a user's own venv and link, no root, no PEP 668
override; clear errors when Python 3.11+, its venv module or git is missing; removal of exactly what
install and init added, the notes kept.

The end-to-end test runs as a non-root user (a throwaway one made with useradd when we are root)
whose system Python is marked externally managed, from a fresh clone in that user's home."""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import RunCli, cli_env
from procs import clone_working_tree

from anamnesis.app import installation

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "install"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def _script(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(INSTALL), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def _only(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only these tools (links to the real ones): a machine that lacks the rest."""
    folder = tmp_path / ("only-" + "-".join(tools))
    folder.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found, tool
        (folder / tool).symlink_to(found)
    return str(folder)


def _user_env(tmp_path: Path, path: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "user"), "PATH": path, "LANG": "C.UTF-8"}


# -- scripts/install: its help and its one-line errors ---------------------------------------------


def test_help_says_what_it_does_and_an_unknown_option_is_one_line(tmp_path: Path) -> None:
    env = _user_env(tmp_path, os.environ["PATH"])
    shown = _script("--help", env=env, cwd=tmp_path)
    assert shown.returncode == 0
    assert "--semantic" in shown.stdout and "anamnesis uninstall --everything" in shown.stdout
    wrong = _script("--frobnicate", env=env, cwd=tmp_path)
    assert wrong.returncode == 1
    assert wrong.stderr.strip().splitlines() == ["install: error: unknown option --frobnicate (see ./scripts/install --help)"]
    assert not (tmp_path / "user").exists()


def test_no_git_and_no_python_are_each_one_line_and_a_nonzero_exit(tmp_path: Path) -> None:
    no_git = _script(env=_user_env(tmp_path, _only(tmp_path, "dirname")), cwd=tmp_path)
    assert no_git.returncode == 1
    assert len(no_git.stderr.strip().splitlines()) == 1
    assert "git is missing" in no_git.stderr and "apt install git" in no_git.stderr

    no_python = _script(env=_user_env(tmp_path, _only(tmp_path, "dirname", "git")), cwd=tmp_path)
    assert no_python.returncode == 1
    assert len(no_python.stderr.strip().splitlines()) == 1
    assert "needs Python 3.11 or newer" in no_python.stderr and "PYTHON=" in no_python.stderr

    named = _script(env={**_user_env(tmp_path, os.environ["PATH"]), "PYTHON": "python3.99"}, cwd=tmp_path)
    assert (named.returncode, named.stderr) == (1, "install: error: PYTHON=python3.99: no such command\n")
    assert not (tmp_path / "user").exists()


def test_a_python_without_its_venv_module_is_told_which_package_to_install(tmp_path: Path) -> None:
    # Debian's python3 without python3-venv: `import ensurepip` fails, so `python3 -m venv` would too
    stub = tmp_path / "no-ensurepip"
    stub.mkdir()
    (stub / "ensurepip.py").write_text("raise ImportError('ensurepip is not available')\n")
    env = {**_user_env(tmp_path, os.environ["PATH"]), "PYTHONPATH": str(stub)}
    proc = _script(env=env, cwd=tmp_path)
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1
    assert re.search(r"lacks its venv module: on Debian/Ubuntu `sudo apt install python3(\.\d+)?-venv`", proc.stderr)
    assert not (tmp_path / "user" / ".local").exists()


def test_a_command_someone_else_linked_is_not_replaced(tmp_path: Path) -> None:
    link = tmp_path / "user" / ".local" / "bin" / "anamnesis"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "pipx" / "venvs" / "anamnesis-memory" / "bin" / "anamnesis")
    proc = _script(env=_user_env(tmp_path, os.environ["PATH"]), cwd=tmp_path)
    assert proc.returncode == 1
    assert "already exists and is not from this script" in proc.stderr and "pipx uninstall" in proc.stderr
    assert link.is_symlink() and not (tmp_path / "user" / ".local" / "share" / "anamnesis").exists()


# -- uninstall --everything, from a venv laid out as scripts/install lays it out ---------------------


@dataclass
class ScriptVenv:
    venv: Path
    link: Path
    python: Path


@pytest.fixture
def script_venv(tmp_path: Path) -> ScriptVenv:
    """A real venv with scripts/install's marker and link, running this checkout's code (PYTHONPATH)."""
    venv = tmp_path / "data" / "anamnesis" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    command = venv / "bin" / "anamnesis"
    command.write_text(f"#!{venv / 'bin' / 'python'}\nfrom anamnesis.cli import main\nmain()\n")
    command.chmod(0o755)
    link = tmp_path / "bin" / "anamnesis"
    link.parent.mkdir()
    link.symlink_to(command)
    (venv / installation.MARKER).write_text(f"# written by scripts/install\nlink={link}\n")
    return ScriptVenv(venv, link, venv / "bin" / "python")


def _from_venv(venv: ScriptVenv, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(home, PYTHONPATH=f"{ROOT}:{sysconfig.get_path('purelib')}", HOME=str(home.parent / "user"))
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [str(venv.python), "-m", "anamnesis", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_uninstall_everything_removes_the_venv_link_timer_and_agents_and_keeps_the_notes(
    tmp_path: Path, script_venv: ScriptVenv
) -> None:
    home = tmp_path / "home"
    assert _from_venv(script_venv, home, "init", "--agent", "claude", "--no-schedule").returncode == 0
    assert _from_venv(script_venv, home, "new", "Kept", "--global", "--body", "still here").returncode == 0
    timer = _from_venv(script_venv, home, "schedule", "install", "--no-enable", "--json")
    units = [Path(p) for p in json.loads(timer.stdout)["written"]]
    claude_json = home.parent / "claude-config" / ".claude.json"
    assert units and all(p.exists() for p in units) and "anamnesis" in claude_json.read_text()

    planned = _from_venv(script_venv, home, "uninstall", "--everything", "--print", "--json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert f"remove the program: {script_venv.venv} (the virtualenv scripts/install made)" in plan["planned"]
    assert f"remove the command: {script_venv.link}" in plan["planned"]
    assert all(f"remove {p}" in plan["planned"] for p in units)
    assert script_venv.venv.is_dir() and script_venv.link.is_symlink() and all(p.exists() for p in units)

    done = _from_venv(script_venv, home, "uninstall", "--everything")
    assert done.returncode == 0, done.stderr
    assert not script_venv.venv.exists() and not script_venv.link.is_symlink()
    assert not script_venv.venv.parent.exists()  # the folder made for the venv alone
    assert not any(p.exists() for p in units)
    assert not claude_json.exists()  # init had created it for us alone
    assert f"removed {script_venv.venv}" in done.stdout
    assert f"kept {home / 'memory'}: your notes" in done.stdout and f"rm -rf {home}" in done.stdout
    assert "still here" in "".join(p.read_text() for p in (home / "memory").rglob("kept-*.md"))
    assert done.stderr == ""


def test_uninstall_everything_leaves_a_link_that_is_no_longer_ours_and_says_so_in_json(
    tmp_path: Path, script_venv: ScriptVenv
) -> None:
    script_venv.link.unlink()
    script_venv.link.symlink_to(tmp_path / "elsewhere")  # another install took the name since
    done = _from_venv(script_venv, tmp_path / "home", "uninstall", "--everything", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["program"]["kind"] == "script" and report["program"]["link"] is None
    assert f"removed {script_venv.venv}" in report["done"] and report["kept"] is None
    assert script_venv.link.is_symlink() and not script_venv.venv.exists()


def test_an_install_we_did_not_make_is_left_alone_with_the_command_that_removes_it(
    tmp_path: Path,
) -> None:
    pipx = tmp_path / "share" / "pipx" / "venvs" / "anamnesis-memory"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(pipx)], check=True)
    found = installation.current_installation(pipx)
    assert found.kind == "pipx" and not found.removable()
    assert installation.remove_installation(found) == ["the program was installed with pipx: remove it with `pipx uninstall anamnesis-memory`"]
    assert pipx.is_dir()
    plain = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(plain)], check=True)
    assert installation.current_installation(plain).kind == "venv"
    assert f"{plain}/bin/python -m pip uninstall anamnesis-memory" in installation.current_installation(plain).hint()


def test_everything_with_agent_is_refused(run_cli: RunCli) -> None:
    proc = run_cli("uninstall", "--everything", "--agent", "codex")
    assert proc.returncode == 2
    assert "leave out --agent" in proc.stderr


# -- end to end: a non-root user, an externally managed system Python, a fresh clone --------------


def _externally_managed_python() -> str | None:
    """A python3 (3.11+, with pip and venv) on the system PATH whose install is marked externally managed."""
    for name in ("python3", "python3.13", "python3.12", "python3.11"):
        found = shutil.which(name, path=SYSTEM_PATH)
        if not found:
            continue
        probe = subprocess.run(
            [
                found,
                "-c",
                "import os, sys, sysconfig, pip, ensurepip; print(sys.version_info >= (3, 11) and "
                "os.path.isfile(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))",
            ],
            capture_output=True,
            text=True,
        )
        if probe.stdout.strip() == "True":
            return found
    return None


@dataclass
class User:
    """A non-root user and its home, to run commands as."""

    home: Path
    uid: int | None  # None: ourselves (already not root)
    gid: int | None

    def run(self, *argv: str, cwd: Path | None = None, path: str = SYSTEM_PATH, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        env = {"HOME": str(self.home), "PATH": path, "LANG": "C.UTF-8", "SHELL": "/bin/bash"}
        for name, value in os.environ.items():  # how this machine reaches the package index
            if (name.startswith("PIP_") and name not in ("PIP_CACHE_DIR", "PIP_BREAK_SYSTEM_PACKAGES", "PIP_USER")) or name.lower().endswith("_proxy"):
                env[name] = value
        extra = {"user": self.uid, "group": self.gid, "extra_groups": []} if self.uid is not None else {}
        return subprocess.run(
            list(argv), cwd=cwd or self.home, env=env, capture_output=True, text=True, timeout=timeout, **extra  # type: ignore[arg-type]
        )


@pytest.fixture
def new_user(tmp_path: Path) -> Iterator[User]:
    """A throwaway non-root user (useradd -m) when we are root; else ourselves with a fresh HOME."""
    if os.geteuid() != 0:
        home = tmp_path / "user"
        home.mkdir()
        yield User(home, None, None)
        return
    if shutil.which("useradd") is None:
        pytest.skip("running as root without useradd: no non-root user to install as")
    name = f"anam-{secrets.token_hex(4)}"
    subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True, capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield User(Path(entry.pw_dir), entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)


@pytest.mark.e2e
@pytest.mark.timeout(900)  # three pip installs from the package index; about 45 s on an idle machine
def test_install_upgrade_semantic_and_uninstall_as_a_new_user_with_an_externally_managed_python(
    new_user: User,
) -> None:
    python = _externally_managed_python()
    if python is None:
        pytest.skip("no externally managed Python 3.11+ with pip here (Debian: apt install python3-venv python3-pip)")
    assert new_user.run("id", "-u").stdout.strip() != "0"
    clone = new_user.home / "anamnesis"
    clone_working_tree(clone)
    if new_user.uid is not None:
        subprocess.run(["chown", "-R", f"{new_user.uid}:{new_user.gid}", str(clone)], check=True)
    bin_dir = new_user.home / ".local" / "bin"
    venv = new_user.home / ".local" / "share" / "anamnesis" / "venv"

    # what the README used to say fails here: PEP 668
    refused = new_user.run(python, "-m", "pip", "install", "--user", ".", cwd=clone)
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stdout + refused.stderr

    # a venv without pip left where ours goes (say, by a `python3 -m venv` that stopped half way)
    assert new_user.run(python, "-m", "venv", "--without-pip", str(venv)).returncode == 0
    first = new_user.run("./scripts/install", cwd=clone)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"creating {venv} with {python}" in first.stdout
    assert f"note: {bin_dir} is not on your PATH" in first.stdout
    assert 'export PATH="$HOME/.local/bin:$PATH"' in first.stdout and "~/.bashrc" in first.stdout
    assert "next: anamnesis init" in first.stdout
    assert (bin_dir / "anamnesis").resolve() == (venv / "bin" / "anamnesis").resolve()
    on_path = f"{bin_dir}:{SYSTEM_PATH}"
    version = new_user.run("anamnesis", "--version", path=on_path)
    assert version.returncode == 0 and version.stdout.startswith("anamnesis ")
    assert f"python:  {venv}/bin/python" in version.stdout
    assert not (clone / "build").exists()  # built from a copy: the clone stays as it was

    # not editable: the clone can move away
    moved = new_user.home / "moved"
    clone.rename(moved)
    assert new_user.run("anamnesis", "--version", path=on_path).returncode == 0
    moved.rename(clone)

    # --semantic adds the extra, in the same venv; another `anamnesis` earlier on PATH is pointed out
    venv_inode = venv.stat().st_ino
    shadow = new_user.home / "old-bin"
    shadow.mkdir()
    (shadow / "anamnesis").write_text("#!/bin/sh\necho the other program\n")
    (shadow / "anamnesis").chmod(0o755)
    if new_user.uid is not None:
        os.chown(shadow, new_user.uid, new_user.gid or 0)
    semantic = new_user.run("./scripts/install", "--semantic", cwd=clone, path=f"{shadow}:{on_path}")
    assert semantic.returncode == 0, semantic.stdout + semantic.stderr
    assert "not on your PATH" not in semantic.stdout
    assert f"note: `anamnesis` in your shell is {shadow / 'anamnesis'}, which comes before {bin_dir}" in semantic.stdout
    assert new_user.run(str(venv / "bin" / "python"), "-c", "import numpy, tokenizers").returncode == 0

    # a newer clone (as after `git pull`): running it again upgrades in place and keeps --semantic
    init_py = clone / "anamnesis" / "__init__.py"
    init_py.write_text(re.sub(r'__version__ = "([^"]+)"', r'__version__ = "\1.post7"', init_py.read_text()))
    again = new_user.run("./scripts/install", cwd=clone, path=on_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"upgrading Anamnesis in {venv}" in again.stdout and "with semantic search" in again.stdout
    assert ".post7" in new_user.run("anamnesis", "--version", path=on_path).stdout.splitlines()[0]
    assert venv.stat().st_ino == venv_inode
    assert new_user.run(str(venv / "bin" / "python"), "-c", "import numpy").returncode == 0

    # init (agents, a timer), a note; then remove everything but the notes
    init = new_user.run("anamnesis", "init", "--schedule", path=on_path)
    assert init.returncode == 0, init.stdout + init.stderr
    status = json.loads(new_user.run("anamnesis", "schedule", "status", "--json", path=on_path).stdout)
    units = [Path(p) for p in status["files"]]
    assert units and all(p.exists() for p in units)
    claude_json = new_user.home / ".claude.json"
    assert "anamnesis" in claude_json.read_text()
    assert new_user.run("anamnesis", "new", "Survivor", "--global", "--body", "kept", path=on_path).returncode == 0

    gone = new_user.run("anamnesis", "uninstall", "--everything", path=on_path)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert not venv.exists() and not (bin_dir / "anamnesis").is_symlink()
    assert not any(p.exists() for p in units)
    assert not claude_json.exists() or "anamnesis" not in claude_json.read_text()
    memory = new_user.home / ".anamnesis" / "memory"
    assert list(memory.rglob("survivor-*.md"))
    assert f"kept {memory}: your notes" in gone.stdout
    assert f"rm -rf {new_user.home / '.anamnesis'}" in gone.stdout
    assert new_user.run("sh", "-c", "command -v anamnesis", path=on_path).returncode != 0
