"""Run `anamnesis sync` on a timer: a systemd user timer on Linux, a LaunchAgent on macOS.

The unit files are rendered from templates/ (shipped in the package) with
this store's ANAMNESIS_HOME, the Python that runs anamnesis now, the PATH (so
the timer finds git and ssh), and the ssh setup of the shell that installs
them (GIT_SSH_COMMAND, GIT_SSH, GIT_SSH_VARIANT, SSH_AUTH_SOCK, when set):
a timer runs outside the login session and would not see them otherwise.
`install` writes them and activates them; `--print` shows them without
writing anything.

The timer runs `sync --quiet --fail-after 24h`: an unreachable peer (exit
11) is a normal outcome, but one that no sync has reached for a day exits
13, which the unit counts as a failure, as it does at once a peer set up so
that it will never work (14) and a fault of this machine (8, 9): the unit
counts as success only `errors.TIMER_SUCCESS`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any, Literal
from xml.sax.saxutils import escape

from anamnesis.base.errors import TIMER_SUCCESS, ExitCode, UsageError
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.paths import Store
from anamnesis.base.resources import read_template
from anamnesis.sync.synclog import sync_log_summary

DEFAULT_EVERY = "5m"
MIN_SECONDS = 30
MAX_SECONDS = 24 * 3600  # a timer rarer than daily leaves machines too far apart
FAIL_AFTER = "24h"  # the timer fails when a peer has been unreachable for this long
CARRIED_ENV = ("GIT_SSH_COMMAND", "GIT_SSH", "GIT_SSH_VARIANT", "SSH_AUTH_SOCK")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """'90s', '30m', '24h', '2d' or a number of seconds -> seconds."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text.lower())
    if not match:
        raise UsageError(f"duration {text!r} is not like 90m, 24h or 2d")
    return int(match.group(1)) * _UNITS[match.group(2) or "s"]


def parse_interval(text: str) -> int:
    """'90s', '5m', '1h' or a number of seconds -> seconds (at least 30)."""
    match = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", text.lower())
    if not match:
        raise UsageError(f"interval {text!r} is not like 30s, 5m or 1h")
    seconds = parse_duration(text)
    if seconds < MIN_SECONDS:
        raise UsageError(f"interval {text!r} is shorter than {MIN_SECONDS}s")
    if seconds > MAX_SECONDS:
        raise UsageError(f"interval {text!r} is longer than a day: machines would go a day out of step (use 24h at most)")
    return seconds


def interval_text(seconds: int) -> str:
    """Seconds as the shortest of '1h', '5m', '90s'."""
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


Scheduler = Literal["systemd", "launchd"]


def platform_kind() -> Scheduler:
    """'launchd' on macOS, 'systemd' elsewhere."""
    return "launchd" if sys.platform == "darwin" else "systemd"


def _suffix(store: Store) -> str:
    """'' for the default store, a short hash of the home otherwise (several stores, several timers)."""
    if store.home.absolute() == (Path.home() / ".anamnesis").absolute():
        return ""
    return "-" + hashlib.sha1(str(store.home.absolute()).encode()).hexdigest()[:8]


def unit_name(store: Store) -> str:
    """The systemd unit base name (anamnesis-sync[-hash])."""
    return f"anamnesis-sync{_suffix(store)}"


def launchd_label(store: Store) -> str:
    """The LaunchAgent label (anamnesis.sync[.hash])."""
    return "anamnesis.sync" + _suffix(store).replace("-", ".")


def systemd_dir() -> Path:
    """Where systemd looks for this user's units."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def launchd_dir() -> Path:
    """Where launchd looks for this user's agents."""
    return Path.home() / "Library" / "LaunchAgents"


def command() -> list[str]:
    """How the timer runs sync: the Python running us now, so a venv or pipx install keeps working."""
    return [sys.executable, "-P", "-m", "anamnesis", "sync", "--quiet", "--fail-after", FAIL_AFTER]


