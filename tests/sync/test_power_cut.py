"""A power cut during sync's checkout: the whole process group dies while git moves the tree.

Two machines and a hub share 60 notes. Each round, B appends a line to 50 of
them and syncs; A changes a line of one of them; A's `sync` runs in a process
group of its own and the test SIGKILLs the whole group and every git it started
(as a power cut, a dead battery or the OOM killer would: `fleet.power_cut`) the moment
`git reset --keep` starts rewriting a chosen note. A kill "lands" when the
checkout marker is still there and the tree is half moved: some notes already
at the new commit, others still at the old one, or emptied, or cut short.
Then A runs `sync` (or `anamnesis new`, then `sync`), and no note may lose
its front matter or a line, none may get conflict markers, the sync must
exit 0 with every note equal to the hub's, and no index row may outlive its
file.

ANAMNESIS_POWER_CUT_LANDINGS sets how many landed kills the test needs (20);
it also goes on until at least one kill caught git writing a note (an empty
or cut-short file: the state that used to be merged as an edit).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import time
from pathlib import Path

import pytest
from fleet import Fleet, Machine, fleet, power_cut  # noqa: F401

from anamnesis.base.git import git_processes_in, read_blobs
from anamnesis.base.notes import has_conflict_markers, parse_note
from anamnesis.search.index import open_index
from anamnesis.store.operations import create_note
from anamnesis.store.recovery import CHECKOUT_MARKER

NOTES = 60
CHANGED = 50
LANDINGS = int(os.environ.get("ANAMNESIS_POWER_CUT_LANDINGS", "20"))
MAX_ATTEMPTS = LANDINGS * 6
FILLER = "".join(
    f"line {i:03d} of a note long enough that git takes a moment to write it out\n" for i in range(120)
)


def _stat_key(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def blobs(repo: Path, commit: str, paths: list[str]) -> dict[str, bytes | None]:
    """The bytes of each path at `commit` (None: not in that commit), read in one `git cat-file --batch`."""
    found = read_blobs(repo, [f"{commit}:{p}" for p in paths])
    return {p: found.get(f"{commit}:{p}") for p in paths}


def tree_states(machine: Machine, orig: str, target: str) -> dict[str, str]:
    """How far the killed checkout got, per path it had to write: old, new, missing, empty, partial or other."""
    repo = machine.memory
    paths = [
        p
        for p in subprocess.run(
            ["git", "-C", str(repo), "diff", "--name-only", "-z", "--no-renames", orig, target],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\0")
        if p
    ]
    old, new = blobs(repo, orig, paths), blobs(repo, target, paths)
    states: dict[str, str] = {}
    for path in paths:
        try:
            data: bytes | None = (repo / path).read_bytes()
        except FileNotFoundError:
            data = None
        want = new[path]
        if data == want:
            states[path] = "new"
        elif data == old[path]:
            states[path] = "old"
        elif data is None:
            states[path] = "missing"
        elif data == b"":
            states[path] = "empty"
        elif want is not None and want.startswith(data):
            states[path] = "partial"
        else:
            states[path] = "other"
    return states


class PowerCuts:
    """The two machines, the hub, and what every note must still hold."""

    def __init__(self, fleet: Fleet, rng: random.Random) -> None:
        self.rng = rng
        self.hub = fleet.hub()
        self.a = fleet.machine("a", {"hub": fleet.url(self.hub)})
        self.b = fleet.machine("b", {"hub": fleet.url(self.hub)})
        self.meta: dict[str, tuple[str, str, str]] = {}  # path -> (id, title, type)
        self.tokens: dict[str, list[str]] = {}
        self.status: dict[str, str] = {}
        for i in range(NOTES):
            kind = ("semantic", "procedural", "episodic")[i % 3]
            note = create_note(self.a.store, type=kind, title=f"Power note {i}", body=f"status: s0\n{FILLER}")
            self.meta[note.path] = (note.id, note.title, kind)
            self.tokens[note.path] = []
            self.status[note.path] = "s0"
        assert self.a.sync().exit_code == 0
        assert self.b.sync().exit_code == 0
        self.attempts = self.landed = 0
        self.seen: dict[str, int] = {}
        self.with_new = 0
        self.cut_mid_write = 0  # landed kills that left a note empty or cut short

    def round(self, number: int) -> None:
        a, b = self.a, self.b
        assert b.sync().exit_code == 0
        chosen = self.rng.sample(sorted(self.meta), CHANGED)
        for path in chosen:
            token = f"b-round{number:03d}-{path.rsplit('/', 1)[-1][:12]}"
            b.write(path, b.read(path).rstrip("\n") + f"\n{token}\n")
            self.tokens[path].append(token)
        result = b.sync()
        assert result.exit_code == 0, result.to_dict()
        mine = self.rng.choice(chosen)
        a.write(mine, re.sub(r"^status: \w+$", f"status: a{number}", a.read(mine), count=1, flags=re.M))
        self.status[mine] = f"a{number}"
        self.attempts += 1
        self.cut(sorted(chosen))
        self.recover(number)

    def cut(self, order: list[str]) -> None:
        """Start A's sync and cut the power (its group and every git below it) as git rewrites a note picked at random."""
        a = self.a
        marker = a.home / "state" / CHECKOUT_MARKER
        victim = a.memory / self.rng.choice(
            order
        )  # git writes in path order: any of them is a moment mid-checkout
        before = _stat_key(victim)
        proc = a.spawn_sync(new_session=True)
        started = time.monotonic()
        killed = False
        while proc.poll() is None and time.monotonic() - started < 60:
            if not marker.exists():
                time.sleep(0.0005)
                continue
            for _spin in range(200_000):
                if _stat_key(victim) != before:
                    power_cut(proc)
                    killed = True
                    break
            break
        if not killed and proc.poll() is None:
            power_cut(proc)  # the checkout never touched the victim: cut the power anyway
            killed = True
        proc.communicate(timeout=60)
        deadline = time.monotonic() + 30
        while git_processes_in(a.memory):
            assert time.monotonic() < deadline, "git processes did not end"
            time.sleep(0.01)
        if not killed or not marker.exists():
            return
        data = json.loads(marker.read_text())
        states = tree_states(a, data["orig"], data["target"])
        kinds = set(states.values())
        if kinds - {"new"} and kinds - {"old"}:  # neither still all old nor already all new: half moved
            self.landed += 1
            for kind in kinds:
                self.seen[kind] = self.seen.get(kind, 0) + sum(1 for s in states.values() if s == kind)
            self.cut_mid_write += bool(kinds & {"empty", "partial"})

    def recover(self, number: int) -> None:
        a = self.a
        if number % 2:
            proc = a.cli(
                "new",
                f"Written after power cut {number}",
                "-t",
                "semantic",
                "-G",
                "-b",
                "status: s0\nbetween syncs\n",
                "--json",
            )
            assert proc.returncode == 0, proc.stderr
            created = json.loads(proc.stdout)
            self.meta[created["path"]] = (created["id"], created["title"], "semantic")
            self.tokens[created["path"]] = ["between syncs"]
            self.status[created["path"]] = "s0"
            self.with_new += 1
        result = a.sync()
        assert result.exit_code == 0 and not result.conflicts, result.to_dict()
        self.check(a)
        assert (
            a.git("rev-parse", "HEAD")
            == subprocess.run(
                ["git", "-C", str(self.hub), "rev-parse", "main"], capture_output=True, text=True, check=True
            ).stdout.strip()
        )

    def check(self, m: Machine) -> None:
        """Every note whole: front matter, every line written, no markers; the index only has files."""
        assert not (m.home / "state" / CHECKOUT_MARKER).exists()
        assert m.git("status", "--porcelain") == ""
        for path, (note_id, title, kind) in self.meta.items():
            text = m.read(path)
            note = parse_note(text, path)
            assert (note.id, note.title, note.type) == (note_id, title, kind), (path, text[:300])
            assert not has_conflict_markers(text), (path, text[-600:])
            for token in self.tokens[path]:
                assert token in text, (path, token, text[-600:])
            assert f"status: {self.status[path]}\n" in text, (path, text[:400])
        with open_index(m.store) as index:
            rows = {row[0] for row in index.conn.execute("SELECT path FROM notes")}
        assert rows == set(self.meta), {
            "stale rows": sorted(rows - set(self.meta)),
            "missing": sorted(set(self.meta) - rows),
        }


@pytest.mark.e2e
@pytest.mark.xdist_group("kill-timing")  # kills timed against a measured sync: one at a time
@pytest.mark.timeout(1800)
def test_power_cut_mid_checkout_never_loses_a_note(fleet: Fleet) -> None:
    world = PowerCuts(fleet, random.Random(int(os.environ.get("ANAMNESIS_POWER_CUT_SEED", "10"))))
    number = 0
    while (world.landed < LANDINGS or not world.cut_mid_write) and world.attempts < MAX_ATTEMPTS:
        number += 1
        world.round(number)
    print(
        f"\npower cuts: {world.attempts} attempts, {world.landed} landed mid-checkout "
        f"({world.cut_mid_write} with a note emptied or cut short), {world.with_new} followed by `new`; "
        f"paths found: {world.seen}"
    )
    assert world.landed >= LANDINGS, f"only {world.landed} of {world.attempts} kills landed mid-checkout"
    assert world.cut_mid_write, "no kill caught git writing a note"
