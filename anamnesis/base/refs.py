"""The git ref names sync keeps in memory/, spelled in one place.

Everything sync fetched from or pushed to anyone is marked by a ref under
refs/anamnesis/ ("published": never rewritten):

- refs/anamnesis/peers/<peer>/<branch>: a peer's branches, as last fetched;
- refs/anamnesis/pushed/<peer>: what we last pushed to that peer;
- refs/anamnesis/incoming/<machine>[-<commit>]: what another machine pushed
  into this store (its main is checked out, so it cannot take our main);
- refs/anamnesis/retired/<peer>-<time>/...: the refs of a peer whose URL
  changed, set aside so they still mark that history as shared.
"""

from __future__ import annotations

import re

MAIN = "refs/heads/main"
ROOT = "refs/anamnesis/"
PUBLISHED_GLOB = f"--glob={ROOT}*"
INCOMING = f"{ROOT}incoming/"
INCOMING_GLOB = f"--glob={INCOMING}*"


def peer_branches(peer: str) -> str:
    """The prefix of a peer's fetched branches (ends with '/')."""
    return f"{ROOT}peers/{peer}/"


def peer_fetch_spec(peer: str) -> str:
    """The refspec that fetches every branch of a peer into its own place, forced (they are copies)."""
    return f"+refs/heads/*:{peer_branches(peer)}*"


def peer_main(peer: str) -> str:
    """A peer's main, as last fetched (or as last pushed to a hub)."""
    return f"{peer_branches(peer)}main"


def pushed(peer: str) -> str:
    """What this machine last pushed to `peer`."""
    return f"{ROOT}pushed/{peer}"


def ref_component(machine: str) -> str:
    """A machine id as one safe ref-name component."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", machine).strip("-") or "machine"


def incoming(machine: str, suffix: str = "") -> str:
    """Where `machine` pushes into another machine's store (`suffix`: a new name when the old one
    cannot move forward, so nothing is ever forced)."""
    return f"{INCOMING}{ref_component(machine)}" + (f"-{suffix}" if suffix else "")


def incoming_machine(ref: str) -> str:
    """The machine that pushed an incoming ref (full or `short` name): its name without the commit
    suffix `incoming` adds when the first name could not move forward."""
    name = short(ref).removeprefix("incoming/")
    return re.sub(r"-[0-9a-f]{12}$", "", name) or name


def retired(peer: str, stamp: str, ref: str) -> str:
    """Where `ref` (one of a re-pointed peer's refs) is kept."""
    return f"{ROOT}retired/{peer}-{stamp}/{short(ref)}"


def short(ref: str) -> str:
    """A ref under refs/anamnesis/ without that prefix (`incoming/m2`, the name sync reports)."""
    return ref.removeprefix(ROOT)
