"""Two real `anamnesis watch` processes finding each other with mDNS, across a real interface.

Machines a and b share a bare hub repo (a file path, so git needs no
network) and nothing else: b can only learn that a wrote something from a's
mDNS announcement (its safety-net timer is an hour), and the other way round.
With root and `ip netns` (CI), each machine runs in its own network namespace
joined by a veth pair, so the packets cross an interface and the link can be
cut; otherwise both share the host's network (see tests/lan.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fleet import Fleet, Machine
from lan import Lan, lan
from procs import run_in_terminal, stop_process

from anamnesis.base.settings import load_settings, save_settings
from anamnesis.sync.watch import read_heartbeat

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class WatchProcess:
    """`anamnesis watch` for one machine, on one side of the LAN; stopped by its pid."""

    def __init__(self, machine: Machine, network: Lan, side: str) -> None:
        self.machine = machine
        self.network = network
        self.side = side
        self.proc: subprocess.Popen[bytes] | None = None
        self.output = machine.home / "watch.out"

    def start(self) -> None:
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(
                [*self.network.prefix(self.side), sys.executable, "-m", "anamnesis", "watch",
                 "--debounce", "0.3", "--interval", "3600"],
                cwd=ROOT,
                env=self.machine.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_for(self.announcing, 30, f"{self.machine.name}'s watch to announce itself")

    def announcing(self) -> bool:
        beat = read_heartbeat(self.machine.store) or {}
        alive = self.proc is not None and self.proc.poll() is None
        return alive and beat.get("pid") == self.proc.pid and bool(beat.get("announcing"))  # type: ignore[union-attr]

    def sees(self, other: str) -> bool:
        return other in ((read_heartbeat(self.machine.store) or {}).get("peers_seen") or {})

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no goodbye on the network, no final heartbeat."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_process(self.proc, signal.SIGTERM, grace=30)
        self.proc = None

    def log(self) -> str:
        return (self.machine.home / "logs" / "watch.log").read_text(errors="replace")


def finds(machine: Machine, word: str) -> bool:
    out = machine.cli("search", word, "--json", timeout=60)
    return out.returncode == 0 and bool(json.loads(out.stdout or "[]"))


def write_note(machine: Machine, title: str, word: str) -> None:
    result = machine.cli("new", "-G", title, "--body", f"remember the {word}", timeout=60)
    assert result.returncode == 0, result.stderr


def hub_head(hub: Path) -> str:
    return subprocess.run(["git", "-C", str(hub), "rev-parse", "main"], capture_output=True, text=True).stdout.strip()


def two_machines(fleet: Fleet) -> tuple[Machine, Machine, Path]:
    """Machines a and b of one memory, each with only the hub as peer."""
    hub = fleet.hub()
    a = fleet.machine("a", peers={"hub": str(hub)})
    b = fleet.machine("b", peers={"hub": str(hub)})
    a.sync()
    b.sync()  # b takes a's history: same root commit, same store id
    for machine in (a, b):
        settings = load_settings(machine.store)
        settings["advertise_url"] = str(machine.memory)
        save_settings(machine.store, settings)
    return a, b, hub


@pytest.fixture
def watchers() -> Iterator[list[WatchProcess]]:
    started: list[WatchProcess] = []
    yield started
    for watcher in started:
        watcher.stop()


def test_push_notify_and_a_peer_killed_and_restarted(tmp_path: Path, watchers: list[WatchProcess]) -> None:
    with lan(require_netns=False) as network:
        a, b, hub = two_machines(Fleet(tmp_path))
        wa, wb = WatchProcess(a, network, "a"), WatchProcess(b, network, "b")
        watchers.extend([wa, wb])
        wa.start()
        wb.start()
        wait_for(lambda: wa.sees("b") and wb.sees("a"), 30, "a and b to see each other's announcements")

        listed = subprocess.run(
            [*network.prefix("b"), sys.executable, "-m", "anamnesis", "peers", "discover", "--json", "--seconds", "2"],
            cwd=ROOT, env=b.env(), capture_output=True, text=True, timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
        lan_peers = json.loads(listed.stdout)["lan"]
        assert [(p["machine_id"], p["same_store"], p["url"]) for p in lan_peers] == [("a", True, str(a.memory))]
        assert lan_peers[0]["head"] == a.git("rev-parse", "HEAD")

        write_note(a, "Written on a", "aardvark")
        wait_for(lambda: finds(b, "aardvark"), 30, "b to find a's note")
        assert "a announced" in wb.log()  # b learnt it from a's announcement: nothing else tells it

        wb.kill()  # b dies without a goodbye
        write_note(a, "Written while b is down", "badger")
        wait_for(lambda: hub_head(hub) == a.git("rev-parse", "HEAD"), 30, "a to push to the hub")
        assert wa.alive()
        wb.start()  # b's start-up sync catches up
        wait_for(lambda: finds(b, "badger"), 30, "b to catch up after its restart")
        write_note(b, "Written on b after its restart", "caracal")
        wait_for(lambda: finds(a, "caracal"), 30, "a to hear from the restarted b")
        assert "b announced" in wa.log()
        assert wa.alive() and wb.alive()
        assert "Traceback" not in wa.log() + wb.log()


def test_watch_survives_the_link_going_down_and_up(tmp_path: Path, watchers: list[WatchProcess]) -> None:
    with lan(require_netns=True) as network:
        a, b, hub = two_machines(Fleet(tmp_path))
        wa, wb = WatchProcess(a, network, "a"), WatchProcess(b, network, "b")
        watchers.extend([wa, wb])
        wa.start()
        wb.start()
        wait_for(lambda: wa.sees("b") and wb.sees("a"), 30, "a and b to see each other's announcements")
        write_note(a, "Before the cut", "dingo")
        wait_for(lambda: finds(b, "dingo"), 30, "b to find a's first note")

        network.link_down()
        write_note(a, "During the cut", "echidna")
        wait_for(lambda: hub_head(hub) == a.git("rev-parse", "HEAD"), 30, "a to keep syncing with the hub")
        time.sleep(3)
        assert not finds(b, "echidna"), "with the link down b cannot have heard of the note"

        network.link_up()
        write_note(a, "After the cut", "fossa")
        wait_for(lambda: finds(b, "fossa") and finds(b, "echidna"), 30, "b to hear from a again")
        write_note(b, "From b after the cut", "gecko")
        wait_for(lambda: finds(a, "gecko"), 30, "a to hear from b again")
        assert wa.alive() and wb.alive()
        assert "Traceback" not in wa.log() + wb.log()


def test_init_offers_to_join_a_machine_found_on_the_lan(tmp_path: Path, watchers: list[WatchProcess]) -> None:
    with lan(require_netns=False) as network:
        fleet = Fleet(tmp_path)
        a = fleet.machine("a")
        write_note(a, "Already on a", "hedgehog")
        settings = load_settings(a.store)
        settings["advertise_url"] = str(a.memory)
        save_settings(a.store, settings)
        wa = WatchProcess(a, network, "a")
        watchers.append(wa)
        wa.start()

        # Input that ends at the offer (Ctrl-D) is no answer: nothing joined, and init says how to do it.
        quiet = Machine("quiet", tmp_path / "quiet")
        said = run_in_terminal(
            [*network.prefix("b"), sys.executable, "-m", "anamnesis", "init", "--no-claude", "--no-schedule", "--no-semantic"],
            quiet.env(HOME=str(tmp_path / "user-home"), TERM="dumb"),
            [("Join the memory of a", "\x04")],
            timeout=120,
        )
        assert "a not added: no answer (stdin was closed); pass --peer URL" in said, said
        assert "anamnesis peers discover" in said and "aborted" not in said
        assert not finds(quiet, "hedgehog")

        new = Machine("newcomer", tmp_path / "newcomer")
        env = new.env(HOME=str(tmp_path / "user-home"), TERM="dumb")
        said = run_in_terminal(
            [*network.prefix("b"), sys.executable, "-m", "anamnesis", "init", "--no-claude", "--no-schedule", "--no-semantic"],
            env,
            [("Join the memory of a", "y\n")],
            timeout=120,
        )
        assert "joined the memory of a" in said
        assert new.git("rev-list", "--max-parents=0", "HEAD") == a.git("rev-list", "--max-parents=0", "HEAD")
        assert finds(new, "hedgehog")
