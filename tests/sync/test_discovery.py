"""Discovery: the announcement's TXT record, Tailscale candidates, and real zeroconf on this host.

The two-process, two-namespace tests are in test_discovery_e2e.py.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli
from lan import host_multicast_unavailable, skip_or_fail

from anamnesis.base.paths import Store, open_store
from anamnesis.base.repo import head, store_id
from anamnesis.base.settings import load_settings, save_settings
from anamnesis.sync.discovery import (
    Announcer,
    Peer,
    advertise_url,
    connectable_url,
    discover,
    parse_tailscale_status,
    parse_txt,
    peer_from_txt,
    store_ids,
    txt_record,
)

DATA = Path(__file__).resolve().parents[1] / "data"


def make_store(root: Path, machine: str, clone_of: Store | None = None) -> Store:
    """A store with its own machine id; `clone_of` makes it a machine of that store's memory."""
    from anamnesis.store.operations import init_store

    store = open_store(root / machine)
    store.home.mkdir(parents=True)
    store.settings_path.write_text(json.dumps({"machine_id": machine}))
    if clone_of is not None:
        subprocess.run(["git", "clone", "-q", str(clone_of.memory), str(store.memory)], check=True)
    init_store(store)
    return store


def test_the_store_id_is_the_root_commit_shared_by_clones(tmp_path: Path) -> None:
    a = make_store(tmp_path, "a")
    b = make_store(tmp_path, "b", clone_of=a)
    other = make_store(tmp_path, "other")
    root = subprocess.run(
        ["git", "-C", str(a.memory), "rev-list", "--max-parents=0", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert store_id(a) == root == store_id(b)
    assert store_id(other) != root
    assert store_ids(a) == (root[:16],)


def test_txt_record_round_trip(tmp_path: Path) -> None:
    a = make_store(tmp_path, "a")
    b = make_store(tmp_path, "b", clone_of=a)
    other = make_store(tmp_path, "other")
    current = head(a.memory)
    txt = txt_record(a, current)
    assert txt["mid"] == "a" and txt["head"] == current
    wire = {k.encode(): v.encode() for k, v in txt.items()}  # what zeroconf hands back
    peer = peer_from_txt(parse_txt(wire), ("10.0.0.1",), store_ids(b))
    assert peer == Peer(
        machine_id="a",
        url=advertise_url(a),
        head=current,
        store_ids=store_ids(a),
        host=txt["host"],
        addresses=("10.0.0.1",),
        same_store=True,
    )
    stranger = peer_from_txt(parse_txt(wire), (), store_ids(other))
    assert stranger is not None and not stranger.same_store


@pytest.mark.parametrize(
    "wire",
    [
        {},
        {b"v": b"1"},
        {b"v": b"2", b"mid": b"x", b"sid": b"abc"},
        {b"mid": b"x", b"sid": b"abc"},
    ],
)
def test_announcements_we_do_not_understand_are_ignored(wire: dict[bytes, bytes | None]) -> None:
    assert peer_from_txt(parse_txt(wire)) is None


def test_a_malformed_head_is_dropped() -> None:
    peer = peer_from_txt({"v": "1", "mid": "x", "sid": "abc", "head": "not-a-commit; rm -rf"})
    assert peer is not None and peer.head is None


def test_advertise_url_default_and_setting(tmp_path: Path) -> None:
    store = make_store(tmp_path, "a")
    default = advertise_url(store)
    assert default.startswith("ssh://") and default.endswith(str(store.memory.absolute()))
    settings = load_settings(store)
    settings["advertise_url"] = "me@desk.tail4e2a9c.ts.net:.anamnesis/memory"
    save_settings(store, settings)
    assert advertise_url(store) == "me@desk.tail4e2a9c.ts.net:.anamnesis/memory"


def test_tailscale_candidates_from_a_recorded_status() -> None:
    status = json.loads((DATA / "tailscale-status.json").read_text())
    found = parse_tailscale_status(status)
    names = [c.name for c in found]
    # online, not a phone, in this tailnet; the user's own machines first, then tagged servers
    assert names == ["desktop-9qk2lma.tail4e2a9c.ts.net", "laptop.tail4e2a9c.ts.net", "nas.tail4e2a9c.ts.net"]
    laptop = found[1]
    assert laptop.same_user and laptop.os == "macOS" and laptop.hostname == "laptop"
    assert laptop.addresses == ("100.88.41.3", "fd7a:115c:a1e0::3901:2903")
    assert laptop.suggested_url == "laptop.tail4e2a9c.ts.net:.anamnesis/memory"
    assert not found[2].same_user


def test_a_bare_host_name_is_suggested_as_a_name_or_address_that_will_connect(tmp_path: Path) -> None:
    """A machine announces ssh://bob@laptop/… (its hostname); `laptop` reaches it only through an ssh
    alias of that name. Read with this user's real ssh configuration (`ssh -G`, an empty one here)."""
    no_alias = tmp_path / "ssh_config"
    no_alias.write_text("")
    ssh = f"ssh -F {no_alias}"
    tailnet = parse_tailscale_status(json.loads((DATA / "tailscale-status.json").read_text()))
    announced = "ssh://bob@laptop/home/bob/.anamnesis/memory"
    lan = (ipaddress.ip_network("192.168.1.0/24"),)
    seen = ("10.9.0.4", "192.168.1.31", "100.88.41.3")
    # On the tailnet (by its name, or by an address it announced): its MagicDNS name.
    assert connectable_url(announced, seen, tailnet, list(lan), ssh) == (
        "ssh://bob@laptop.tail4e2a9c.ts.net/home/bob/.anamnesis/memory"
    )
    renamed = "ssh://bob@mbp/home/bob/.anamnesis/memory"
    assert connectable_url(renamed, seen, tailnet, list(lan), ssh) == (
        "ssh://bob@laptop.tail4e2a9c.ts.net/home/bob/.anamnesis/memory"
    )
    # No tailnet: the address it was seen at, one on this machine's own network first.
    assert connectable_url(announced, seen, None, list(lan), ssh) == "ssh://bob@192.168.1.31/home/bob/.anamnesis/memory"
    assert connectable_url(announced, seen, None, [], ssh) == "ssh://bob@10.9.0.4/home/bob/.anamnesis/memory"
    assert connectable_url("bob@laptop:.anamnesis/memory", seen, None, list(lan), ssh) == (
        "bob@192.168.1.31:.anamnesis/memory"
    )
    # Kept as announced: an ssh alias of that name here, a dotted name, an address, a path, nothing seen.
    alias = tmp_path / "ssh_config_alias"
    alias.write_text("Host laptop\n  HostName 192.168.1.31\n")
    assert connectable_url(announced, seen, tailnet, list(lan), f"ssh -F {alias}") == announced
    for kept in ("ssh://bob@laptop.lan/m", "bob@192.168.1.31:m", "/srv/memory.git", "file:///srv/m.git"):
        assert connectable_url(kept, seen, tailnet, list(lan), ssh) == kept
    assert connectable_url(announced, (), None, list(lan), ssh) == announced


def test_tailscale_status_of_a_stopped_or_odd_tailnet() -> None:
    assert parse_tailscale_status({}) == []
    assert parse_tailscale_status({"BackendState": "Stopped", "Peer": None}) == []
    odd = {"Self": {"UserID": 1}, "Peer": {"k": {"HostName": "box", "Online": True, "UserID": 1}}}
    assert [c.name for c in parse_tailscale_status(odd)] == ["box"]


# -- real zeroconf on this host's network ---------------------------------------------------


# Every test run on this host shares one multicast network (other workers, other checkouts), so
# these tests name their machines uniquely and look only at what they made, and they share one
# xdist worker so their announcements do not compete for the CPU with each other.
on_host_network = pytest.mark.xdist_group("host-mdns")


def run_tag() -> str:
    """A suffix for machine ids that no other test run on this host announces at the same time."""
    return uuid.uuid4().hex[:8]


def discover_mine(store: Store, tag: str, at_least: int, tries: int = 5, **kw: Any) -> list[Peer]:
    """What `discover(store, seconds=2)` lists of this test's machines, looking again (up to `tries`
    times) while fewer than `at_least` of them answered.

    One 2-second window can miss an announcer that answers late (a loaded
    host, a dropped multicast packet); looking again is what a user does.
    The caller compares the whole list, so a wrong or extra machine still fails.
    """
    mine: list[Peer] = []
    for _ in range(tries):
        mine = [p for p in discover(store, seconds=2.0, **kw) if p.machine_id.endswith(f"-{tag}")]
        if len(mine) >= at_least:
            break
    return mine


@pytest.fixture
def host_network() -> None:
    reason = host_multicast_unavailable()
    if reason:
        skip_or_fail(reason)


@pytest.fixture
def announcers() -> Iterator[list[Announcer]]:
    started: list[Announcer] = []
    yield started
    for announcer in started:
        announcer.stop()


@on_host_network
@pytest.mark.timeout(90)
def test_discover_lists_machines_of_this_memory_only(
    tmp_path: Path, host_network: None, announcers: list[Announcer]
) -> None:
    tag = run_tag()
    a = make_store(tmp_path, f"disc-a-{tag}")
    b = make_store(tmp_path, f"disc-b-{tag}", clone_of=a)
    stranger = make_store(tmp_path, f"disc-stranger-{tag}")
    starting = []
    for store in (a, stranger):  # registering probes the name for a second: do both at once
        announcer = Announcer(store)
        announcers.append(announcer)
        starting.append(threading.Thread(target=announcer.start, args=(head(store.memory),)))
        starting[-1].start()
    for thread in starting:
        thread.join(timeout=20)
    found = discover_mine(b, tag, at_least=1)
    assert [(p.machine_id, p.head, p.same_store) for p in found] == [(f"disc-a-{tag}", head(a.memory), True)]
    assert found[0].url == advertise_url(a)
    everyone = discover_mine(b, tag, at_least=2, any_store=True)
    assert [(p.machine_id, p.same_store) for p in everyone] == [
        (f"disc-a-{tag}", True),
        (f"disc-stranger-{tag}", False),
    ]
    assert discover_mine(a, tag, at_least=0) == []  # a machine does not list itself


@on_host_network
@pytest.mark.timeout(60)
def test_a_new_head_reaches_the_other_machine(
    tmp_path: Path, host_network: None, announcers: list[Announcer]
) -> None:
    tag = run_tag()
    a_id = f"push-a-{tag}"
    a = make_store(tmp_path, a_id)
    b = make_store(tmp_path, f"push-b-{tag}", clone_of=a)
    seen: list[Peer] = []
    changed = threading.Event()

    def on_peer(peer: Peer) -> None:
        seen.append(peer)
        if peer.head == "1" * 40:
            changed.set()

    listener = Announcer(b, on_peer=on_peer)
    listener.start(head(b.memory))
    announcers.append(listener)
    speaker = Announcer(a)
    speaker.start(head(a.memory))
    announcers.append(speaker)
    deadline = time.monotonic() + 15
    while not any(p.machine_id == a_id for p in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen and seen[0].machine_id == a_id and seen[0].head == head(a.memory)
    speaker.set_head("1" * 40)
    assert changed.wait(15), f"the new HEAD never arrived; saw {seen}"
    assert listener.peers[a_id].head == "1" * 40
    assert all(p.machine_id == a_id for p in seen)  # never itself


@on_host_network
@pytest.mark.timeout(90)
def test_peers_discover_suggests_the_address_a_bare_host_name_was_seen_at(
    tmp_path: Path, host_network: None, announcers: list[Announcer], run_cli: RunCli
) -> None:
    tag = run_tag()
    a = make_store(tmp_path, f"sugg-a-{tag}")
    b = make_store(tmp_path, f"sugg-b-{tag}", clone_of=a)
    settings = load_settings(a)
    settings["advertise_url"] = f"ssh://bob@laptop-{tag}/home/bob/.anamnesis/memory"  # a bare hostname
    save_settings(a, settings)
    announcer = Announcer(a)
    announcers.append(announcer)
    announcer.start(head(a.memory))
    no_alias = tmp_path / "ssh_config"
    no_alias.write_text("")
    env = {"GIT_SSH_COMMAND": f"ssh -F {no_alias}"}
    mine: list[dict[str, Any]] = []
    for _ in range(5):  # one window can miss a late answer (see discover_mine)
        proc = run_cli("peers", "discover", "--seconds", "2", "--json", home_dir=b.home, env=env)
        assert proc.returncode == 0, proc.stderr
        mine = [p for p in json.loads(proc.stdout)["lan"] if p["machine_id"] == f"sugg-a-{tag}"]
        if mine:
            break
    assert len(mine) == 1, mine
    found = mine[0]
    assert found["url"] == settings["advertise_url"]
    host = found["suggested_url"].removeprefix("ssh://bob@").removesuffix("/home/bob/.anamnesis/memory")
    assert host in found["addresses"], found
    proc = run_cli("peers", "discover", "--seconds", "2", home_dir=b.home, env=env)
    if f"sugg-a-{tag}" in proc.stdout:
        assert f"anamnesis peers add sugg-a-{tag} {found['suggested_url']}" in proc.stdout, proc.stdout


def test_init_outside_a_terminal_only_says_how_to_look(run_cli: RunCli) -> None:
    proc = run_cli("init", "--no-claude", "--no-schedule")
    assert proc.returncode == 0, proc.stderr
    assert "anamnesis peers discover" in proc.stdout
    assert (
        "looking for your other machines" not in proc.stdout + proc.stderr
    )  # no listening without a terminal
