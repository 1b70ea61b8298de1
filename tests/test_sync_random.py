"""Randomised fleet test: three machines edit, delete and sync in random order, some syncs SIGKILLed.

Every edit appends a unique token line to a note. At the end, after a final
round of syncs, every token must still be somewhere in the (identical) tree
of every machine — in the note or inside a conflict block — unless the note
was deleted by a machine that had seen that token (a later change replacing
it, which is allowed). No repo may be wedged, and every machine's search
index must answer the same.

The sequence of operations is fixed by the seed (ANAMNESIS_FLEET_SEED to
replay another one); where exactly a SIGKILL lands depends on timing.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fleet import Fleet, Machine, fleet  # noqa: F401

from anamnesis.conflicts import resolve_text
from anamnesis.index import open_index
from anamnesis.notes import has_conflict_markers
from anamnesis.recovery import git_processes_in
from anamnesis.search import search as search_notes
from anamnesis.store import create_note, delete_note

TOKEN_RE = re.compile(r"\btok\d{5}[abc]\b")
STEPS = int(os.environ.get("ANAMNESIS_FLEET_STEPS", "260"))
SEEDS = [int(s) for s in os.environ.get("ANAMNESIS_FLEET_SEED", "20240611").split(",")]


class World:
    """The fleet plus the oracle: every token written, and which ones a deletion may drop."""

    def __init__(self, fleet: Fleet, machines: list[Machine], repos: list[Path], rng: random.Random) -> None:  # noqa: F811
        self.fleet = fleet
        self.machines = machines
        self.repos = repos
        self.rng = rng
        self.counter = 0
        self.written: set[str] = set()
        self.may_vanish: set[str] = set()
        self.kills = 0
        self.syncs = 0
        self.baseline = self._measure(machines[0])

    @staticmethod
    def _measure(m: Machine) -> float:
        """How long a whole `anamnesis sync` process takes here: kills are timed relative to it."""
        started = time.perf_counter()
        proc = m.spawn_sync()
        proc.communicate(timeout=120)
        return time.perf_counter() - started

    def token(self, machine: Machine) -> str:
        self.counter += 1
        token = f"tok{self.counter:05d}{machine.name}"
        self.written.add(token)
        return token

    def notes(self, machine: Machine) -> list[str]:
        root = machine.memory
        return sorted(
            p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".git" not in p.relative_to(root).parts
        )

    # -- operations ------------------------------------------------------------------

    def create(self, m: Machine) -> None:
        token = self.token(m)
        if self.rng.random() < 0.5:
            create_note(m.store, type="semantic", title=f"Note {self.counter}", body=f"status: s0\n{token}\n")
        elif self.rng.random() < 0.8:
            m.write(f"global/facts/r{self.counter}-{m.name}.md", f"---\ntitle: R{self.counter}\n---\n\nstatus: s0\n{token}\n")
        else:  # the same path on several machines: both-added
            path = f"global/facts/shared-{self.rng.randrange(3)}.md"
            if (m.memory / path).exists():  # overwriting what this machine has: a replacement
                self.may_vanish.update(TOKEN_RE.findall(m.read(path)))
            m.write(path, f"# Shared\n\nstatus: s0\n{token}\n")

    def append(self, m: Machine) -> None:
        notes = self.notes(m)
        if not notes:
            return self.create(m)
        path = self.rng.choice(notes)
        text = m.read(path)
        m.write(path, text.rstrip("\n") + f"\n{self.token(m)}\n")

    def restatus(self, m: Machine) -> None:
        notes = self.notes(m)
        if notes:
            path = self.rng.choice(notes)
            m.write(path, re.sub(r"status: \w+", f"status: s{self.rng.randrange(100)}", m.read(path), count=1))

    def delete(self, m: Machine) -> None:
        notes = self.notes(m)
        if not notes:
            return
        path = self.rng.choice(notes)
        self.may_vanish.update(TOKEN_RE.findall(m.read(path)))  # this machine saw them: deleting replaces them
        if self.rng.random() < 0.5:
            delete_note(m.store, path)
        else:
            (m.memory / path).unlink()

    def resolve(self, m: Machine) -> None:
        for path in self.notes(m):
            text = m.read(path)
            if has_conflict_markers(text):
                m.write(path, resolve_text(text, "both"))
                return

    def sync(self, m: Machine) -> None:
        self.syncs += 1
        roll = self.rng.random()
        if roll < 0.5:
            result = m.sync()
            assert result.exit_code in (0, 10, 11), result.to_dict()
            return
        proc = m.spawn_sync()
        if roll < 0.6:
            _out, err = proc.communicate(timeout=120)
            assert proc.returncode in (0, 10, 11), err
            return
        # Interpreter start-up is most of a sync process: kill in its last two thirds, mostly inside sync().
        time.sleep(self.baseline * self.rng.uniform(0.4, 1.1))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            self.kills += 1
        proc.communicate(timeout=60)
        self.wait_for_orphans()

    def wait_for_orphans(self) -> None:
        """A killed sync's git children finish on their own; edits resume once they are gone."""
        deadline = time.monotonic() + 60
        while any(git_processes_in(repo) for repo in self.repos):
            assert time.monotonic() < deadline, "git processes did not finish"
            time.sleep(0.02)

    def step(self) -> None:
        m = self.rng.choice(self.machines)
        op = self.rng.choices(
            [self.create, self.append, self.restatus, self.delete, self.resolve, self.sync],
            weights=[14, 30, 8, 6, 3, 30],
        )[0]
        op(m)

    # -- the end ----------------------------------------------------------------------

    def settle(self) -> None:
        """Final rounds of syncs until every machine has the same tree."""
        for _round in range(6):
            for m in self.machines:
                result = m.sync()
                assert result.exit_code in (0, 10), result.to_dict()
            if len({m.tree() for m in self.machines}) == 1 and all(
                m.git("status", "--porcelain") == "" for m in self.machines
            ):
                return
        raise AssertionError(f"trees did not converge: {[m.tree() for m in self.machines]}")


