"""The README's three machines, end to end: set up by `init` alone, kept in step by their own timers.

desktop runs `anamnesis init`; laptop and server run the command desktop's init
prints, `anamnesis init --peer desktop:.anamnesis/memory`, reaching desktop over
ssh through a host alias (an sshd on 127.0.0.1 that starts each session in
desktop's home folder, as a real login would). Each machine then runs the
command of the systemd unit its own init wrote (ExecStart=, with the unit's
Environment=) on a short loop, as the timer would. A note written on the
laptop must become searchable on the server with no sync run by hand anywhere:
the laptop pushes it into desktop's incoming ref, desktop's own timer
integrates it, and the server fetches it from desktop.
"""

from __future__ import annotations

import getpass
import json
import os
import pty
import re
import select
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleet import SSH_HOST, SSHD, Machine, SshServer
from procs import run_anamnesis

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

LOOP_PAUSE = 0.5  # between two runs of a machine's unit command: the timer, much faster


def user_home(root: Path, name: str) -> Path:
    home = root / f"{name}-user"
    home.mkdir(exist_ok=True)
    return home


class Box:
    """One machine: a user's home folder with the store in ~/.anamnesis, as the README sets it up."""

    def __init__(self, root: Path, name: str, ssh_config: Path | None = None) -> None:
        self.name = name
        self.user = user_home(root, name)
        self.machine = Machine(name, self.user / ".anamnesis", f"ssh -F {ssh_config}" if ssh_config else None)

    def env(self) -> dict[str, str]:
        return self.machine.env(HOME=str(self.user))

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_anamnesis(args, self.env(), cwd=self.user, timeout=120)

    def init_in_a_terminal(self, *args: str) -> tuple[int, str, list[str]]:
        """`anamnesis init ARGS` in a terminal, as a person runs it: yes to the sync timer, no to
        anything else it asks; (exit code, what it printed, the questions it asked)."""
        master, slave = pty.openpty()
        env = {**self.env(), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "300"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "anamnesis", "init", *args], stdin=slave, stdout=slave, stderr=slave,
            env=env, cwd=self.user, close_fds=True,
        )
        os.close(slave)
        printed, pending, asked = "", "", []
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.5)
                if not ready:
                    if proc.poll() is not None:
                        break
                    continue
                try:
                    chunk = os.read(master, 4096).decode("utf-8", "replace")
                except OSError:  # the terminal closed: init is done
                    break
                printed += chunk
                pending += chunk
                if re.search(r"\[(?:Y/n|y/N)\]: $", pending):
                    question = pending.strip().splitlines()[-1]
                    asked.append(question)
                    os.write(master, b"y\n" if "Sync automatically" in question else b"n\n")
                    pending = ""
            code = proc.wait(timeout=60)
        finally:
            os.close(master)
            if proc.poll() is None:
                proc.kill()
        return code, printed.replace("\r\n", "\n"), asked

    def unit(self) -> tuple[list[str], dict[str, str]]:
        """ExecStart= and Environment= of the sync service this machine's init wrote."""
        units = Path(self.env()["XDG_CONFIG_HOME"]) / "systemd" / "user"
        (service,) = units.glob("anamnesis-sync*.service")
        text = service.read_text()
        env = {}
        for line in text.splitlines():
            if line.startswith("Environment="):
                (word,) = shlex.split(line.removeprefix("Environment="))
                name, _, value = word.replace("%%", "%").partition("=")
                env[name] = value
        exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
        argv = [part.replace("%%", "%").replace("$$", "$") for part in shlex.split(exec_start.removeprefix("ExecStart="))]
        return argv, env


