"""Three machines that are each other's peers, a real `anamnesis watch` on each: they settle.

Every machine writes a note at the same moment, three times. The watches sync on every push
they receive, so each integrates the others while they integrate it. Before merges of histories
holding the same notes were made alike on every machine (`TreeMerger.join`), a round never
ended: every watch merged the others' latest merge as a new commit of its own, pushed it, and
got theirs back, six commits every few seconds, the HEADs never equal. And before a sync pushed
its new head again to the peers it had pushed to before a later peer's push made it integrate
(that peer had moved on), one machine in about five runs was left a commit behind for good.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from fleet import ROOT, Fleet, Machine, fleet  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SETTLE_WITHIN = 90.0  # seconds for three watches to agree on one HEAD after a round of writes
QUIET_FOR = 8.0  # then this long without a new commit anywhere


def _heads(machines: list[Machine]) -> list[str]:
    return [m.git("rev-parse", "HEAD") for m in machines]


def _commits(machines: list[Machine]) -> list[int]:
    return [int(m.git("rev-list", "--count", "HEAD")) for m in machines]


def _written(machine: Machine, round_: int) -> int:
    """How many of the round's notes the machine holds."""
    return sum(f"round {round_}" in text for text in machine.files().values())


def test_a_mesh_of_three_watches_settles_on_one_head_after_simultaneous_writes(fleet: Fleet) -> None:
    machines = [fleet.machine(name) for name in "abc"]
    for m in machines:
        for other in machines:
            if other is not m:
                fleet.add_peer(m, other.name, fleet.url(other))
    watch = [sys.executable, "-m", "anamnesis", "watch", "--no-discovery", "--debounce", "0.2", "--interval", "600", "-q"]
    watches = [
        subprocess.Popen(
            watch, env=m.env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        for m in machines
    ]
    try:
        time.sleep(3)  # the watches are up
        for round_ in range(3):
            writers = [
                subprocess.Popen(
                    [sys.executable, "-m", "anamnesis", "new", f"Written on {m.name}, round {round_}", "--body", "x"],
                    env=m.env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                )
                for m in machines
            ]
            for writer in writers:
                assert writer.wait(timeout=60) == 0, writer.stderr.read() if writer.stderr else ""
            deadline = time.monotonic() + SETTLE_WITHIN
            while len(set(_heads(machines))) > 1 or any(_written(m, round_) < 3 for m in machines):
                assert time.monotonic() < deadline, (round_, _heads(machines), _commits(machines))
                time.sleep(0.5)
            settled = _commits(machines)
            time.sleep(QUIET_FOR)
            assert _commits(machines) == settled and len(set(_heads(machines))) == 1, (round_, settled, _commits(machines))
        assert [sum(_written(m, r) for r in range(3)) for m in machines] == [9, 9, 9]
    finally:
        for w in watches:
            os.killpg(w.pid, signal.SIGTERM)
        for w in watches:
            w.wait(timeout=30)