def _not_wedged(m: Machine) -> None:
    git_dir = m.memory / ".git"
    for name in ("rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD", "index.lock"):
        assert not (git_dir / name).exists(), f"{m.name}: {name}"
    assert not list((git_dir / "refs").rglob("*.lock")), m.name
    assert m.git("symbolic-ref", "HEAD") == "refs/heads/main"
    fsck = subprocess.run(["git", "-C", str(m.memory), "fsck", "--no-dangling", "--no-progress"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
    assert not (m.home / "state" / "sync-checkout.json").exists()


def _index_drift(m: Machine) -> dict[str, list[str]]:
    """Paths the index has but the tree lacks, and the other way round (for failure messages)."""
    with open_index(m.store) as index:
        indexed = {row[0] for row in index.conn.execute("SELECT path FROM notes")}
    files = set(m.files())
    return {"index_only": sorted(indexed - files), "files_only": sorted(files - indexed)}


def _search(m: Machine, query: str) -> list[str]:
    with open_index(m.store) as index:
        return [hit.path for hit in search_notes(index, query, limit=200)]


@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.parametrize("topology", ["hub", "mesh"])
@pytest.mark.parametrize("seed", SEEDS)
def test_random_fleet_never_loses_an_edit(fleet: Fleet, topology: str, seed: int) -> None:  # noqa: F811
    rng = random.Random(f"{seed}-{topology}")
    names = ["a", "b", "c"]
    if topology == "hub":
        hub = fleet.hub()
        machines = [fleet.machine(n, {"hub": fleet.url(hub)}) for n in names]
        repos = [hub, *(m.memory for m in machines)]
    else:
        machines = [fleet.machine(n) for n in names]
        for m in machines:
            for other in machines:
                if other is not m:
                    fleet.add_peer(m, other.name, fleet.url(other))
        repos = [m.memory for m in machines]
    world = World(fleet, machines, repos, rng)
    for _ in range(STEPS):
        world.step()
    world.wait_for_orphans()
    world.settle()

    for m in machines:
        _not_wedged(m)
    final = machines[0].files()
    for m in machines[1:]:
        assert m.files() == final
    present = set(TOKEN_RE.findall("\n".join(final.values())))
    lost = world.written - present - world.may_vanish
    assert not lost, f"edits lost: {sorted(lost)[:20]} (of {len(world.written)} written, {world.kills} kills)"
    # Every machine's index answers the same, and matches the files.
    sample = rng.sample(sorted(present), min(25, len(present)))
    for token in [*sample, "status"]:
        answers = [sorted(_search(m, token)) for m in machines]
        assert answers[0] == answers[1] == answers[2], (token, [_index_drift(m) for m in machines])
        if token != "status":
            assert answers[0] == sorted(p for p, text in final.items() if token in text), token
    assert world.kills > 0, "no sync was killed; the test would not test recovery"
    print(f"\n{topology}: {len(world.written)} edits, {world.syncs} syncs, {world.kills} killed, "
          f"{len(world.may_vanish & world.written)} replaced by deletes, {len(final)} notes at the end")