class TimerLoop:
    """Runs a machine's unit command again and again, as its timer would (only faster)."""

    def __init__(self, box: Box) -> None:
        self.box = box
        self.argv, self.env = box.unit()
        # What systemd's user manager gives a service besides the unit's Environment= lines.
        self.env = {"HOME": str(box.user), "USER": getpass.getuser(), "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1", **self.env}
        self.runs: list[tuple[int, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"timer-{box.name}", daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            proc = subprocess.run(
                self.argv, env=self.env, cwd=self.box.user, capture_output=True, text=True, timeout=120,
                stdin=subprocess.DEVNULL,
            )
            self.runs.append((proc.returncode, proc.stdout + proc.stderr))
            self.stop.wait(LOOP_PAUSE)


@pytest.fixture
def desktop_sshd(tmp_path: Path) -> Iterator[tuple[SshServer, Path]]:
    """An sshd whose sessions start in desktop's home folder, and a client config with the host alias `desktop`."""
    if not SSHD.exists():
        pytest.skip("openssh-server is not installed (/usr/sbin/sshd); CI installs it")
    desktop_home = user_home(tmp_path, "desktop")
    force = f'ForceCommand cd {shlex.quote(str(desktop_home))} && eval "$SSH_ORIGINAL_COMMAND"'
    server = SshServer(tmp_path / "sshd", extra_config=(force,))
    server.start()
    config = tmp_path / "ssh_config"
    config.write_text(server.client_config.read_text().replace(f"Host {SSH_HOST}", "Host desktop"))
    try:
        yield server, config
    finally:
        server.stop()


def test_three_machines_set_up_as_the_readme_says_stay_in_step_by_their_timers(
    tmp_path: Path, desktop_sshd: tuple[SshServer, Path]
) -> None:
    _server, ssh_config = desktop_sshd
    desktop = Box(tmp_path, "desktop")
    laptop = Box(tmp_path, "laptop", ssh_config)
    server = Box(tmp_path, "server", ssh_config)

    # desktop: `anamnesis init` in a terminal; it offers the timer, and the person says yes
    # (--no-enable: the timer's files are written, but this test touches no service manager).
    code, printed, asked = desktop.init_in_a_terminal("--no-claude", "--no-enable")
    assert code == 0, printed
    assert any("Sync automatically" in question for question in asked), (asked, printed)
    said = " ".join(printed.split())
    match = re.search(r"on your other machines, run: anamnesis init --peer (\S+):(\S+)", said)
    assert match, said
    assert match.group(2) == ".anamnesis/memory"
    # The host it names is this host's name; the others reach it through their ssh alias `desktop`.
    for box in (laptop, server):
        code, printed, asked = box.init_in_a_terminal("--no-claude", "--no-enable", "--peer", f"desktop:{match.group(2)}")
        assert code == 0 and any("Sync automatically" in question for question in asked), (asked, printed)
        assert "joined desktop:.anamnesis/memory" in " ".join(printed.split()), printed

    loops = [TimerLoop(box) for box in (desktop, laptop, server)]
    assert loops[0].argv[1:] == ["-P", "-m", "anamnesis", "sync", "--quiet", "--fail-after", "24h"]
    assert loops[1].env["GIT_SSH_COMMAND"] == f"ssh -F {ssh_config}"  # the unit carries the ssh setup
    for loop in loops:
        loop.thread.start()
    try:
        proc = laptop.cli("new", "Relay check", "-G", "--body", "written on the laptop: axolotl\n", "--json")
        assert proc.returncode == 0, proc.stderr
        path = json.loads(proc.stdout)["path"]
        deadline = time.monotonic() + 120
        hits: list[str] = []
        while time.monotonic() < deadline:
            found = server.cli("search", "axolotl", "--json")
            assert found.returncode == 0, found.stderr
            hits = [hit["path"] for hit in json.loads(found.stdout)]
            if hits:
                break
            time.sleep(0.5)
        took = 120 - (deadline - time.monotonic())
    finally:
        for loop in loops:
            loop.stop.set()
        for loop in loops:
            loop.thread.join(timeout=150)
    report = {loop.box.name: [code for code, _ in loop.runs] for loop in loops}
    assert hits == [path], f"not on the server after {took:.0f} s; exit codes of the timers: {report}"
    assert (desktop.machine.memory / path).exists()
    for loop in loops:
        failed = [(code, out) for code, out in loop.runs if code != 0]
        assert not failed, f"{loop.box.name}'s timer: {failed[:3]}"
    # desktop shows the laptop among the machines that push into it, with nothing left waiting
    # (the server pushes only once it has a commit desktop lacks).
    laptop_id = json.loads((laptop.machine.home / "settings.json").read_text())["machine_id"]
    pushers = json.loads(desktop.cli("status", "--json").stdout)["pushes_here"]
    assert laptop_id in [p["machine"] for p in pushers] and all(p["waiting"] == 0 for p in pushers), pushers
    print(f"laptop's note found on the server {took:.1f} s after it was written")
