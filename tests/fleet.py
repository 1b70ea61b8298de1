"""A fleet of machines on one host, for sync tests: real git, real processes, real sshd.

Each machine is its own ANAMNESIS_HOME (own settings, own index, own repo).
Peers are file paths, bare hub repos, or ssh URLs served by an sshd this
module starts on 127.0.0.1 with throw-away keys and its own config (so no
system ssh configuration is read or changed). Import the fixtures with
`from fleet import fleet, ssh_fleet, sshd  # noqa: F401`.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from procs import run_anamnesis, stop_process

from anamnesis.base.git import git_processes_in
from anamnesis.base.notes import Note
from anamnesis.base.paths import Store, open_store

ROOT = Path(__file__).resolve().parent.parent
SSHD = Path("/usr/sbin/sshd")
SSH_HOST = "fleet-ssh"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SshServer:
    """An sshd on 127.0.0.1 that lets this user in with a key made for the test run."""

    def __init__(self, folder: Path, extra_config: tuple[str, ...] = ()) -> None:
        self.folder = folder
        self.extra_config = extra_config  # more sshd_config lines (a ForceCommand...)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.client_config = folder / "ssh_config"

    @property
    def git_ssh_command(self) -> str:
        """What GIT_SSH_COMMAND must be for git to reach this server as host `fleet-ssh`."""
        return f"ssh -F {self.client_config}"

    def url(self, path: Path) -> str:
        """An scp-like URL (the Tailscale form `host:path`) for a repo path on this host."""
        return f"{SSH_HOST}:{path}"

    def start(self) -> None:
        folder = self.folder
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        for key in ("host_ed25519", "client_ed25519"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "anamnesis-test", "-f", str(folder / key)],
                check=True,
            )
        shutil.copy(folder / "client_ed25519.pub", folder / "authorized_keys")
        os.chmod(folder / "authorized_keys", 0o600)
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation folder
        last_error = ""
        for _ in range(5):
            self.port = _free_port()
            config = folder / "sshd_config"
            config.write_text(
                "\n".join(
                    [
                        f"Port {self.port}",
                        "ListenAddress 127.0.0.1",
                        f"HostKey {folder / 'host_ed25519'}",
                        f"PidFile {folder / 'sshd.pid'}",
                        f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                        "PubkeyAuthentication yes",
                        "PasswordAuthentication no",
                        "KbdInteractiveAuthentication no",
                        "PermitRootLogin prohibit-password",
                        "StrictModes no",
                        "UsePAM no",
                        "LogLevel ERROR",
                        "MaxStartups 64:30:128",
                        "MaxSessions 64",
                        *self.extra_config,
                        "",
                    ]
                )
            )
            host_key = (folder / "host_ed25519.pub").read_text().split()
            (folder / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_key[0]} {host_key[1]}\n")
            self.client_config.write_text(
                "\n".join(
                    [
                        f"Host {SSH_HOST}",
                        "  HostName 127.0.0.1",
                        f"  Port {self.port}",
                        f"  User {getpass.getuser()}",
                        f"  IdentityFile {folder / 'client_ed25519'}",
                        "  IdentitiesOnly yes",
                        f"  UserKnownHostsFile {folder / 'known_hosts'}",
                        "  StrictHostKeyChecking yes",
                        "  BatchMode yes",
                        "  ConnectTimeout 5",
                        "  LogLevel ERROR",
                        "",
                    ]
                )
            )
            self.proc = subprocess.Popen(
                [str(SSHD), "-D", "-e", "-f", str(config)],
                stdout=subprocess.DEVNULL,
                stderr=open(folder / "sshd.log", "ab"),  # noqa: SIM115 - the child keeps it open
            )
            if self._wait_ready():
                return
            last_error = (folder / "sshd.log").read_text(errors="replace")[-500:]
            self.stop()
        raise RuntimeError(f"sshd did not start: {last_error}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            probe = subprocess.run(
                ["ssh", "-F", str(self.client_config), SSH_HOST, "true"], capture_output=True, timeout=15
            )
            if probe.returncode == 0:
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_process(self.proc, signal.SIGTERM, grace=5)
        self.proc = None


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (every thread's), from /proc."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(child) for child in handle.read().split())
        except OSError:
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid`: its children, theirs, and so on."""
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def wait_for_orphans(repos: list[Path], timeout: float = 60) -> None:
    """Wait until no git works in any of `repos` (a killed sync's git children finish on their own).

    A kill on this host can also hit a hub's receive-pack (a child of the
    push here), which a kill on another machine never does: there the
    receive-pack sees its client go and drops its ref lock. Drop it for the
    hub as its own git would (sync itself only names such a lock).
    """
    deadline = time.monotonic() + timeout
    while any(git_processes_in(repo) for repo in repos):
        assert time.monotonic() < deadline, "git processes did not finish"
        time.sleep(0.02)
    for repo in repos:
        if not (repo / ".git").exists():  # a bare hub, not a machine's memory/
            for lock in (repo / "refs").rglob("*.lock"):
                lock.unlink(missing_ok=True)


