"""Randomised fleet test: three machines edit, move, delete and sync in random order, some syncs SIGKILLed.

Half the kills hit the sync process alone (its git child lives on and
finishes); the other half are power cuts (`fleet.power_cut`): the process,
its group and every git it started die at once, mid commit, reset, fetch,
push or index write, leaving lock files and half-moved working trees.

Every edit appends a unique token line to a note. At the end, after a final
round of syncs, every token must still be somewhere in the (identical) tree
of every machine — in the note or inside a conflict block — unless the note
was deleted by a machine that had seen that token (a later change replacing
it, which is allowed). One id, one note: no note id is at two paths (notes
are moved, with `anamnesis mv` or by hand, to other folders, often the same
note on several machines at once). No repo may be wedged, and every
machine's search index must answer the same. After every sync that finished, on that
machine: no note lost its front matter (a note written with an id, title
and type still has them), no id is at two paths, and every index row's file
exists.

The sequence of operations is fixed by the seed (ANAMNESIS_FLEET_SEED to
replay another one, ANAMNESIS_FLEET_MACHINES for a bigger fleet, up to 8);
where exactly a SIGKILL lands depends on timing.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from fleet import Fleet, Machine, SyncClock, fleet, power_cut, ssh_fleet, sshd, wait_for_orphans  # noqa: F401

from anamnesis.base.errors import AnamnesisError, NoteChanged
from anamnesis.base.notes import has_conflict_markers, parse_note, split_front_matter
from anamnesis.search.engine import search as search_notes
from anamnesis.search.index import open_index
from anamnesis.store.merge import resolve_text
from anamnesis.store.operations import create_note, delete_note, move_note
from anamnesis.store.recovery import CHECKOUT_MARKER

TOKEN_RE = re.compile(r"\btok\d{5}[a-h]\b")
STEPS = int(os.environ.get("ANAMNESIS_FLEET_STEPS", "260"))
MACHINES = "abcdefgh"[: int(os.environ.get("ANAMNESIS_FLEET_MACHINES", "3"))]
MOVE_TO = ["global/howto", "global/facts", "projects/other-proj/howto", "archive"]
WORDS = ["lumen", "cobalt", "fern", "quartz"]
SEEDS = [int(s) for s in os.environ.get("ANAMNESIS_FLEET_SEED", "20240611").split(",")]
VIA = os.environ.get("ANAMNESIS_FLEET_VIA", "path")


class World:
    """The fleet plus the oracle: every token written, and which ones a deletion may drop."""

    def __init__(self, fleet: Fleet, machines: list[Machine], repos: list[Path], rng: random.Random) -> None:
        self.fleet = fleet
        self.machines = machines
        self.repos = repos
        self.rng = rng
        self.counter = 0
        self.written: set[str] = set()
        self.may_vanish: set[str] = set()
        self.front: dict[str, dict[str, str]] = {}  # path -> the front matter fields it was written with
        self.kills = 0
        self.moves = 0
        self.power_cuts = 0
        self.mid_checkout = 0
        self.syncs = 0
        self.history: list[str] = []  # what each step did, shown when a check fails
        self.clock = SyncClock(self._measure(machines[0]))

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
        self.noted(token)
        if self.rng.random() < 0.5:
            note = create_note(
                m.store, type="semantic", title=f"Note {self.counter}", body=f"status: s0\n{token}\n"
            )
            self.front[note.path] = {"id": note.id, "title": note.title, "type": "semantic"}
        elif self.rng.random() < 0.8:
            path = f"global/facts/r{self.counter}-{m.name}.md"
            m.write(path, f"---\ntitle: R{self.counter}\n---\n\nstatus: s0\n{token}\n")
            self.front[path] = {"title": f"R{self.counter}"}
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
        token = self.token(m)
        m.write(path, text.rstrip("\n") + f"\n{token}\n")
        self.noted(f"{path} {token}")

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
        seen = m.read(path)
        self.noted(path)
        if self.rng.random() < 0.5:
            try:
                delete_note(m.store, path)
            except NoteChanged:  # what was read was half moved by a killed sync: look again, then delete
                seen = m.read(path)
                delete_note(m.store, path)
        else:
            (m.memory / path).unlink()  # a half-moved file deleted by hand is restored by the next sync
        self.may_vanish.update(TOKEN_RE.findall(seen))  # this machine saw them: deleting replaces them

    def move(self, m: Machine) -> None:
        """Move a note with an id to another folder and name (`anamnesis mv`, or by hand with an
        edit); machines often move the same note, each to a place of its own."""
        notes = [p for p in self.notes(m) if re.search(r"^id: ", m.read(p).split("\n---", 1)[0], re.M)]
        if not notes:
            return
        path = self.rng.choice(notes)
        note_id = parse_note(m.read(path), path).id
        new = f"{self.rng.choice(MOVE_TO)}/moved-{self.rng.choice(WORDS)}-{self.counter}-{note_id}.md"
        self.counter += 1
        if (m.memory / new).exists():
            return
        self.moves += 1
        self.noted(f"{path} -> {new}")
        if self.rng.random() < 0.5:
            try:
                move_note(m.store, path, new)
            except AnamnesisError:
                pass  # what was picked was half moved by a killed sync and is gone now
            return
        text = m.read(path)
        (m.memory / path).unlink()
        if self.rng.random() < 0.5:
            token = self.token(m)
            text = text.rstrip("\n") + f"\n{token}\n"  # moved and edited in one go
            self.noted(token)
        m.write(new, text)

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
            self.noted(f"exit {int(result.exit_code)} {result.repaired or ''}")
            assert result.exit_code in (0, 10, 11), result.to_dict()
            self.check_whole(m)
            return
        proc, started = m.spawn_sync(new_session=True), time.perf_counter()
        if roll < 0.6:
            _out, err = proc.communicate(timeout=120)
            self.clock.observe(time.perf_counter() - started)
            assert proc.returncode in (0, 10, 11), err
            self.check_whole(m)
            return
        if roll < 0.7:
            self.at_checkout(m, proc)  # a moment that random timing seldom hits: git moving the tree
        else:
            # Interpreter start-up is most of a sync process: kill in its last two thirds, mostly inside sync().
            time.sleep(self.clock.seconds * self.rng.uniform(0.4, 1.1))
            if proc.poll() is not None:
                self.clock.observe(time.perf_counter() - started)  # too late: it had finished
        if proc.poll() is None:
            if self.rng.random() < 0.5:
                proc.send_signal(signal.SIGKILL)  # the process alone: its git finishes on its own
                self.noted("killed")
            else:
                power_cut(proc)  # everything at once, git included
                self.power_cuts += 1
                self.noted("power cut")
            self.kills += 1
            self.mid_checkout += (m.home / "state" / CHECKOUT_MARKER).exists()
        proc.communicate(timeout=60)
        self.wait_for_orphans()

    def at_checkout(self, m: Machine, proc: subprocess.Popen[str]) -> None:
        """Cut the power as git rewrites a file the sync is moving the working tree to (or just after)."""
        marker = m.home / "state" / CHECKOUT_MARKER
        deadline = time.monotonic() + 60
        while proc.poll() is None and not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.0005)
        try:
            moving = json.loads(marker.read_text())
            paths = subprocess.run(
                ["git", "-C", str(m.memory), "diff", "--name-only", "-z", moving["orig"], moving["target"]],
                capture_output=True,
                text=True,
            ).stdout.split("\0")
        except (OSError, ValueError, KeyError):
            paths = []
        victims = [m.memory / p for p in paths if p.endswith(".md")]
        if victims:
            victim = self.rng.choice(victims)
            before = _stat_key(victim)
            for _spin in range(100_000):
                if _stat_key(victim) != before:
                    break
        if proc.poll() is None:
            power_cut(proc)
            self.power_cuts += 1
            self.kills += 1
            self.mid_checkout += marker.exists()
            self.noted(f"power cut at checkout (mid-checkout: {marker.exists()})")

    def check_whole(self, m: Machine) -> None:
        """After a sync that finished: every note keeps its front matter, every index row has its file."""
        for path, fields in self.front.items():
            full = m.memory / path
            if full.exists():
                text = full.read_text(encoding="utf-8", errors="replace")
                front, _body = split_front_matter(
                    text
                )  # the file's own fields: nothing derived from its name
                meta = yaml.safe_load(front or "") if front is not None else None
                assert isinstance(meta, dict), (m.name, path, text[:400])
                assert {k: str(meta.get(k)) for k in fields} == fields, (m.name, path, text[:400])
        assert_one_path_per_id(m.files(), m.name)
        with open_index(m.store) as index:
            rows = [row[0] for row in index.conn.execute("SELECT path FROM notes")]
        stale = [p for p in rows if not (m.memory / p).is_file()]
        assert not stale, (m.name, "index rows without a file", stale)

    def wait_for_orphans(self) -> None:
        wait_for_orphans(self.repos)

    def step(self) -> None:
        m = self.rng.choice(self.machines)
        op = self.rng.choices(
            [self.create, self.append, self.restatus, self.delete, self.move, self.resolve, self.sync],
            weights=[14, 30, 8, 6, 5, 3, 30],
        )[0]
        self.history.append(f"{len(self.history)} {m.name} {op.__name__}")
        try:
            op(m)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nthe steps before:\n" + "\n".join(self.history[-40:])) from None

    def noted(self, what: str) -> None:
        """Add to what the current step did (shown when a check fails)."""
        if self.history:
            self.history[-1] += f" {what}"

    # -- the end ----------------------------------------------------------------------

    def settle(self) -> None:
        """Final rounds of syncs until every machine has the same tree."""
        try:
            self._settle()
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nthe steps before:\n" + "\n".join(self.history[-40:])) from None

    def _settle(self) -> None:
        for _round in range(6):
            for m in self.machines:
                result = m.sync()
                assert result.exit_code in (0, 10), result.to_dict()
                self.check_whole(m)
            if len({m.tree() for m in self.machines}) == 1 and all(
                m.git("status", "--porcelain") == "" for m in self.machines
            ):
                return
        raise AssertionError(f"trees did not converge: {[m.tree() for m in self.machines]}")


def _stat_key(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


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


def assert_one_path_per_id(files: dict[str, str], where: str = "") -> None:
    """One id, one note: no note id at two paths (a note moved to two places stays in one)."""
    paths: dict[str, list[str]] = {}
    for path, text in files.items():
        paths.setdefault(parse_note(text, path).id, []).append(path)
    twice = {note_id: found for note_id, found in paths.items() if len(found) > 1}
    assert not twice, f"{where}: ids at two paths: {twice}"


def _commits_touching(repos: list[Path], tokens: list[str]) -> str:
    """For a failure message: in each repo, the commits that added or removed each token."""
    lines = []
    for token in tokens:
        for repo in repos:
            proc = subprocess.run(
                ["git", "-C", str(repo), "log", "--all", "--format=%h %p %s", "-S", token],
                capture_output=True,
                text=True,
            )
            lines.append(f"{token} in {repo.name if repo.name != 'memory' else repo.parent.name}:")
            lines.extend(f"  {line}" for line in proc.stdout.splitlines())
    return "\n".join(lines)


def _search(m: Machine, query: str) -> list[str]:
    with open_index(m.store) as index:
        return [hit.path for hit in search_notes(index, query, limit=200)]


@pytest.mark.e2e
@pytest.mark.xdist_group("kill-timing")  # kills timed against a measured sync: one at a time
@pytest.mark.timeout(900)
@pytest.mark.parametrize("topology", ["hub", "mesh"])
@pytest.mark.parametrize("seed", SEEDS)
def test_random_fleet_never_loses_an_edit(request: pytest.FixtureRequest, topology: str, seed: int) -> None:
    # ANAMNESIS_FLEET_VIA=ssh: every peer over the test's sshd (a killed push then leaves the far
    # git running, as between two machines), instead of a path
    fleet: Fleet = request.getfixturevalue("ssh_fleet" if VIA == "ssh" else "fleet")
    rng = random.Random(f"{seed}-{topology}")
    names = list(MACHINES)
    if topology == "hub":
        hub = fleet.hub()
        machines = [fleet.machine(n, {"hub": fleet.url(hub, VIA)}) for n in names]
        repos = [hub, *(m.memory for m in machines)]
    else:
        machines = [fleet.machine(n) for n in names]
        for m in machines:
            for other in machines:
                if other is not m:
                    fleet.add_peer(m, other.name, fleet.url(other, VIA))
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
    assert_one_path_per_id(final)
    present = set(TOKEN_RE.findall("\n".join(final.values())))
    lost = world.written - present - world.may_vanish
    assert not lost, (
        f"edits lost: {sorted(lost)[:20]} (of {len(world.written)} written, {world.kills} kills)\n"
        + "\n".join(world.history)
        + "\n"
        + _commits_touching(repos, sorted(lost)[:3])
    )
    # Every machine's index answers the same, and matches the files.
    sample = rng.sample(sorted(present), min(25, len(present)))
    for token in [*sample, "status"]:
        answers = [sorted(_search(m, token)) for m in machines]
        assert all(a == answers[0] for a in answers), (token, [_index_drift(m) for m in machines])
        if token != "status":
            assert answers[0] == sorted(p for p, text in final.items() if token in text), token
    assert world.kills > 0, "no sync was killed; the test would not test recovery"
    assert world.power_cuts > 0, "no power cut: the test would not kill git with its sync"
    print(
        f"\n{topology}, {len(machines)} machines: {len(world.written)} edits, {world.moves} moves, {world.syncs} syncs, "
        f"{world.kills} killed "
        f"({world.power_cuts} power cuts, {world.mid_checkout} mid-checkout), "
        f"{len(world.may_vanish & world.written)} replaced by deletes, {len(final)} notes at the end"
    )
