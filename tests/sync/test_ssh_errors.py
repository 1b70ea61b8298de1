"""ssh failures against a real sshd on 127.0.0.1: the real reason and what to do, in time, leaving nothing behind.

Each test runs the real `anamnesis` command in its own process with a
marker in its environment; git and ssh inherit it, so a scan of /proc finds
any of them left running after the command returned.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleet import ROOT, Fleet, Machine, SshServer, fleet, ssh_fleet, sshd  # noqa: F401

from anamnesis.store.operations import create_note

pytestmark = pytest.mark.timeout(120)

MARK = "ANAMNESIS_TEST_RUN"


# -- helpers ------------------------------------------------------------------------------


class SilentPeer:
    """A TCP listener on 127.0.0.1 that accepts every connection and never says a word."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.accepted: list[socket.socket] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[SilentPeer]:
    peer = SilentPeer()
    try:
        yield peer
    finally:
        peer.close()


def ssh_config(sshd: SshServer, folder: Path, name: str, **changes: str | None) -> Path:
    """A copy of the test sshd's client config with some options changed (None: removed)."""
    lines = []
    for line in sshd.client_config.read_text().splitlines():
        key = line.strip().split(" ", 1)[0]
        if key in changes:
            value = changes.pop(key)
            if value is not None:
                lines.append(f"  {key} {value}")
        else:
            lines.append(line)
    lines.extend(f"  {key} {value}" for key, value in changes.items() if value is not None)
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def leftovers(marker: str) -> list[str]:
    """Live processes (not zombies) that carry `marker` in their environment or command line."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        base = f"/proc/{entry.name}"
        try:
            with open(f"{base}/stat", "rb") as handle:
                stat = handle.read()
            if stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] in (b"Z", b"X"):
                continue
            with open(f"{base}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"{base}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except (OSError, ValueError):
            continue
        if marker.encode() in environ or marker.encode() in cmdline:
            words = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {words}")
    return found


def wait_for(predicate: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


class Run:
    """One `anamnesis` command in its own session, marked so that what it leaves behind can be found."""

    def __init__(self, machine: Machine, *args: str, **env: str) -> None:
        self.marker = f"{MARK}={uuid.uuid4().hex}"
        key, value = self.marker.split("=")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "anamnesis", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=machine.env(**env, **{key: value}),
            cwd=ROOT,
            start_new_session=True,  # so that a failing test can still stop all of it
        )
        self.seconds = 0.0
        self.stdout = self.stderr = ""

    def wait(self, timeout: float) -> int:
        try:
            self.stdout, self.stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running after {timeout} s: {self.proc.args}")
        self.seconds = time.monotonic() - self.started
        return self.proc.returncode

    def kill(self) -> None:
        for pid in [int(line.split(":")[0]) for line in leftovers(self.marker)] + [self.proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.communicate()

    def leftovers(self) -> list[str]:
        # A process killed a moment ago may take a few milliseconds to become a zombie.
        wait_for(lambda: not leftovers(self.marker), 2)
        return leftovers(self.marker)


def one_peer(fleet: Fleet, url: str, ssh_command: str) -> Machine:
    a = fleet.machine("a", {"desk": url})
    a.ssh_command = ssh_command
    create_note(a.store, type="semantic", title="Kept here", body="committed locally whatever ssh says\n")
    return a


def peer_state(machine: Machine) -> dict[str, str]:
    proc = machine.cli("peers", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    (peer,) = json.loads(proc.stdout)
    return dict(peer)


# -- the real reason, and what to do ----------------------------------------------------------


def test_an_unknown_host_key_is_named_everywhere_with_what_to_do(
    ssh_fleet: Fleet, sshd: SshServer, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    # As a user has it: no BatchMode, no ConnectTimeout, the default StrictHostKeyChecking (ask).
    config = ssh_config(
        sshd,
        tmp_path,
        "unknown_host",
        UserKnownHostsFile=str(empty),
        StrictHostKeyChecking=None,
        BatchMode=None,
        ConnectTimeout=None,
    )
    hub = ssh_fleet.hub()
    command = f"ssh -F {config}"
    a = one_peer(ssh_fleet, sshd.url(hub), command)
    run = Run(a, "sync")
    assert run.wait(60) == 14, run.stderr  # sync never accepts a host key: waiting will not fix it
    assert "Host key verification failed." in run.stdout, run.stdout
    assert "desk: misconfigured" in run.stdout, run.stdout
    assert "Could not read from remote repository" not in run.stdout
    assert f"ssh -F {config} fleet-ssh true" in run.stdout.replace("\n", " ").replace("  ", " "), run.stdout
    assert run.leftovers() == []
    # The same in `peers list`, `status` and the sync log.
    state = peer_state(a)
    assert "Host key verification failed." in state["last_error"] and "fleet-ssh true" in state["last_error"]
    listed = a.cli("peers", "list").stdout
    assert "Host key verification failed." in listed and "fleet-ssh true" in listed.replace("\n", " ")
    status = json.loads(a.cli("status", "--json").stdout)
    assert "Host key verification failed." in str(status["last_error"])
    log = (a.home / "logs" / "sync.log").read_text().splitlines()
    assert "Host key verification failed." in json.loads(log[-1])["unreachable"][0]["detail"]
    # `init --peer` on a new machine stops with ssh's words, and the advice.
    b = ssh_fleet.machine("b")
    proc = subprocess.run(
        [sys.executable, "-m", "anamnesis", "init", "--peer", sshd.url(hub), "--no-claude", "--no-schedule"],
        capture_output=True,
        text=True,
        env=b.env(GIT_SSH_COMMAND=command),
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "Host key verification failed." in proc.stderr and "fleet-ssh true" in proc.stderr, proc.stderr
    assert "Could not read from remote repository" not in proc.stderr
    # It says what it did not do (the join; no timer was asked for), and how to finish.
    not_done = proc.stdout.partition("Not done")[2]
    assert f"join {sshd.url(hub)} as peer" in not_done and "the sync timer" not in not_done, proc.stdout
    assert f"run `anamnesis init --peer {sshd.url(hub)} --no-claude --no-schedule` again" in proc.stdout
    # The host key recorded (the test's own config knows it), the same command finishes the setup.
    proc = subprocess.run(
        [sys.executable, "-m", "anamnesis", "init", "--peer", sshd.url(hub), "--no-claude", "--no-schedule"],
        capture_output=True,
        text=True,
        env=b.env(GIT_SSH_COMMAND=sshd.git_ssh_command),
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"joined {sshd.url(hub)}" in proc.stdout, proc.stdout
    assert [p["name"] for p in json.loads(b.cli("peers", "list", "--json").stdout)] == ["fleet-ssh"]


def test_a_refused_key_says_permission_denied_and_that_timers_have_no_agent(
    ssh_fleet: Fleet,
    sshd: SshServer,
    tmp_path: Path,
) -> None:
    key = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = ssh_config(sshd, tmp_path, "refused", IdentityFile=str(key), BatchMode=None)
    hub = ssh_fleet.hub()
    a = one_peer(ssh_fleet, sshd.url(hub), f"ssh -F {config}")
    run = Run(a, "sync", "--json")
    assert run.wait(60) == 14, run.stderr
    (desk,) = json.loads(run.stdout)["peers"]
    assert desk["status"] == "misconfigured"
    assert "Permission denied (publickey)" in desk["reason"], desk
    assert "agent" in desk["hint"] and "fleet-ssh true" in desk["hint"], desk
    assert desk["detail"].startswith(desk["reason"]) and desk["hint"] in desk["detail"]
    assert "Permission denied (publickey)" in peer_state(a)["last_error"]
    assert run.leftovers() == []
    # `peers add` checks the peer and says the same: kept (the key may be fixed next), with a warning.
    proc = a.cli("peers", "add", "other", sshd.url(hub))
    assert proc.returncode == 0 and "Permission denied (publickey)" in proc.stdout, proc.stdout
    assert "exit 14" in proc.stdout


def test_a_changed_host_key_is_misconfigured_and_says_how_to_forget_the_old_one(
    ssh_fleet: Fleet, sshd: SshServer, tmp_path: Path
) -> None:
    other = tmp_path / "old_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kind, key = (other.with_suffix(".pub")).read_text().split()[:2]
    known = tmp_path / "known_hosts_changed"
    known.write_text(f"[127.0.0.1]:{sshd.port} {kind} {key}\n")  # what it was before a reinstall
    config = ssh_config(sshd, tmp_path, "changed", UserKnownHostsFile=str(known))
    a = one_peer(ssh_fleet, sshd.url(ssh_fleet.hub()), f"ssh -F {config}")
    run = Run(a, "sync", "--json")
    assert run.wait(60) == 14, run.stderr
    (desk,) = json.loads(run.stdout)["peers"]
    assert desk["status"] == "misconfigured" and "changed" in desk["reason"], desk
    assert "ssh-keygen" in desk["hint"] and "-R" in desk["hint"], desk
    assert peer_state(a)["misconfigured"] is True
    assert run.leftovers() == []


def test_a_mistyped_path_over_ssh_is_refused_by_peers_add_and_misconfigured_in_sync(
    ssh_fleet: Fleet, sshd: SshServer
) -> None:
    hub = ssh_fleet.hub()
    typo = f"{sshd.url(hub)}".replace("hub.git", "hbu.git")  # as `desktop:.anamnesis/memroy`
    a = ssh_fleet.machine("a")
    added = a.cli("peers", "add", "desk", typo)
    assert added.returncode == 14, added.stdout + added.stderr
    assert "does not appear to be a git repository" in added.stderr and "--force" in added.stderr
    assert "fleet-ssh has no repository at" in added.stderr, added.stderr
    assert a.cli("peers", "list", "--json").stdout.strip() == "[]"  # nothing saved
    assert a.cli("peers", "add", "desk", typo, "--force").returncode == 0
    create_note(a.store, type="semantic", title="Kept here", body="x\n")
    run = Run(a, "sync", "--json")
    assert run.wait(60) == 14, run.stderr
    (desk,) = json.loads(run.stdout)["peers"]
    assert desk["status"] == "misconfigured" and "peers add" in desk["hint"], desk
    assert a.git("status", "--porcelain") == ""  # committed here whatever the peer says
    # The right path: it syncs, and the state clears.
    assert a.cli("peers", "add", "desk", sshd.url(hub)).returncode == 0
    assert Run(a, "sync").wait(60) == 0
    assert peer_state(a)["misconfigured"] is False


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"Port": "1"}, "Connection refused"),  # the machine is up, its ssh server is not
        ({"HostName": "no-such-host.invalid"}, "Could not resolve hostname"),  # the network or Tailscale is down
    ],
)
def test_an_outage_is_retried_with_exit_11_and_the_timer_counts_it_as_success(
    ssh_fleet: Fleet, sshd: SshServer, tmp_path: Path, changes: dict[str, str], said: str
) -> None:
    from anamnesis.base.errors import TIMER_SUCCESS

    config = ssh_config(sshd, tmp_path, "outage", **changes)
    a = one_peer(ssh_fleet, sshd.url(ssh_fleet.hub()), f"ssh -F {config}")
    run = Run(a, "sync", "--quiet", "--fail-after", "24h", "--json")
    assert run.wait(60) == 11, run.stderr
    assert 11 in TIMER_SUCCESS
    (desk,) = json.loads(run.stdout)["peers"]
    assert desk["status"] == "unreachable" and said in desk["reason"], desk
    assert peer_state(a)["misconfigured"] is False
    added = a.cli("peers", "add", "other", sshd.url(ssh_fleet.hub("other")))
    assert added.returncode == 0 and "cannot reach it now" in added.stdout, added.stdout


# -- a host name one letter off a name this machine knows ------------------------------------


def test_a_host_name_a_letter_off_an_ssh_alias_is_a_typo_refused_at_add_and_exit_14_at_sync(
    ssh_fleet: Fleet, sshd: SshServer
) -> None:
    hub = ssh_fleet.hub()
    a = one_peer(ssh_fleet, sshd.url(hub), sshd.git_ssh_command)
    typo = sshd.url(hub).replace("fleet-ssh", "flete-ssh", 1)
    added = a.cli("peers", "add", "desk", typo)
    assert added.returncode == 14, added.stdout + added.stderr
    assert "no machine is called flete-ssh: did you mean fleet-ssh" in added.stderr, added.stderr
    assert str(sshd.client_config) in added.stderr and sshd.url(hub) in added.stderr, added.stderr
    assert "nothing was saved" in added.stderr and len(added.stderr.strip().splitlines()) == 1
    assert json.loads(a.cli("peers", "list", "--json").stdout)[0]["url"] == sshd.url(hub)
    assert a.cli("peers", "add", "desk", typo, "--force").returncode == 0
    run = Run(a, "sync", "--json")
    assert run.wait(60) == 14, run.stderr
    (desk,) = json.loads(run.stdout)["peers"]
    assert desk["status"] == "misconfigured" and "did you mean fleet-ssh" in desk["hint"], desk
    assert peer_state(a)["misconfigured"] is True
    assert a.cli("peers", "add", "desk", sshd.url(hub)).returncode == 0
    assert Run(a, "sync").wait(60) == 0


def test_which_unresolved_names_are_typos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from anamnesis.sync.peers import reach_failure

    config = tmp_path / "config"
    config.write_text("Host desk node1 *.lan\n  HostName 10.0.0.5\nHost laptop-office\n  HostName laptop-office.example.net\n")
    ssh = f"ssh -F {config}"
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no tailscale here

    def said(host: str) -> str:
        return f"ssh: Could not resolve hostname {host}: Name or service not known\nfatal: Could not read from remote repository.\n"

    for typed, meant in (("dsek", "desk"), ("desj", "desk"), ("laptop-ofice", "laptop-office"), ("laptop-offcie", "laptop-office")):
        failure = reach_failure(said(typed), f"{typed}:memory", ssh)
        assert failure.kind == "misconfigured" and failure.bad_url, (typed, failure)
        assert f"did you mean {meant} (named in {config})" in failure.hint and f"{meant}:memory" in failure.hint
    # localhost, as /etc/hosts names it (its variants, ip6-localhost and the like, are no one's typo target)
    assert re.search(r"^[^#]*\slocalhost(\s|$)", Path("/etc/hosts").read_text(), re.M), "this test needs localhost in /etc/hosts"
    failure = reach_failure(said("locahost"), "ssh://me@locahost:2299/srv/memory", ssh)
    assert failure.kind == "misconfigured" and "did you mean localhost (named in /etc/hosts)" in failure.hint, failure
    # Other machines of a numbered set, a name far from any, a name the config holds: outages.
    for typed in ("node2", "node12", "storage", "desk", "laptop-office.example.net", "x"):
        failure = reach_failure(said(typed), f"{typed}:memory", ssh)
        assert failure.kind == "outage" and not failure.bad_url and "tailscale status" in failure.hint, typed


def test_tailnet_machines_count_as_known_names_and_a_stopped_tailscale_decides_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anamnesis.sync.peers import reach_failure

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tailscale = bin_dir / "tailscale"  # stands in for the tailscale CLI, which does not run here
    status = {
        "BackendState": "Running",
        "Self": {"HostName": "desk", "DNSName": "desk.tail1234.ts.net."},
        "Peer": {"k": {"HostName": "Laptop", "DNSName": "laptop.tail1234.ts.net.", "Online": False}},
    }
    tailscale.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(status)}\nEOF\n")
    tailscale.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    config = tmp_path / "config"
    config.write_text("Host hub\n")

    def failure(host: str) -> Any:
        said = f"ssh: Could not resolve hostname {host}: Name or service not known\n"
        return reach_failure(said, f"{host}:memory", f"ssh -F {config}")

    typo = failure("laptpo")
    assert typo.kind == "misconfigured" and "did you mean laptop (named in `tailscale status`)" in typo.hint, typo
    assert failure("laptop.tail1243.ts.net").kind == "misconfigured"
    assert failure("laptop").kind == "outage"  # a tailnet machine whose name does not resolve: MagicDNS off
    tailscale.write_text("#!/bin/sh\necho 'Tailscale is stopped.' >&2\nexit 1\n")
    assert failure("laptpo").kind == "outage"  # every tailnet name fails now: a typo cannot be told apart
    assert failure("hbu").kind == "outage"


# -- a peer that accepts TCP and never answers ---------------------------------------------


def silent_config(tmp_path: Path, silent: SilentPeer, **extra: str) -> Path:
    config = tmp_path / "silent_config"
    lines = ["Host silent", "  HostName 127.0.0.1", f"  Port {silent.port}", "  LogLevel ERROR"]
    lines += [f"  {k} {v}" for k, v in extra.items()]
    config.write_text("\n".join(lines) + "\n")
    return config


def test_a_silent_peer_with_a_custom_ssh_command_costs_seconds_not_a_hang(
    ssh_fleet: Fleet,
    silent: SilentPeer,
    tmp_path: Path,
) -> None:
    # The user's command asks for a long connect timeout: ours comes first and wins.
    config = silent_config(tmp_path, silent, ConnectTimeout="600")
    a = one_peer(ssh_fleet, "silent:/srv/memory.git", f"ssh -F {config}")
    run = Run(a, "sync", "--json")
    assert wait_for(lambda: run.proc.poll() is not None or len(silent.accepted) > 0, 20)
    # A note written meanwhile waits for the store for seconds, not until the sync is killed.
    assert a.cli("new", "Written during the sync", "--body", "x", timeout=30).returncode == 0
    assert run.wait(40) == 11, run.stderr
    assert run.seconds < 15, run.seconds
    (desk,) = json.loads(run.stdout)["peers"]
    assert desk["status"] == "unreachable"
    assert "banner exchange" in desk["reason"], desk
    assert run.leftovers() == []
    # Nothing keeps the next sync waiting.
    again = Run(a, "sync", "--json")
    assert again.wait(40) == 11 and again.seconds < 15
    assert again.leftovers() == []


def wrapper(tmp_path: Path, config: Path) -> str:
    """An ssh wrapper (not named ssh) whose own options come first, so they win over ours."""
    script = tmp_path / "my-ssh"
    script.write_text(
        f'#!/bin/sh\nexec ssh -F {config} -o ConnectTimeout=600 -o ServerAliveInterval=0 "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def test_the_wall_clock_bound_stops_a_hanging_fetch_and_all_it_started(
    ssh_fleet: Fleet,
    silent: SilentPeer,
    tmp_path: Path,
) -> None:
    a = one_peer(ssh_fleet, "silent:/srv/memory.git", wrapper(tmp_path, silent_config(tmp_path, silent)))
    run = Run(a, "sync", "--json", ANAMNESIS_NETWORK_TIMEOUT="3")
    assert run.wait(40) == 11, run.stderr
    assert run.seconds < 12, run.seconds
    (desk,) = json.loads(run.stdout)["peers"]
    assert desk["status"] == "unreachable" and "3 s" in desk["reason"], desk
    assert run.leftovers() == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopping_sync_during_a_hanging_fetch_leaves_no_child_behind(
    ssh_fleet: Fleet,
    silent: SilentPeer,
    tmp_path: Path,
    sig: signal.Signals,
) -> None:
    a = one_peer(ssh_fleet, "silent:/srv/memory.git", wrapper(tmp_path, silent_config(tmp_path, silent)))
    run = Run(a, "sync")
    # Wait until the fetch hangs: ssh is connected to the silent peer.
    assert wait_for(lambda: any(" ssh " in f" {p.split(': ', 1)[1]}" for p in leftovers(run.marker)), 20)
    time.sleep(0.3)
    run.proc.send_signal(sig)  # the sync process only, as `kill PID` does
    code = run.wait(15)
    assert code == 128 + sig, (code, run.stderr)
    assert run.seconds < 25
    assert "stopped" in run.stderr, run.stderr
    assert run.leftovers() == []
    log = json.loads((a.home / "logs" / "sync.log").read_text().splitlines()[-1])
    assert log["outcome"] == "failed" and sig.name in log["error"], log
    # Nothing is wedged: the next sync (without the silent peer) works at once.
    assert a.cli("peers", "rm", "desk").returncode == 0
    after = a.cli("sync", "--json", timeout=60)
    assert after.returncode == 0, after.stderr


# -- a stale ref lock in a hub on a local path -----------------------------------------------


def test_a_ref_lock_a_killed_git_left_in_a_local_hub_is_removed_by_the_next_push(ssh_fleet: Fleet) -> None:
    from anamnesis.sync.peers import peer_problems

    hub = ssh_fleet.hub()
    a = one_peer(ssh_fleet, str(hub), "")
    assert a.cli("sync").returncode == 0
    create_note(a.store, type="semantic", title="Second", body="y\n")
    lock = hub / "refs" / "heads" / "main.lock"
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    problems = peer_problems(a.store)
    assert [p.where for p in problems] == [str(lock)], problems
    assert f"rm {lock}" in problems[0].fix
    run = Run(a, "sync", "--json")
    assert run.wait(60) == 0, run.stderr
    report = json.loads(run.stdout)
    assert any(str(lock) in line and "killed git" in line for line in report["repaired"]), report
    assert not lock.exists()
    hub_main = subprocess.run(["git", "-C", str(hub), "rev-parse", "main"], capture_output=True, text=True)
    assert hub_main.stdout.strip() == a.git("rev-parse", "HEAD")
    assert peer_problems(a.store) == []


def test_a_ref_lock_in_a_local_hub_with_a_git_working_there_stays_and_is_named(ssh_fleet: Fleet) -> None:
    hub = ssh_fleet.hub()
    a = one_peer(ssh_fleet, str(hub), "")
    assert a.cli("sync").returncode == 0
    create_note(a.store, type="semantic", title="Second", body="y\n")
    lock = hub / "HEAD.lock"
    lock.write_text("")
    working = subprocess.Popen(["git", "cat-file", "--batch"], cwd=hub, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        run = Run(a, "sync", "--json")
        assert run.wait(60) == 11, run.stderr
    finally:
        working.kill()
        working.wait()
    assert run.seconds < 15, run.seconds
    (desk,) = json.loads(run.stdout)["peers"]
    assert desk["status"] == "rejected"
    assert str(lock) in desk["detail"], desk
    assert f"pid {working.pid}" in desk["hint"], desk
    assert lock.exists()  # a git is working there: not ours to remove
    lock.unlink()
    assert a.cli("sync").returncode == 0


# -- a peer unreachable for a day --------------------------------------------------------------


def test_a_peer_unreachable_for_a_day_fails_the_timer_run_and_shows_in_status(fleet_root: Path) -> None:
    from anamnesis.sync.peers import load_state, save_state, stale_peers

    fleet = Fleet(fleet_root)
    (fleet_root / "usb").mkdir()  # the disk the hub lives on is not mounted: an outage
    a = fleet.machine("a", {"gone": str(fleet_root / "usb" / "nowhere.git")})
    first = a.cli("sync", "--quiet", "--fail-after", "24h")
    assert first.returncode == 11, first.stderr  # an hour offline is not a failure for the timer
    assert stale_peers(a.store, 86400) == []
    state = load_state(a.store)
    assert state["gone"]["failing_since"]
    state["gone"]["failing_since"] = "2000-01-01T00:00:00Z"
    save_state(a.store, state)
    proc = a.cli("sync", "--quiet", "--fail-after", "24h")
    assert proc.returncode == 13, (proc.returncode, proc.stdout, proc.stderr)
    assert "gone" in proc.stdout and "since 2000-01-01" in proc.stdout, proc.stdout
    (stale,) = stale_peers(a.store, 86400)
    assert stale.name == "gone" and stale.since == "2000-01-01T00:00:00Z" and stale.last_error
    assert a.cli("sync", "--quiet").returncode == 11  # without --fail-after: as before
    status = a.cli("status")
    assert "unreachable" in status.stdout and "gone" in status.stdout and "2000-01-01" in status.stdout, (
        status.stdout
    )
    # Reachable again: no longer stale.
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(fleet_root / "usb" / "nowhere.git")], check=True)
    assert a.cli("sync", "--quiet", "--fail-after", "24h").returncode == 0
    assert stale_peers(a.store, 86400) == [] and "failing_since" not in load_state(a.store)["gone"]


@pytest.fixture
def fleet_root(tmp_path: Path) -> Path:
    return tmp_path


# -- whose ssh command, with which options ------------------------------------------------------


def effective(command: str, host: str = "fleet-ssh") -> dict[str, str]:
    """What ssh would use for `host` with `command` (as git runs it, through sh): `ssh -G`, no connection."""
    proc = subprocess.run(["sh", "-c", f'{command} -G "$@"', command, host], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)


def test_our_safety_options_win_over_the_users_command_and_config(sshd: SshServer, tmp_path: Path) -> None:
    from anamnesis.base.git import safe_ssh_command

    config = ssh_config(sshd, tmp_path, "lax", BatchMode="no", ConnectTimeout="600", ServerAliveInterval="0")
    user = f"ssh -F {config} -o ConnectTimeout=900 -o BatchMode=no"
    assert effective(user)["connecttimeout"] == "900"
    safe = effective(safe_ssh_command(user))
    assert (
        safe["batchmode"],
        safe["connecttimeout"],
        safe["serveraliveinterval"],
        safe["serveralivecountmax"],
    ) == (
        "yes",
        "5",
        "5",
        "2",
    )
    assert safe["port"] == str(sshd.port) and safe["identityfile"].endswith(
        "client_ed25519"
    )  # the rest is theirs
    # A quoted program path is still ssh; a command substitution is left to the shell (as a wrapper).
    quoted = safe_ssh_command(f'"{shutil.which("ssh")}" -F "{config}" -o BatchMode=no')
    assert quoted.startswith(f'"{shutil.which("ssh")}" -o BatchMode=yes')
    assert effective(quoted)["batchmode"] == "yes" and effective(quoted)["port"] == str(sshd.port)
    substituted = safe_ssh_command(f'"$(command -v ssh)" -F "{config}"')
    assert effective(substituted)["connecttimeout"] == "5" and effective(substituted)["port"] == str(
        sshd.port
    )
    # A wrapper gets them after its own words; PuTTY's plink gets none.
    assert safe_ssh_command("/opt/bin/my-ssh -x").startswith("/opt/bin/my-ssh -x -o BatchMode=yes")
    assert safe_ssh_command("plink -batch") == "plink -batch"
    assert safe_ssh_command(safe_ssh_command("ssh")) == safe_ssh_command("ssh")


def test_core_ssh_command_and_git_ssh_are_used_with_the_safety_options(
    ssh_fleet: Fleet, sshd: SshServer, tmp_path: Path
) -> None:
    from anamnesis.base.git import network_env

    hub = ssh_fleet.hub()
    a = ssh_fleet.machine("a", {"hub": sshd.url(hub)})
    a.ssh_command = None  # no GIT_SSH_COMMAND: the repo's core.sshCommand must be used
    a.git("config", "core.sshCommand", sshd.git_ssh_command)
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_SSH_COMMAND", "GIT_SSH")}
    assert network_env(a.memory, env)["GIT_SSH_COMMAND"].startswith("ssh -o BatchMode=yes")
    assert f"-F {sshd.client_config}" in network_env(a.memory, env)["GIT_SSH_COMMAND"]
    create_note(a.store, type="semantic", title="Through core.sshCommand", body="x\n")
    proc = subprocess.run(
        [sys.executable, "-m", "anamnesis", "sync", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={k: v for k, v in a.env().items() if k not in ("GIT_SSH_COMMAND", "GIT_SSH")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # GIT_SSH names a program (no arguments): a wrapper here.
    script = tmp_path / "ssh-wrapper"
    script.write_text(f'#!/bin/sh\nexec ssh -F {sshd.client_config} "$@"\n')
    script.chmod(0o755)
    wrapped = network_env(None, {**env, "GIT_SSH": str(script)})["GIT_SSH_COMMAND"]
    assert wrapped.startswith(f"{script} -o BatchMode=yes")
    # ssh.variant=plink in git's config: no OpenSSH options for a program that would not take them.
    a.git("config", "ssh.variant", "plink")
    assert network_env(a.memory, env)["GIT_SSH_COMMAND"] == sshd.git_ssh_command


@pytest.mark.parametrize(
    ("output", "reason", "hint"),
    [
        (
            "Host key verification failed.\nfatal: Could not read from remote repository.\n\n"
            "Please make sure you have the correct access rights\nand the repository exists.\n",
            "Host key verification failed.",
            "run `ssh me@desk true` once",
        ),
        (
            "@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@@@@\n"
            '  ssh-keygen -f "/home/me/.ssh/known_hosts" -R "desk"\n'
            "Host key for desk has changed and you have requested strict checking.\n"
            "Host key verification failed.\nfatal: Could not read from remote repository.\n",
            "host key of desk changed",
            'ssh-keygen -f "/home/me/.ssh/known_hosts" -R "desk"',
        ),
        (
            "me@desk: Permission denied (publickey).\nfatal: Could not read from remote repository.\n",
            "me@desk: Permission denied (publickey).",
            "agent",
        ),
        (
            "ssh: connect to host desk port 22: Connection refused\nfatal: Could not read from remote repository.\n",
            "ssh: connect to host desk port 22: Connection refused",
            "asleep",
        ),
        (
            "ssh: Could not resolve hostname desk: Name or service not known\nfatal: Could not read from remote repository.\n",
            "ssh: Could not resolve hostname desk: Name or service not known",
            "tailscale status",
        ),
        (
            "sh: 1: git-upload-pack: not found\nfatal: Could not read from remote repository.\n",
            "sh: 1: git-upload-pack: not found",
            "git is not installed on desk",
        ),
        (
            "fatal: '/srv/x.git' does not appear to be a git repository\nfatal: Could not read from remote repository.\n",
            "'/srv/x.git' does not appear to be a git repository",
            "",
        ),
        (
            "Timeout, server desk not responding.\nfatal: the remote end hung up unexpectedly\n",
            "Timeout, server desk not responding.",
            "stopped answering",
        ),
    ],
)
def test_explain_finds_the_line_that_says_what_went_wrong(output: str, reason: str, hint: str) -> None:
    from anamnesis.base.git import explain

    failure = explain(output, "me@desk:.anamnesis/memory", ssh="ssh")
    assert reason in failure.reason and "Could not read" not in failure.text
    assert hint in failure.hint


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        ("ssh: connect to host desk port 22: Connection refused\n", "outage"),
        ("ssh: connect to host desk port 22: Connection timed out\n", "outage"),
        ("ssh: connect to host desk port 22: No route to host\n", "outage"),
        ("ssh: Could not resolve hostname desk: Temporary failure in name resolution\n", "outage"),
        ("Connection timed out during banner exchange\n", "outage"),
        ("Timeout, server desk not responding.\n", "outage"),
        ("Host key verification failed.\nfatal: Could not read from remote repository.\n", "misconfigured"),
        ("me@desk: Permission denied (publickey,password).\n", "misconfigured"),
        ("Received disconnect from 10.0.0.2 port 22:2: Too many authentication failures\n", "misconfigured"),
        ("Bad owner or permissions on /home/me/.ssh/config\n", "misconfigured"),
        ("bash: line 1: git-upload-pack: command not found\n", "misconfigured"),
        ("fatal: '.anamnesis/memroy' does not appear to be a git repository\n", "misconfigured"),
        ("remote: Repository not found.\nfatal: repository 'https://example.org/x.git/' not found\n", "misconfigured"),
        ("sh: 1: lsb: not found\nfatal: '.anamnesis/memroy' does not appear to be a git repository\n", "misconfigured"),
    ],
)
def test_explain_tells_an_outage_from_a_setting_that_never_works(output: str, kind: str) -> None:
    from anamnesis.base.git import explain

    assert explain(output, "me@desk:.anamnesis/memory", ssh="ssh").kind == kind


@pytest.mark.parametrize(
    "output",
    [
        "Bad port '0'\nfatal: Could not read from remote repository.\n",  # ssh://desk:0/m
        # git hands ssh a port it cannot read as part of the host: ssh://desk:99999/m, ssh://desk:22x/m
        "ssh: Could not resolve hostname desk:99999: Name or service not known\n",
        "ssh: Could not resolve hostname desk:abc: Temporary failure in name resolution\n",
        "hostname contains invalid characters\nfatal: Could not read from remote repository.\n",  # "de sk:m"
    ],
)
def test_a_url_that_names_no_machine_is_misconfigured_not_an_outage(output: str) -> None:
    from anamnesis.base.git import explain

    failure = explain(output, "ssh://desk:99999/m", ssh="ssh")
    assert failure.kind == "misconfigured" and failure.bad_url, failure
    assert "peers add" in failure.hint and "1 to 65535" in failure.hint, failure.hint
    # A name that does not resolve now is still what a network or Tailscale that is down looks like.
    down = explain("ssh: Could not resolve hostname desk-2.tail-1.ts.net: Name or service not known\n", "x", ssh="ssh")
    assert down.kind == "outage" and not down.bad_url


def test_peers_add_refuses_a_port_that_is_not_a_number_and_prints_ssh_words_as_they_are(fleet: Fleet) -> None:
    a = fleet.machine("a")
    for url in ("ssh://127.0.0.1:99999/srv/memory.git", "ssh://localhost:abc/srv/memory.git"):
        added = a.cli("peers", "add", "desk", url)
        assert added.returncode == 14, added.stdout + added.stderr
        assert "will keep trying" not in added.stdout + added.stderr
        assert "1 to 65535" in added.stderr and "nothing was saved" in added.stderr, added.stderr
        assert a.cli("peers", "list", "--json").stdout.strip() == "[]"
    # The words are shown as ssh wrote them: `localhost:abc:` is no emoji code.
    assert "localhost:abc: " in " ".join(added.stderr.split()), added.stderr


def test_an_scp_style_address_with_a_port_is_refused_with_the_url_that_carries_it(run_cli: Any, home: Path) -> None:
    # ssh would read `2299/home/...` as the path and knock on port 22: "peer is off" blamed the peer.
    assert run_cli("init", "--local-only").returncode == 0
    proc = run_cli("peers", "add", "typo", "ana2@127.0.0.1:2299/home/ana2/.anamnesis/memory")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot carry a port" in proc.stderr and "ssh://ana2@127.0.0.1:2299/home/ana2/.anamnesis/memory" in proc.stderr
    assert "typo" not in run_cli("peers", "list").stdout


def test_a_peer_never_reached_is_not_listed_as_ok(run_cli: Any, home: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--local-only").returncode == 0
    added = run_cli("peers", "add", "usb", "ssh://nobody@127.0.0.1:1/srv/memory")  # nothing listens on port 1
    assert added.returncode == 0 and "cannot reach" in added.stdout + added.stderr, added.stdout + added.stderr
    listed = " ".join(run_cli("peers", "list").stdout.split())
    assert "usb" in listed and "not reached yet" in listed and " ok" not in listed, listed