def power_cut(proc: subprocess.Popen[Any]) -> int:
    """SIGKILL a process started with `start_new_session=True`, its group and everything below it, at once.

    What a power cut, a closed laptop's dead battery or the OOM killer taking
    the lot would do. Killing the group is not enough: git runs each command
    in a process group of its own. The group is stopped first, so nothing new
    is started while its children are found and killed. Returns how many
    processes below it were killed.
    """
    try:
        os.killpg(proc.pid, signal.SIGSTOP)
    except ProcessLookupError:
        return 0
    below = descendants(proc.pid)
    for pid in below:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return len(below)


@dataclass
class Machine:
    """One machine of the fleet: an ANAMNESIS_HOME with its own store, settings and index."""

    name: str
    home: Path
    ssh_command: str | None = None
    peers: dict[str, str] = field(default_factory=dict)

    @property
    def store(self) -> Store:
        return open_store(self.home)

    @property
    def memory(self) -> Path:
        return self.home / "memory"

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for running `anamnesis` as this machine."""
        env = dict(os.environ)
        env["ANAMNESIS_HOME"] = str(self.home)
        env["GIT_CONFIG_NOSYSTEM"] = "1"
        # Nothing a test runs may touch the real user's Claude Code or systemd configuration.
        env["CLAUDE_CONFIG_DIR"] = str(self.home.parent / f".{self.name}-claude")
        env["XDG_CONFIG_HOME"] = str(self.home.parent / f".{self.name}-config")
        env["CODEX_HOME"] = str(self.home.parent / f".{self.name}-codex")  # nor other agents' config
        env["GEMINI_CLI_HOME"] = str(self.home.parent / f".{self.name}-gemini")
        if self.ssh_command:
            env["GIT_SSH_COMMAND"] = self.ssh_command
        env.update(extra)
        return env

    def cli(
        self, *args: str, timeout: float = 120, input: str = "", real_process: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run the `anamnesis` command as this machine: its own `main` in this process, or with
        `real_process=True` as `python -m anamnesis` (see procs.run_anamnesis)."""
        return run_anamnesis(args, self.env(), input=input, cwd=ROOT, timeout=timeout, real_process=real_process)

    def spawn_sync(self, new_session: bool = False) -> subprocess.Popen[str]:
        """Start `anamnesis sync --json` without waiting (to kill it, or run many at once).

        `new_session` puts it in a process group of its own, so that
        `os.killpg(proc.pid, SIGKILL)` ends it together with its git children,
        as a power cut, a closed laptop or the OOM killer would.
        """
        return subprocess.Popen(
            [sys.executable, "-m", "anamnesis", "sync", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(),
            cwd=ROOT,
            start_new_session=new_session,
        )

    def sync(self, **kwargs: Any) -> Any:
        """Sync in this process (fast); returns the SyncResult."""
        from anamnesis.sync.engine import sync

        with _ssh_env(self.ssh_command):
            return sync(self.store, **kwargs)

    def git(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(["git", "-C", str(self.memory), *args], capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout.strip()

    def tree(self) -> str:
        """The tree id of HEAD: equal trees mean equal content."""
        return self.git("rev-parse", "HEAD^{tree}")

    def files(self) -> dict[str, str]:
        """Every tracked note file's text, by path (working tree)."""
        out: dict[str, str] = {}
        for path in self.git("ls-files", "-z").split("\0"):
            if path.endswith(".md"):
                out[path] = (self.memory / path).read_text(encoding="utf-8", errors="replace")
        return out

    def write(self, relpath: str, text: str) -> None:
        """Edit a file the way an editor does (no commit)."""
        path = self.memory / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def read(self, relpath: str) -> str:
        return (self.memory / relpath).read_text(encoding="utf-8")


class _ssh_env:
    """Set GIT_SSH_COMMAND for an in-process sync, and put it back afterwards."""

    def __init__(self, command: str | None) -> None:
        self.command = command
        self.saved: str | None = None

    def __enter__(self) -> None:
        self.saved = os.environ.get("GIT_SSH_COMMAND")
        if self.command:
            os.environ["GIT_SSH_COMMAND"] = self.command

    def __exit__(self, *exc: object) -> None:
        if self.saved is None:
            os.environ.pop("GIT_SSH_COMMAND", None)
        else:
            os.environ["GIT_SSH_COMMAND"] = self.saved


class Fleet:
    """Machines and hubs under one temporary folder."""

    def __init__(self, root: Path, ssh: SshServer | None = None) -> None:
        self.root = root
        self.ssh = ssh
        self.machines: dict[str, Machine] = {}

    def hub(self, name: str = "hub") -> Path:
        """A bare repo, the simple topology's always-on hub."""
        path = self.root / f"{name}.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
        return path

    def url(self, target: Path | Machine, via: str = "path") -> str:
        """A peer URL for a hub path or a machine's memory/, as a path or over ssh."""
        path = target.memory if isinstance(target, Machine) else target
        if via == "ssh":
            if self.ssh is None:
                raise RuntimeError("this fleet has no sshd")
            return self.ssh.url(path)
        return str(path)

    def machine(self, name: str, peers: dict[str, str] | None = None) -> Machine:
        """A new machine with an initialised store named `name` (its machine id)."""
        from anamnesis.store.operations import init_store
        from anamnesis.sync.peers import add_peer

        home = self.root / name
        home.mkdir(parents=True)
        (home / "settings.json").write_text(json.dumps({"machine_id": name}))
        machine = Machine(name, home, self.ssh.git_ssh_command if self.ssh else None)
        init_store(machine.store)
        for peer, url in (peers or {}).items():
            add_peer(machine.store, peer, url)
            machine.peers[peer] = url
        self.machines[name] = machine
        return machine

    def add_peer(self, machine: Machine, name: str, url: str) -> None:
        from anamnesis.sync.peers import add_peer

        add_peer(machine.store, name, url)
        machine.peers[name] = url

    def hub_with_a_note(self, title: str = "Shared") -> tuple[Path, Note]:
        """A hub that machine `a` has filled with one note: what a newcomer joins."""
        from anamnesis.store.operations import create_note

        hub = self.hub()
        a = self.machine("a", {"hub": self.url(hub)})
        note = create_note(a.store, type="semantic", title=title, body="shared text\n")
        a.sync()
        return hub, note

    def one_line_edited_everywhere(self, names: tuple[str, ...]) -> tuple[list[Machine], Note]:
        """Machines of one hub that share a note and have each changed its middle line, not synced yet:
        syncing them in turn makes one conflict block with a version per machine."""
        from anamnesis.store.operations import create_note, update_note

        hub = self.hub()
        machines = [self.machine(name, {"hub": self.url(hub)}) for name in names]
        note = create_note(machines[0].store, type="semantic", title="Shared", body="top\nmiddle\nbottom\n")
        for m in machines:
            m.sync()
        for m in machines:
            update_note(m.store, note.id, body=f"top\nmiddle from {m.name}\nbottom\n")
        return machines, note


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A real sshd on 127.0.0.1 for the whole test session (stopped at the end)."""
    if not SSHD.exists() or shutil.which("ssh") is None:
        pytest.skip("openssh-server is not installed (/usr/sbin/sshd); CI installs it")
    server = SshServer(tmp_path_factory.mktemp("sshd"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    """A fleet with file-path peers only."""
    return Fleet(tmp_path)


@pytest.fixture
def ssh_fleet(tmp_path: Path, sshd: SshServer) -> Fleet:
    """A fleet whose machines can also reach peers over the test sshd."""
    return Fleet(tmp_path, sshd)


class SyncClock:
    """How long a whole `anamnesis sync` process takes on this host, kept up to date as a randomised
    run goes: kills are timed relative to it. One measurement at the start (a cold first sync, a
    host that drifts) can time every kill after the sync already finished, and then no kill is
    tested at all."""

    def __init__(self, first: float) -> None:
        self.seen = [first]

    def observe(self, seconds: float) -> None:
        """A sync process that ran to its end took `seconds`."""
        self.seen = [*self.seen, seconds][-15:]

    @property
    def seconds(self) -> float:
        return float(statistics.median(self.seen))