def carried_env(store: Store) -> dict[str, str]:
    """The environment the units set: the store, PATH, and the ssh setup of this shell (when set)."""
    env = {
        "ANAMNESIS_HOME": str(store.home.absolute()),
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
    }
    for name in CARRIED_ENV:
        value = os.environ.get(name, "")
        if value:
            env[name] = value
    return env


def _systemd_quote(value: str) -> str:
    """One word for a systemd ExecStart= line (specifiers and variables escaped)."""
    value = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{value}"' if re.search(r"[\s\"';]", value) or not value else value


def _systemd_environment(env: dict[str, str]) -> str:
    """Environment= lines (systemd expands % specifiers there, but not $variables)."""
    lines = []
    for name, value in env.items():
        word = f"{name}={value}".replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
        lines.append(f'Environment="{word}"')
    return "\n".join(lines)


@dataclass
class Plan:
    """The files to write and the commands that activate them."""

    kind: Scheduler
    name: str
    interval: int
    files: dict[Path, str] = field(default_factory=dict)
    activate: list[list[str]] = field(default_factory=list)
    deactivate: list[list[str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "every": interval_text(self.interval),
            "files": {str(path): text for path, text in self.files.items()},
            "activate": [" ".join(cmd) for cmd in self.activate],
        }


def schedule_plan(store: Store, every: str = DEFAULT_EVERY, kind: str | None = None, watch: bool = False) -> Plan:
    """Render the unit files for this store (nothing is written); `watch`: the watch service instead."""
    seconds = parse_interval(every)
    kind = kind or platform_kind()
    if watch:
        return watch_plan(store, seconds, kind)
    if kind == "systemd":
        name = unit_name(store)
        folder = systemd_dir()
        values = {
            **_systemd_values(store, command()),
            "interval_seconds": str(seconds),
            "interval_text": interval_text(seconds),
            "service_name": f"{name}.service",
            "success_exit_status": " ".join(str(int(code)) for code in TIMER_SUCCESS),
        }
        result = Plan("systemd", name, seconds)
        result.files[folder / f"{name}.service"] = Template(
            read_template("anamnesis-sync.service")
        ).substitute(values)
        result.files[folder / f"{name}.timer"] = Template(read_template("anamnesis-sync.timer")).substitute(
            values
        )
        result.activate = [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", f"{name}.timer"],
        ]
        result.deactivate = [["systemctl", "--user", "disable", "--now", f"{name}.timer"]]
        return result
    if kind == "launchd":
        return _launchd_plan(
            store, launchd_label(store), "anamnesis-sync.plist", command(), "schedule.log", seconds
        )
    raise UsageError(f"unknown scheduler {kind!r} (systemd or launchd)")


def _systemd_values(store: Store, argv: list[str]) -> dict[str, str]:
    """What every unit template needs: the environment (store, PATH, ssh setup) and the command line."""
    return {
        "environment": _systemd_environment(carried_env(store)),
        "exec_start": " ".join(_systemd_quote(part) for part in argv),
    }


def _launchd_plan(
    store: Store, label: str, template: str, argv: list[str], log_name: str, seconds: int
) -> Plan:
    """A LaunchAgent plist from `template`, loaded into the user's GUI domain."""
    target = launchd_dir() / f"{label}.plist"
    values = {
        "label": escape(label),
        "program_arguments": "\n".join(f"    <string>{escape(part)}</string>" for part in argv),
        "environment": "\n".join(
            f"    <key>{escape(name)}</key>\n    <string>{escape(value)}</string>"
            for name, value in carried_env(store).items()
        ),
        "interval_seconds": str(seconds),
        "log": escape(str(store.log_dir / log_name)),
    }
    result = Plan("launchd", label, seconds)
    result.files[target] = Template(read_template(template)).substitute(values)
    domain = f"gui/{os.getuid()}"
    result.deactivate = [["launchctl", "bootout", f"{domain}/{label}"]]
    result.activate = [*result.deactivate, ["launchctl", "bootstrap", domain, str(target)]]
    return result


@dataclass
class Outcome:
    """What install/remove did, and what the user still has to do, if anything."""

    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    activated: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "written": self.written,
            "removed": self.removed,
            "activated": self.activated,
            "notes": self.notes,
        }


