"""`anamnesis schedule install`: the sync timer's ssh setup and health, and `--watch`, the watch service instead.

The rendered units are checked by the real `systemd-analyze verify` and
`plistlib`; install/remove run with --no-enable (this suite never touches the
user's service manager) against a per-test XDG_CONFIG_HOME.
"""

from __future__ import annotations

import json
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fleet import Fleet, fleet  # noqa: F401
from lan import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(60)


def rendered(fleet: Fleet, kind: str) -> dict[str, str]:
    a = fleet.machines.get("a") or fleet.machine("a")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json,sys; from anamnesis.base.paths import open_store; from anamnesis.sync.schedule import schedule_plan as plan;"
            f"p = plan(open_store(sys.argv[1]), '10m', kind='{kind}', watch=True);"
            "print(json.dumps({str(k): v for k, v in p.files.items()}))",
            str(a.home),
        ],
        capture_output=True,
        text=True,
        env=a.env(),
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_the_watch_service_passes_systemd_analyze_verify(fleet: Fleet, tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        skip_or_fail("systemd-analyze is not installed (the systemd package; CI installs it)")
    units = rendered(fleet, "systemd")
    ((path, text),) = units.items()
    assert Path(path).name.startswith("anamnesis-watch") and path.endswith(".service")
    assert "Restart=on-failure" in text and "WantedBy=default.target" in text
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_start.endswith("-m anamnesis watch --quiet --interval 600")
    target = tmp_path / Path(path).name
    target.write_text(text)
    proc = subprocess.run(["systemd-analyze", "verify", str(target)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Unknown" not in proc.stderr and "bad" not in proc.stderr.lower(), proc.stderr


def test_the_watch_agent_is_a_keepalive_plist(fleet: Fleet) -> None:
    ((path, text),) = rendered(fleet, "launchd").items()
    assert "/Library/LaunchAgents/anamnesis.watch" in path and path.endswith(".plist")
    data = plistlib.loads(text.encode())
    assert data["ProgramArguments"][1:] == ["-P", "-m", "anamnesis", "watch", "--quiet", "--interval", "600"]
    assert data["KeepAlive"] == {"SuccessfulExit": False}  # restarted when it fails, not after a clean stop
    assert data["RunAtLoad"] is True and "StartInterval" not in data
    assert data["EnvironmentVariables"]["ANAMNESIS_HOME"] == str(fleet.machines["a"].home)


def test_watch_service_replaces_the_timer_and_back(fleet: Fleet) -> None:
    a = fleet.machine("a")
    units = Path(a.env()["XDG_CONFIG_HOME"]) / "systemd" / "user"
    timer = a.cli("schedule", "install", "--no-enable", "--json")
    assert timer.returncode == 0, timer.stderr
    timer_files = json.loads(timer.stdout)["written"]
    printed = a.cli("schedule", "install", "--watch", "--print")
    assert printed.returncode == 0 and "anamnesis watch --quiet" in printed.stdout.replace('"', "")
    proc = a.cli("schedule", "install", "--watch", "--every", "15m", "--no-enable", "--json")
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    assert [Path(p).name for p in outcome["written"]] == [Path(p).name for p in units.glob("anamnesis-watch*.service")]
    assert sorted(outcome["removed"]) == sorted(timer_files)  # instead of the timer, not beside it
    assert "--interval 900" in Path(outcome["written"][0]).read_text()
    info = json.loads(a.cli("schedule", "status", "--json").stdout)
    assert info["installed"] is False and info["watch_service"]["installed"] is True
    back = json.loads(a.cli("schedule", "install", "--no-enable", "--json").stdout)
    assert back["removed"] == outcome["written"]
    gone = json.loads(a.cli("schedule", "remove", "--no-enable", "--json").stdout)
    assert sorted(gone["removed"]) == sorted(back["written"])
    assert not units.exists()  # emptied, and made by installing: removed with the files


# -- the sync timer carries the ssh setup, and fails only for a peer gone for a day ----------------


def sync_units(fleet: Fleet, kind: str, **env: str) -> dict[str, str]:
    """The sync timer's files as `schedule install` renders them in a shell with `env`."""
    a = fleet.machines.get("a") or fleet.machine("a")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json,sys; from anamnesis.base.paths import open_store; from anamnesis.sync.schedule import schedule_plan as plan;"
            f"p = plan(open_store(sys.argv[1]), '5m', kind='{kind}');"
            "print(json.dumps({str(k): v for k, v in p.files.items()}))",
            str(a.home),
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in a.env(**env).items() if k in env or k not in CARRIED},
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


CARRIED = ("GIT_SSH_COMMAND", "GIT_SSH", "GIT_SSH_VARIANT", "SSH_AUTH_SOCK")
SSH_SETUP = {
    "GIT_SSH_COMMAND": 'ssh -F "/home/me/my ssh/config" -i ~/.ssh/id_%h -o ProxyCommand="nc %h %p"',
    "SSH_AUTH_SOCK": "/run/user/1000/keyring/ssh",
}


def test_the_sync_unit_carries_the_ssh_setup_and_fails_only_on_a_stale_peer(
    fleet: Fleet, tmp_path: Path
) -> None:
    if shutil.which("systemd-analyze") is None:
        skip_or_fail("systemd-analyze is not installed (the systemd package; CI installs it)")
    units = sync_units(fleet, "systemd", **SSH_SETUP)
    service = next(text for path, text in units.items() if path.endswith(".service"))
    lines = service.splitlines()
    exec_start = next(line for line in lines if line.startswith("ExecStart="))
    assert exec_start.endswith("-m anamnesis sync --quiet --fail-after 24h")
    assert "SuccessExitStatus=10 11 143" in lines  # 13, a peer unreachable for a day, fails the unit
    # systemd expands % specifiers in Environment= (so they are doubled) but not $variables.
    assert (
        'Environment="GIT_SSH_COMMAND=ssh -F \\"/home/me/my ssh/config\\" -i ~/.ssh/id_%%h -o ProxyCommand=\\"nc %%h %%p\\""'
        in lines
    )
    assert 'Environment="SSH_AUTH_SOCK=/run/user/1000/keyring/ssh"' in lines
    for path, text in units.items():
        (tmp_path / Path(path).name).write_text(text)
    proc = subprocess.run(
        ["systemd-analyze", "verify", *[str(tmp_path / Path(p).name) for p in units]],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Unknown" not in proc.stderr and "bad" not in proc.stderr.lower(), proc.stderr
    # Without an ssh setup in the shell, nothing of it is written.
    plain = next(text for path, text in sync_units(fleet, "systemd").items() if path.endswith(".service"))
    assert "GIT_SSH" not in plain and "SSH_AUTH_SOCK" not in plain


def test_the_sync_agent_carries_the_ssh_setup(fleet: Fleet) -> None:
    ((_path, text),) = sync_units(fleet, "launchd", **SSH_SETUP).items()
    data = plistlib.loads(text.encode())
    assert data["ProgramArguments"][-3:] == ["--quiet", "--fail-after", "24h"]
    env = data["EnvironmentVariables"]
    assert (
        env["GIT_SSH_COMMAND"] == SSH_SETUP["GIT_SSH_COMMAND"]
        and env["SSH_AUTH_SOCK"] == SSH_SETUP["SSH_AUTH_SOCK"]
    )
    assert env["ANAMNESIS_HOME"] == str(fleet.machines["a"].home)
    ((_, watch_text),) = rendered(fleet, "launchd").items()
    assert "GIT_SSH_COMMAND" not in plistlib.loads(watch_text.encode())["EnvironmentVariables"]


def test_schedule_status_warns_when_the_agent_it_carries_is_gone(fleet: Fleet, tmp_path: Path) -> None:
    a = fleet.machine("a")
    gone = str(tmp_path / "agent.sock")
    proc = subprocess.run(
        [sys.executable, "-m", "anamnesis", "schedule", "install", "--no-enable", "--json"],
        capture_output=True,
        text=True,
        env=a.env(SSH_AUTH_SOCK=gone),
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    service = next(Path(p) for p in json.loads(proc.stdout)["written"] if p.endswith(".service"))
    assert f'Environment="SSH_AUTH_SOCK={gone}"' in service.read_text()
    info = json.loads(a.cli("schedule", "status", "--json").stdout)
    assert gone in info["warning"] and "schedule install" in info["warning"], info
