"""`anamnesis schedule install --watch`: the watch service instead of the timer.

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

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(60)


def rendered(fleet: Fleet, kind: str) -> dict[str, str]:  # noqa: F811
    a = fleet.machines.get("a") or fleet.machine("a")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json,sys; from anamnesis.paths import open_store; from anamnesis.schedule import plan;"
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


def test_the_watch_service_passes_systemd_analyze_verify(fleet: Fleet, tmp_path: Path) -> None:  # noqa: F811
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


def test_the_watch_agent_is_a_keepalive_plist(fleet: Fleet) -> None:  # noqa: F811
    ((path, text),) = rendered(fleet, "launchd").items()
    assert "/Library/LaunchAgents/anamnesis.watch" in path and path.endswith(".plist")
    data = plistlib.loads(text.encode())
    assert data["ProgramArguments"][1:] == ["-m", "anamnesis", "watch", "--quiet", "--interval", "600"]
    assert data["KeepAlive"] == {"SuccessfulExit": False}  # restarted when it fails, not after a clean stop
    assert data["RunAtLoad"] is True and "StartInterval" not in data
    assert data["EnvironmentVariables"]["ANAMNESIS_HOME"] == str(fleet.machines["a"].home)


def test_watch_service_replaces_the_timer_and_back(fleet: Fleet) -> None:  # noqa: F811
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
    assert not list(units.iterdir())