def _run(commands: list[list[str]], ignore_first_failure: bool = False) -> str | None:
    """Run activation commands; None on success, else why they failed."""
    for i, cmd in enumerate(commands):
        if shutil.which(cmd[0]) is None:
            return f"{cmd[0]} is not available"
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{' '.join(cmd)}: {exc}"
        if proc.returncode != 0 and not (ignore_first_failure and i == 0):
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            return f"`{' '.join(cmd)}` failed: {detail[-1] if detail else proc.returncode}"
    return None


def install_schedule(
    store: Store,
    every: str = DEFAULT_EVERY,
    *,
    activate: bool = True,
    kind: str | None = None,
    watch: bool = False,
) -> Outcome:
    """Write the timer/agent files (or, with `watch`, the watch service's) and (with `activate`) enable them.

    The timer and the watch service replace each other: installing one removes the other.
    """
    store.require()
    rendered = schedule_plan(store, every, kind, watch=watch)
    outcome = Outcome()
    made = _made_dirs(store)
    for path, text in rendered.files.items():
        made += [str(folder) for folder in (path.parent, *path.parent.parents) if not folder.exists()]
        atomic_write_text(path, text)
        outcome.written.append(str(path))
    _save_made_dirs(store, made)
    if activate:
        problem = _run(rendered.activate, ignore_first_failure=rendered.kind == "launchd")
        if problem is None:
            outcome.activated = True
        else:
            manual = "; ".join(" ".join(cmd) for cmd in rendered.activate)
            outcome.notes.append(f"files written, but not activated ({problem}); activate with: {manual}")
    else:
        outcome.notes.append(
            "not activated (--no-enable): " + "; ".join(" ".join(c) for c in rendered.activate)
        )
    _remove_files(schedule_plan(store, DEFAULT_EVERY, kind, watch=not watch), activate, outcome)  # one or the other
    return outcome


def remove_schedule(store: Store, *, activate: bool = True, kind: str | None = None) -> Outcome:
    """Deactivate and delete the timer/agent files and the watch service's (nothing else is touched)."""
    rendered = schedule_plan(store, DEFAULT_EVERY, kind)
    outcome = Outcome()
    present = [path for path in rendered.files if path.exists()]
    stopped = schedule_inactive(store, kind) if activate and present else None
    if stopped:  # never ran (no user session bus, never enabled): nothing to stop, nothing to warn of
        activate = False
        outcome.notes.append(f"it was not running ({stopped}): only its files are removed")
    if activate and present:
        problem = _run(rendered.deactivate)
        if problem:
            outcome.notes.append(f"could not deactivate ({problem})")
    for path in present:
        path.unlink()
        outcome.removed.append(str(path))
    if activate and present and rendered.kind == "systemd":
        _run([["systemctl", "--user", "daemon-reload"]])
    _remove_files(schedule_plan(store, DEFAULT_EVERY, kind, watch=True), activate, outcome)
    if not outcome.removed:
        outcome.notes.append("no schedule was installed for this store")
    _remove_made_dirs(store)
    return outcome


_MADE_DIRS = "schedule-dirs.json"  # the folders installing the schedule created, for its removal


