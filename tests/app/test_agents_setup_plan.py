"""init's decisions in the core (anamnesis.app.setup_plan), apart from the prompts the CLI asks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anamnesis.app import setup_plan
from anamnesis.base.paths import Store
from anamnesis.sync.peers import add_peer


def test_plan_join_normalises_and_names_the_peer(store: Store) -> None:
    assert setup_plan.plan_join(store, None, None) is None
    plan = setup_plan.plan_join(store, "me@desk.tailnet.ts.net:.anamnesis/memory", None)
    assert plan is not None and plan.name == "desk" and plan.url.startswith("me@desk")
    named = setup_plan.plan_join(store, "/srv/hub.git", "hub")
    assert named is not None and named.name == "hub" and "join /srv/hub.git as peer 'hub'" in named.describe()


def test_schedule_choice(store: Store, tmp_path: Path) -> None:
    # the first machine, on its own: offered too (the others will push into it)
    assert setup_plan.schedule_choice(store, None, interactive=True) == "ask"
    assert setup_plan.schedule_choice(store, None, interactive=False) == "hint"
    assert setup_plan.schedule_choice(store, True, interactive=False) == "install"
    assert setup_plan.schedule_choice(store, False, interactive=True) == "skip"
    add_peer(store, "hub", str(tmp_path / "hub.git"))
    assert setup_plan.schedule_choice(store, None, interactive=True) == "ask"
    assert setup_plan.schedule_choice(store, None, interactive=False) == "hint"
    (line,) = setup_plan.first_sync(store, None)  # there is a peer now: a first sync is tried
    assert line.startswith("first sync: ")


def test_discovery_offers_add_or_join_and_notes(store: Store, tmp_path: Path) -> None:
    report: dict[str, Any] = {
        "lan": [
            {"machine_id": "desk", "url": "me@desk:.anamnesis/memory", "same_store": True},
            {"machine_id": "laptop", "url": None, "same_store": False},  # no URL: cannot be offered
            {"machine_id": "Work PC!", "url": "me@work:.anamnesis/memory", "same_store": False},
        ],
        "tailscale": [
            {"name": "nas.tailnet.ts.net", "hostname": "nas", "same_user": True, "suggested_url": "me@nas:.anamnesis/memory"},
            {"name": "other.ts.net", "hostname": "other", "same_user": False, "suggested_url": "x"},
        ],
    }
    offers = setup_plan.peer_offers(report)
    assert [(o.action, o.machine, o.name) for o in offers] == [("add", "desk", "desk"), ("join", "Work PC!", "work")]
    assert offers[0].default is True and offers[1].default is False  # merging into another memory: asked with no
    assert "a machine of this memory" in offers[0].question and "Join the memory" in offers[1].question
    notes = setup_plan.discovery_notes(report)
    assert notes == ["tailnet machine nas.tailnet.ts.net could be a peer: `anamnesis peers add nas me@nas:.anamnesis/memory`"]
    assert setup_plan.discovery_notes({"lan": [], "tailscale": None})[0].startswith("no other machine")
    assert setup_plan.discovery_wanted(store)
    line = setup_plan.accept_offer(store, offers[0])
    assert line == "added peer 'desk' → me@desk:.anamnesis/memory (found on the LAN)"
    assert not setup_plan.discovery_wanted(store)  # a peer is configured now: init stops looking


def test_a_peer_joined_without_a_name_gets_one_no_other_peer_has(store: Store) -> None:
    def name(url: str) -> str:
        plan = setup_plan.plan_join(store, url, None)
        assert plan is not None
        add_peer(store, plan.name, plan.url)
        return plan.name

    # an address is kept whole (every Tailscale address starts with 100.), then its user or folder tells them apart
    assert name("ssh://ana@100.64.0.7/~/.anamnesis/memory") == "100.64.0.7"
    assert name("ssh://bob@100.64.0.7/~/.anamnesis/memory") == "bob-100.64.0.7"
    assert name("desk:/srv/machine-a/memory") == "desk"
    assert name("desk:/srv/machine-b/memory") == "desk-machine-b"
    assert name("desk:/srv/machine-b/memory") == "desk-machine-b"  # the same peer again keeps its name
    assert name("ssh://[fd7a:115c:a1e0::1]:22/srv/memory") == "ip6-fd7a-115c-a1e0-1"
    assert name("/mnt/usb/memory.git") == "usb" and name("/mnt/other/usb/memory.git") == "usb-2"