def _made_dirs(store: Store) -> list[str]:
    try:
        data = json.loads((store.state_dir / _MADE_DIRS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(folder) for folder in data] if isinstance(data, list) else []


def _save_made_dirs(store: Store, made: list[str]) -> None:
    if made:
        atomic_write_text(store.state_dir / _MADE_DIRS, json.dumps(sorted(set(made))))


def _remove_made_dirs(store: Store) -> None:
    """Remove the folders installing the schedule created, once empty (systemctl leaves the
    `*.wants` folder it made for the timer, empty, in the first of them); never a folder
    that holds anything, nor one that was there before."""
    made = [Path(folder) for folder in _made_dirs(store)]
    for folder in sorted(made, key=lambda f: len(f.parts), reverse=True):  # deepest first
        for wants in folder.glob("*.wants") if folder.is_dir() else ():
            with contextlib.suppress(OSError):
                wants.rmdir()
        with contextlib.suppress(OSError):
            folder.rmdir()
    if not any(folder.exists() for folder in made):
        (store.state_dir / _MADE_DIRS).unlink(missing_ok=True)


def schedule_files(store: Store, kind: str | None = None) -> list[Path]:
    """The timer's and the watch service's files present for this store (what `remove` would delete)."""
    plans = (schedule_plan(store, DEFAULT_EVERY, kind), schedule_plan(store, DEFAULT_EVERY, kind, watch=True))
    return [path for rendered in plans for path in rendered.files if path.exists()]


def schedule_installed(store: Store, kind: str | None = None) -> bool:
    """Whether this store has the sync timer or the watch service (their files; no systemctl is asked)."""
    return any(
        all(path.exists() for path in rendered.files)
        for rendered in (schedule_plan(store, DEFAULT_EVERY, kind), schedule_plan(store, DEFAULT_EVERY, kind, watch=True))
    )


def schedule_inactive(store: Store, kind: str | None = None) -> str | None:
    """Why the installed sync timer (or watch service) is not running, or None when it runs, is
    not installed, or this machine cannot tell (no systemctl: macOS's launchd is not asked).

    Files written but never enabled (`--no-enable`, a login without a user session bus, a
    timer stopped by hand) sync nothing, and would otherwise pass for a working schedule."""
    if not schedule_installed(store, kind) or not shutil.which("systemctl"):
        return None
    names = [f"{schedule_plan(store, DEFAULT_EVERY, kind).name}.timer"]
    watch = schedule_plan(store, DEFAULT_EVERY, kind, watch=True)
    if all(path.exists() for path in watch.files):
        names.append(f"{watch.name}.service")
    states = []
    for name in names:
        try:
            state = _unit_state(name, "is-active", empty="unknown")
        except (OSError, subprocess.TimeoutExpired):
            return None
        if state == "active":
            return None
        states.append(state)
    if any("bus" in state.lower() for state in states):
        return "systemctl --user has no session bus to talk to here"
    return f"{names[0]} is {states[0] or 'not active'}"


def schedule_status(store: Store, kind: str | None = None) -> dict[str, Any]:
    """Installed? active? how often? and the last sync from the log."""
    rendered = schedule_plan(store, DEFAULT_EVERY, kind)
    files = {str(path): path.exists() for path in rendered.files}
    info: dict[str, Any] = {
        "kind": rendered.kind,
        "name": rendered.name,
        "installed": all(files.values()),
        "files": files,
    }
    every = None
    for path in rendered.files:
        if path.exists():
            text = path.read_text(encoding="utf-8", errors="replace")
            match = re.search(r"OnUnitActiveSec=(\d+)s|<key>StartInterval</key>\s*<integer>(\d+)<", text)
            if match:
                every = interval_text(int(match.group(1) or match.group(2)))
            agent = re.search(r'SSH_AUTH_SOCK=([^"\n]+)"|<key>SSH_AUTH_SOCK</key>\s*<string>([^<]+)<', text)
            if agent and not Path(agent.group(1) or agent.group(2)).exists():
                info["warning"] = (
                    f"the ssh agent the schedule was installed with ({agent.group(1) or agent.group(2)}) is gone: "
                    "peers that need its key fail; re-run `anamnesis schedule install` while an agent runs, "
                    "or give the peers a key without a passphrase"
                )
    info["every"] = every
    if rendered.kind == "systemd" and info["installed"] and shutil.which("systemctl"):
        for what in ("is-enabled", "is-active"):
            info[what.removeprefix("is-")] = _unit_state(f"{rendered.name}.timer", what)
        info["last_run"] = _last_run(f"{rendered.name}.service")
    watch = schedule_plan(store, DEFAULT_EVERY, kind, watch=True)
    info["watch_service"] = {"name": watch.name, "installed": all(p.exists() for p in watch.files)}
    if watch.kind == "systemd" and info["watch_service"]["installed"] and shutil.which("systemctl"):
        proc = subprocess.run(
            ["systemctl", "--user", "is-active", f"{watch.name}.service"],
            capture_output=True,
            text=True,
            timeout=15,
        )
        info["watch_service"]["active"] = proc.stdout.strip() or "unknown"
    info.update(sync_log_summary(store))
    return info


def _unit_state(unit: str, what: str, empty: str = "?") -> str:
    """What `systemctl --user WHAT UNIT` answers (`active`, `enabled`, …): its first line, else the
    last line of its error (no session bus), else `empty`."""
    proc = subprocess.run(["systemctl", "--user", what, unit], capture_output=True, text=True, timeout=15, check=False)
    lines = proc.stdout.strip().splitlines() or proc.stderr.strip().splitlines()[-1:] or [empty]
    return lines[0]


def _last_run(service: str) -> str:
    """How the sync service's last run ended, as systemd saw it."""
    proc = subprocess.run(
        ["systemctl", "--user", "show", "-p", "Result", "-p", "ExecMainStatus", service],
        capture_output=True, text=True, timeout=15, check=False,
    )
    fields = dict(line.partition("=")[::2] for line in proc.stdout.splitlines() if "=" in line)
    result, code = fields.get("Result", ""), fields.get("ExecMainStatus", "")
    if not result:
        return "unknown"
    if result == "success":
        return f"ok (exit {code})" if code not in ("", "0") else "ok"
    why = _FAILED_RUN.get(int(code), "") if code.isdigit() else ""
    return f"failed ({result}, exit {code}){' — ' + why if why else ''}"


_FAILED_RUN: dict[int, str] = {
    ExitCode.STALE_PEER: "a peer unreachable for over a day (`anamnesis status`)",
    ExitCode.PEER_MISCONFIGURED: "a peer set up so that it will never work (`anamnesis peers list`)",
    ExitCode.DISK_FULL: "this machine's disk is full",
    ExitCode.LOCAL_FAULT: "this machine cannot write its own store (`anamnesis doctor`)",
}


# -- the watch service: `anamnesis watch` kept running instead of the timer ------------------


def watch_command(seconds: int) -> list[str]:
    """How the service runs watch: quietly, with the safety-net sync every `seconds`."""
    return [sys.executable, "-P", "-m", "anamnesis", "watch", "--quiet", "--interval", str(seconds)]


def watch_plan(store: Store, seconds: int, kind: str) -> Plan:
    """A systemd user service (Restart=on-failure) or a LaunchAgent (KeepAlive) that runs `anamnesis watch`."""
    if kind == "systemd":
        name = f"anamnesis-watch{_suffix(store)}"
        values = _systemd_values(store, watch_command(seconds))
        result = Plan("systemd", name, seconds)
        result.files[systemd_dir() / f"{name}.service"] = Template(
            read_template("anamnesis-watch.service")
        ).substitute(values)
        result.activate = [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", f"{name}.service"],
        ]
        result.deactivate = [["systemctl", "--user", "disable", "--now", f"{name}.service"]]
        return result
    if kind == "launchd":
        label = "anamnesis.watch" + _suffix(store).replace("-", ".")
        return _launchd_plan(
            store, label, "anamnesis-watch.plist", watch_command(seconds), "watch-service.log", seconds
        )
    raise UsageError(f"unknown scheduler {kind!r} (systemd or launchd)")


def _remove_files(rendered: Plan, activate: bool, outcome: Outcome) -> None:
    """Deactivate and delete one plan's files if they are there (the other of timer / watch service)."""
    present = [path for path in rendered.files if path.exists()]
    if not present:
        return
    if activate:
        problem = _run(rendered.deactivate)
        if problem:
            outcome.notes.append(f"could not deactivate {rendered.name} ({problem})")
    for path in present:
        path.unlink()
        outcome.removed.append(str(path))
    if activate and rendered.kind == "systemd":
        _run([["systemctl", "--user", "daemon-reload"]])
