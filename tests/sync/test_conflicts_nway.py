"""Conflicts among three or more machines, with real git (a bare hub or a mesh of stores).

A note in conflict must always hold well-formed blocks, one per conflicting
region, with every machine's version in it (N-way, never nested); `conflicts`
must find any marker line, and `resolve` (--keep, --ours, --theirs, --both,
--edit) must handle every block.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import signal
import subprocess
import time

import pytest
from fleet import Fleet, Machine, SyncClock, fleet, wait_for_orphans  # noqa: F401

from anamnesis.base.errors import UsageError
from anamnesis.base.git import git_processes_in
from anamnesis.base.notes import has_conflict_markers, split_front_matter
from anamnesis.search.index import open_index
from anamnesis.store.merge import Block, Section, parse_blocks, render_sections, resolve_text
from anamnesis.store.operations import create_note, update_note

MARKER = re.compile(r"^(<<<<<<<|=======|>>>>>>>|\|\|\|\|\|\|\|)( |$)", re.M)


def blocks_of(text: str) -> list[Block]:
    return [p for p in parse_blocks(split_front_matter(text)[1]) if isinstance(p, Block)]


def assert_well_formed(text: str) -> list[Block]:
    """Every marker line belongs to a complete, non-nested block; returns the blocks."""
    body = split_front_matter(text)[1]
    pieces = parse_blocks(body)
    blocks = [p for p in pieces if isinstance(p, Block)]
    loose = [p for p in pieces if isinstance(p, str) and MARKER.match(p)]
    assert not loose, f"marker lines outside a block: {loose}\n{text}"
    for block in blocks:
        assert len(block.sections) >= 2, text
        for section in block.sections:
            assert not any(MARKER.match(line) for line in section.lines), f"nested block\n{text}"
    opens, closes = len(re.findall(r"^<<<<<<< ", body, re.M)), len(re.findall(r"^>>>>>>> ", body, re.M))
    assert opens == closes == len(blocks), text
    return blocks


def three_way(fleet: Fleet) -> tuple[list[Machine], str, str]:
    """The issue's reproduction: three machines and a hub, one line edited on all three, then
    `sync` on m1, `sync --no-push` on m0 (its conflict commit stays unpushed), `sync` on m2, `sync` on m0."""
    machines, note = fleet.one_line_edited_everywhere(("m0", "m1", "m2"))
    m0, m1, m2 = machines
    assert m1.cli("sync").returncode == 0
    assert m0.cli("sync", "--no-push").returncode == 10
    assert m2.cli("sync").returncode == 10
    proc = m0.cli("sync")
    assert proc.returncode == 10, proc.stdout + proc.stderr
    for m in (m1, m2, m0, m1, m2):
        m.sync()
    assert len({m.tree() for m in machines}) == 1
    return machines, note.id, note.path


def test_a_conflict_replayed_onto_another_conflict_is_one_block_with_every_version(fleet: Fleet) -> None:
    machines, _note_id, path = three_way(fleet)
    text = machines[0].read(path)
    [block] = assert_well_formed(text)
    assert [s.label for s in block.sections] == ["m0", "m1", "m2"]
    assert ["".join(s.lines) for s in block.sections] == [f"middle from m{i}\n" for i in range(3)]
    # Readable as git conflict markers, with the middle version's label on its separator.
    assert (
        "top\n<<<<<<< m0\nmiddle from m0\n======= m1\nmiddle from m1\n=======\nmiddle from m2\n>>>>>>> m2\nbottom\n"
        in text
    )
    listed = json.loads(machines[1].cli("conflicts", "--json").stdout)
    assert [(c["path"], c["blocks"]) for c in listed] == [(path, [["m0", "m1", "m2"]])]
    with open_index(machines[2].store) as index:
        assert [h.path for h in index.conflicted()] == [path]


def test_lines_written_after_a_conflict_block_stay_once_and_the_note_never_doubles(fleet: Fleet) -> None:
    """Two machines keep appending to a note in conflict, syncing in turn: each line is in the note
    once, in its own machine's version or after the block, never copied into the other versions
    (each merge used to copy them again: the note doubled every round, to 16 MB in a minute)."""
    hub = fleet.hub()
    x = fleet.machine("x", {"hub": str(hub)})
    y = fleet.machine("y", {"hub": str(hub)})
    note = create_note(x.store, type="semantic", title="Shared note", body="start\n")
    x.sync()
    y.sync()
    sizes = []
    for i in range(1, 7):
        x.write(note.path, x.read(note.path) + f"X line {i}\n")
        y.write(note.path, y.read(note.path) + f"Y line {i}\n")
        y.cli("sync")
        x.cli("sync")
        sizes.append(len(x.read(note.path).splitlines()))
    for m in (y, x, y):
        m.cli("sync")
    text = x.read(note.path)
    assert text == y.read(note.path)
    assert_well_formed(text)
    body = split_front_matter(text)[1]
    for who in "XY":
        for i in range(1, 7):
            assert body.count(f"{who} line {i}\n") == 1, (who, i, body)
    assert max(b - a for a, b in itertools.pairwise(sizes)) < 10, sizes  # linear, not doubling
    for block in blocks_of(text):
        assert len({s.label for s in block.sections}) == len(block.sections), block  # one section a machine


def _half_resolved_on_m0(fleet: Fleet) -> tuple[Machine, Machine, str, str]:
    """A three-way block on m0 with its opening marker removed by hand: held back by sync.
    (m0, m1, the note's path, the half-resolved text)."""
    machines, _note_id, path = three_way(fleet)
    m0, m1, _m2 = machines
    half = m0.read(path).replace("<<<<<<< m0\n", "", 1)
    m0.write(path, half)
    assert m0.cli("sync").returncode == 10  # held back
    return m0, m1, path, half


def test_a_half_resolved_note_held_back_gets_the_other_machines_lines_after_it(fleet: Fleet) -> None:
    """A person removed the opening marker only (held back, not committed); meanwhile another
    machine appended a line after the block: the held text comes back as it was, that line after it."""
    m0, m1, path, _half = _half_resolved_on_m0(fleet)
    m1.write(path, m1.read(path).replace(">>>>>>> m2\n", ">>>>>>> m2\nwritten on m1 right after it\n"))
    assert m1.cli("sync").returncode == 0
    m0.cli("sync")
    text = m0.read(path)
    assert text.count("written on m1 right after it\n") == 1 and "(not committed)" not in text, text
    assert ">>>>>>> m2\nwritten on m1 right after it\nbottom\n" in text, text
    assert "<<<<<<< m0" not in text and "middle from m0\n" in text  # the person's edit stands


def test_a_half_resolved_note_held_back_gets_another_machines_change_to_the_line_after_it(fleet: Fleet) -> None:
    """As above, but the other machine reworded the line right after the block (and its stamp
    changed): line by line the two edits do not touch, so the held text comes back as the person
    left it with that line reworded, not as a new block with the person's edit as one version."""
    m0, m1, path, half = _half_resolved_on_m0(fleet)
    m1.write(path, m1.read(path).replace(">>>>>>> m2\nbottom\n", ">>>>>>> m2\nbottom, reworded on m1\n"))
    assert m1.cli("sync").returncode == 0
    assert m0.cli("sync").returncode == 10  # still held back: the person has not finished
    text = m0.read(path)
    assert "(not committed)" not in text, text
    assert text == half.replace(">>>>>>> m2\nbottom\n", ">>>>>>> m2\nbottom, reworded on m1\n").replace(
        split_front_matter(half)[0], split_front_matter(text)[0]
    ), text
    assert text.count("middle from m0\n") == 1 and "<<<<<<< m0" not in text  # the person's edit stands
    listed = m0.cli("conflicts")
    assert " ↔  ↔" not in listed.stdout, listed.stdout


def test_resolve_handles_an_nway_block_in_every_form(fleet: Fleet) -> None:
    machines, note_id, path = three_way(fleet)
    m0, m1, m2 = machines
    text = m0.read(path)
    proc = m0.cli("resolve", note_id, "--theirs")  # three versions: "theirs" does not say which
    assert (
        proc.returncode == 2 and all(n in proc.stderr for n in ("m0", "m1", "m2")) and "--keep" in proc.stderr
    )
    assert m0.read(path) == text  # nothing written
    proc = m0.cli("resolve", note_id, "--keep", "m9")
    assert proc.returncode == 2 and "m9" in proc.stderr and "m0, m1, m2" in proc.stderr
    proc = m1.cli("resolve", note_id, "--ours")  # m1's own version
    assert proc.returncode == 0, proc.stderr
    assert (
        "middle from m1\n" in m1.read(path)
        and "from m0" not in m1.read(path)
        and "from m2" not in m1.read(path)
    )
    assert not has_conflict_markers(m1.read(path))
    proc = m2.cli("resolve", note_id, "--keep", "m0")
    assert proc.returncode == 0, proc.stderr
    assert "top\nmiddle from m0\nbottom\n" in m2.read(path)
    proc = m0.cli("resolve", note_id, "--both")
    assert proc.returncode == 0, proc.stderr
    assert "top\nmiddle from m0\nmiddle from m1\nmiddle from m2\nbottom\n" in m0.read(path)
    for m in machines:
        assert json.loads(m.cli("conflicts", "--json").stdout) == []
        assert m.git("status", "--porcelain") == ""  # each resolution is committed
    # Three different resolutions meet: a new, well-formed conflict about the resolutions.
    for m in (m0, m1, m2, m0, m1):
        m.sync()
    assert len({m.tree() for m in machines}) == 1
    final = m0.read(path)
    [block] = assert_well_formed(final)
    assert all(f"middle from m{i}\n" in final for i in range(3))
    assert m0.cli("resolve", note_id, "--keep", block.sections[-1].label).returncode == 0
    m0.sync()
    assert not has_conflict_markers(m0.read(path))


def test_ours_is_this_machine_and_theirs_the_other(fleet: Fleet) -> None:
    hub = fleet.hub()
    a, b, c = (fleet.machine(n, {"hub": fleet.url(hub)}) for n in ("a", "b", "c"))
    note = create_note(a.store, type="semantic", title="Two sides", body="x\nline\ny\n")
    for m in (a, b, c):
        m.sync()
    update_note(a.store, note.id, body="x\nline from a\ny\n")
    update_note(b.store, note.id, body="x\nline from b\ny\n")
    a.sync()
    assert b.sync().exit_code == 10
    a.sync()
    c.sync()
    text = b.read(note.path)
    assert "<<<<<<< a\nline from a\n=======\nline from b\n>>>>>>> b\n" in text  # two sides: plain git markers
    proc = c.cli("resolve", note.id, "--ours")  # c wrote neither version
    assert proc.returncode == 2 and "c has no version" in proc.stderr and "a, b" in proc.stderr
    proc = c.cli("resolve", note.id, "--theirs")
    assert proc.returncode == 2 and "--keep" in proc.stderr
    assert c.read(note.path) == text
    proc = b.cli("resolve", note.id, "--ours")  # on b: b's line, although b's side is the lower one
    assert proc.returncode == 0, proc.stderr
    assert "line from b" in b.read(note.path) and "line from a" not in b.read(note.path)
    proc = a.cli("resolve", note.id, "--theirs")  # on a: b's line
    assert proc.returncode == 0, proc.stderr
    assert "line from b" in a.read(note.path) and "line from a" not in a.read(note.path)
    for m in (a, b, c, a):
        m.sync()
    assert not has_conflict_markers(c.read(note.path)) and "line from b" in c.read(note.path)


def test_markers_half_removed_by_hand_are_found_and_resolve_says_what_to_do(fleet: Fleet) -> None:
    hub = fleet.hub()
    a, b = (fleet.machine(n, {"hub": fleet.url(hub)}) for n in ("a", "b"))
    note = create_note(a.store, type="semantic", title="Half", body="x\nline\ny\n")
    a.sync()
    b.sync()
    update_note(a.store, note.id, body="x\nline from a\ny\n")
    update_note(b.store, note.id, body="x\nline from b\ny\n")
    a.sync()
    b.sync()
    text = b.read(note.path)
    b.write(note.path, text.replace("<<<<<<< a\n", ""))  # the opening line deleted, the rest left
    result = b.sync()  # never committed nor sent half resolved: held back, the edit kept
    assert result.exit_code == 10 and [h.path for h in result.held_back] == [note.path]
    assert b.read(note.path) == text.replace("<<<<<<< a\n", "")
    a.sync()
    assert a.read(note.path) == text  # the other machine still has the whole block
    listed = json.loads(b.cli("conflicts", "--json").stdout)
    assert [c["path"] for c in listed] == [note.path]
    assert listed[0]["blocks"] == [] and len(listed[0]["stray_markers"]) == 2
    proc = b.cli("conflicts")
    assert note.path in proc.stdout and "--edit" in proc.stdout
    with open_index(b.store) as index:
        index.refresh()
        assert [h.path for h in index.conflicted()] == [note.path]
    proc = b.cli("resolve", note.id)
    assert (
        proc.returncode == 2 and "conflict marker" in proc.stderr and "nothing to resolve" not in proc.stderr
    )
    proc = b.cli("resolve", note.id, "--ours")
    assert proc.returncode == 2 and "--edit" in proc.stderr and "line" in proc.stderr
    proc = b.cli("resolve", note.id, "--both")  # every version kept, every stray marker line gone
    assert proc.returncode == 0, proc.stderr
    resolved = b.read(note.path)
    assert "x\nline from a\nline from b\ny\n" in resolved and not has_conflict_markers(resolved)
    assert json.loads(b.cli("conflicts", "--json").stdout) == []
    assert b.sync().exit_code == 0 and a.sync().exit_code == 0  # whole again: it syncs
    assert a.read(note.path) == resolved


def test_the_dashboard_shows_each_version_and_keeps_the_one_chosen(fleet: Fleet) -> None:
    import httpx
    from web_support import dashboard

    from anamnesis.web.security import csrf_for

    machines, _note_id, path = three_way(fleet)
    m1 = machines[1]
    with dashboard(m1.home) as running, httpx.Client(
        base_url=running.base, cookies={f"anamnesis_{running.port}": running.token}, timeout=30
    ) as http:
        assert "m0 ↔ m1 ↔ m2" in http.get("/conflicts").text
        page = http.get("/conflicts/" + path).text
        assert "Keep ours (m1)" in page and "Keep m0" in page and "Keep m2" in page and "Keep all" in page
        assert 'value="keep:m2"' in page and "Keep theirs" not in page  # three versions: no "theirs"
        base = re.search(r'name="base" value="([0-9a-f]+)"', page)
        assert base is not None
        form = {"action": "keep:m2", "base": base.group(1), "_csrf": csrf_for(running.token)}
        response = http.post("/conflicts/" + path, data=form, follow_redirects=False)
        assert response.status_code == 303, response.text
    text = m1.read(path)
    assert "top\nmiddle from m2\nbottom\n" in text and not has_conflict_markers(text)
    assert m1.git("status", "--porcelain") == ""


def test_a_setext_heading_is_not_a_conflict() -> None:
    # `=======` alone is also a markdown heading underline: it counts only beside another marker line.
    assert not has_conflict_markers("Summary\n=======\n\ntext\n")
    assert has_conflict_markers("Summary\n=======\n\ntext\n>>>>>>> b\n")
    assert has_conflict_markers("a\n<<<<<<< x\n")
    assert has_conflict_markers("a\n======= m1\nb\n")
    assert (
        resolve_text("Summary\n=======\n<<<<<<< a\nA\n=======\nB\n>>>>>>> b\n", "both")
        == "Summary\n=======\nA\nB\n"
    )


def test_a_note_moved_to_two_places_ends_up_in_one(fleet: Fleet) -> None:
    hub = fleet.hub()
    a, b = (fleet.machine(n, {"hub": fleet.url(hub)}) for n in ("a", "b"))
    note = create_note(a.store, type="semantic", title="Wanderer", body="one\ntwo\nthree\nfour\n")
    a.sync()
    b.sync()
    (a.memory / "zeta").mkdir()
    (a.memory / note.path).rename(a.memory / "zeta" / "wanderer.md")
    a.write("zeta/wanderer.md", a.read("zeta/wanderer.md").replace("one\n", "one, a\n"))
    (b.memory / "alpha").mkdir()
    (b.memory / note.path).rename(b.memory / "alpha" / "wanderer.md")
    b.write("alpha/wanderer.md", b.read("alpha/wanderer.md").replace("four\n", "four, b\n"))
    a.sync()
    result = b.sync()
    assert result.exit_code == 0
    assert any("alpha/wanderer.md" in line and "zeta/wanderer.md" in line for line in result.repaired), (
        result.repaired
    )
    a.sync()
    for m in (a, b):
        notes = sorted(p for p in m.files())
        assert notes == ["alpha/wanderer.md"], notes  # one path, the same on every machine
        assert "one, a\n" in m.read("alpha/wanderer.md") and "four, b\n" in m.read("alpha/wanderer.md")
        proc = m.cli("show", note.id)
        assert proc.returncode == 0, proc.stderr
    assert a.tree() == b.tree()


# -- randomised: five machines, the same lines edited everywhere, syncs killed -----------------

TOKEN_RE = re.compile(r"\bt\d{5}m\d\b")
NWAY_STEPS = int(os.environ.get("ANAMNESIS_NWAY_STEPS", "140"))
NWAY_SEEDS = [int(s) for s in os.environ.get("ANAMNESIS_NWAY_SEED", "7101").split(",")]


class Mesh:
    """Five machines that keep editing the same few lines, and the oracle: every version written
    must stay in the note (in a block or not) unless a machine that saw it replaced it."""

    def __init__(self, fleet: Fleet, machines: list[Machine], paths: list[str], rng: random.Random) -> None:
        self.fleet = fleet
        self.machines = machines
        self.paths = paths
        self.rng = rng
        self.repos = [m.memory for m in machines] + sorted(fleet.root.glob("*.git"))
        self.counter = 0
        self.written: set[str] = set()
        self.may_vanish: set[str] = set()
        self.stats = {
            "syncs": 0,
            "no_push": 0,
            "killed": 0,
            "git_killed": 0,
            "checks": 0,
            "max_versions": 0,
            "nway": 0,
        }
        started = time.perf_counter()
        machines[0].spawn_sync().communicate(timeout=120)
        self.clock = SyncClock(time.perf_counter() - started)

    def token(self, m: Machine) -> str:
        self.counter += 1
        token = f"t{self.counter:05d}{m.name}"
        self.written.add(token)
        return token

    def replaced(self, before: str, after: str) -> None:
        """A machine rewrote `before` as `after`: the versions it dropped were seen, so may go."""
        self.may_vanish |= set(TOKEN_RE.findall(before)) - set(TOKEN_RE.findall(after))

    # -- what people do -----------------------------------------------------------------

    def edit(self, m: Machine) -> None:
        path = self.rng.choice(self.paths)
        text = m.read(path)
        key = self.rng.choice(["A", "B"])
        line = f"{key}: {self.token(m)}\n"
        pieces = parse_blocks(text)
        block = next(
            (
                p
                for p in pieces
                if isinstance(p, Block) and any(x.startswith(f"{key}: ") for s in p.sections for x in s.lines)
            ),
            None,
        )
        if block is None:
            new = re.sub(f"^{key}: .*\n", line, text, count=1, flags=re.M)
        else:
            roll = self.rng.random()
            mine = [s for s in block.sections if m.name in s.names]
            if roll < 0.4 and mine:  # change its own version inside the block
                sections = [
                    Section(s.label, [line if x.startswith(f"{key}: ") else x for x in s.lines])
                    if s is mine[0]
                    else s
                    for s in block.sections
                ]
                new = text.replace(block.raw, render_sections(sections), 1)
            elif roll < 0.75:  # resolve the note keeping one machine's version (every block), or all
                label = self.rng.choice(block.machines)
                try:
                    new = resolve_text(text, f"keep:{label}", me=m.name)
                except UsageError:
                    new = resolve_text(text, "both")
            elif roll < 0.85:
                new = resolve_text(text, "both")
            else:  # resolve this block by hand with new text
                new = text.replace(block.raw, line, 1)
        if line not in new:
            self.written.discard(line.split(": ")[1].strip())  # a resolution wrote no new version
        self.replaced(text, new)
        m.write(path, new)

    def append(self, m: Machine) -> None:
        path = self.rng.choice(self.paths)
        m.write(path, m.read(path) + f"C: {self.token(m)}\n")

    def retitle(self, m: Machine) -> None:
        path = self.rng.choice(self.paths)
        text = m.read(path)
        stamp = (
            f"2030-01-01T{self.counter // 3600:02d}:{self.counter // 60 % 60:02d}:{self.counter % 60:02d}Z"
        )
        new = re.sub(r"^title: .*$", f"title: Note {self.token(m)}", text, count=1, flags=re.M)
        new = re.sub(r"^updated: .*$", f"updated: '{stamp}'", new, count=1, flags=re.M)
        self.replaced(text.split("\n---\n", 1)[0], new.split("\n---\n", 1)[0])
        m.write(path, new)

    def sync(self, m: Machine) -> None:
        self.stats["syncs"] += 1
        roll = self.rng.random()
        if roll < 0.35:
            assert m.sync().exit_code in (0, 10, 11)
        elif roll < 0.55:
            self.stats["no_push"] += 1
            assert m.sync(push=False).exit_code in (0, 10, 11)
        elif roll < 0.78:
            proc, started = m.spawn_sync(), time.perf_counter()
            time.sleep(self.clock.seconds * self.rng.uniform(0.4, 1.1))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                self.stats["killed"] += 1
            else:
                self.clock.observe(time.perf_counter() - started)  # too late: it had finished
            proc.communicate(timeout=60)
        else:
            # Kill one of the sync's git processes (fetch, merge-file, push, checkout...).
            proc, started, hit = m.spawn_sync(), time.perf_counter(), False
            deadline = time.monotonic() + self.clock.seconds * self.rng.uniform(0.25, 0.9)
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.003)
            while proc.poll() is None:
                pids = [pid for repo in self.repos for pid in git_processes_in(repo)]
                if pids:
                    try:
                        os.kill(self.rng.choice(pids), signal.SIGKILL)
                        self.stats["git_killed"] += 1
                        hit = True
                    except ProcessLookupError:
                        continue
                    break
                time.sleep(0.002)
            proc.communicate(timeout=120)
            if not hit:
                self.clock.observe(time.perf_counter() - started)  # it ran to its end untouched
        self.wait_for_orphans()
        self.check(m)

    def wait_for_orphans(self) -> None:
        wait_for_orphans(self.repos)  # a killed hub receive-pack's ref lock too, as its own git would drop it

    def step(self) -> None:
        m = self.rng.choice(self.machines)
        op = self.rng.choices([self.edit, self.append, self.retitle, self.sync], weights=[36, 8, 5, 51])[0]
        op(m)

    # -- what must hold -------------------------------------------------------------------

    def check(self, m: Machine) -> None:
        """Every note of `m` holds only well-formed, flat blocks. (A sync killed in the middle of a
        checkout can leave a tracked file missing from the work tree for a moment; the next sync
        puts it back, and the end of the test checks that nothing was lost.)"""
        tracked = [p for p in m.git("ls-files", "-z").split("\0") if p.endswith(".md")]
        for path in tracked:
            try:
                text = (m.memory / path).read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
            blocks = assert_well_formed(text)
            self.stats["checks"] += 1
            for block in blocks:
                self.stats["max_versions"] = max(self.stats["max_versions"], len(block.sections))
                self.stats["nway"] += len(block.sections) >= 3
            assert has_conflict_markers(text) == bool(blocks), path

    def settle(self) -> None:
        for _round in range(8):
            for m in self.machines:
                assert m.sync().exit_code in (0, 10), m.name
            if len({m.tree() for m in self.machines}) == 1 and all(
                m.git("status", "--porcelain") == "" for m in self.machines
            ):
                return
        raise AssertionError(f"trees did not converge: {[m.tree() for m in self.machines]}")


def other_field_values(text: str) -> set[str]:
    """Versions only in a front-matter block, not in the field itself (`--both` keeps the field's)."""
    fm, _body = split_front_matter(text)
    found = {t for block in blocks_of(text) if block.front_matter for t in TOKEN_RE.findall(block.raw)}
    return found - set(TOKEN_RE.findall(fm or ""))


def _not_wedged(m: Machine) -> None:
    git_dir = m.memory / ".git"
    for name in ("rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD", "index.lock"):
        assert not (git_dir / name).exists(), f"{m.name}: {name}"
    assert m.git("symbolic-ref", "HEAD") == "refs/heads/main"
    fsck = subprocess.run(
        ["git", "-C", str(m.memory), "fsck", "--no-dangling", "--no-progress"], capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stderr


@pytest.mark.e2e
@pytest.mark.xdist_group("kill-timing")  # kills timed against a measured sync: one at a time
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("topology", ["mesh", "hub"])
@pytest.mark.parametrize("seed", NWAY_SEEDS)
def test_random_nway_conflicts_stay_flat_complete_and_resolvable(
    fleet: Fleet, topology: str, seed: int
) -> None:
    rng = random.Random(f"{seed}-{topology}")
    names = [f"m{i}" for i in range(5)]
    if topology == "hub":
        hub = fleet.hub()
        machines = [fleet.machine(n, {"hub": fleet.url(hub)}) for n in names]
    else:
        machines = [fleet.machine(n) for n in names]
        for m in machines:
            for other in machines:
                if other is not m:
                    fleet.add_peer(m, other.name, fleet.url(other))
    paths = [
        create_note(
            machines[0].store,
            type="semantic",
            title=f"Shared {n}",
            body="A: a0\nmid one\nmid two\nB: b0\nend\n",
        ).path
        for n in range(2)
    ]
    world = Mesh(fleet, machines, paths, rng)
    world.settle()
    for _ in range(NWAY_STEPS):
        world.step()
    world.wait_for_orphans()
    world.settle()

    final = machines[0].files()
    for m in machines:
        _not_wedged(m)
        assert m.files() == final
        world.check(m)
    present = set(TOKEN_RE.findall("\n".join(final.values())))
    lost = world.written - present - world.may_vanish
    assert not lost, f"versions lost: {sorted(lost)[:20]} ({world.stats})"
    # `conflicts` and the index flag exactly the notes with blocks, on every machine.
    conflicted = sorted(p for p, text in final.items() if has_conflict_markers(text))
    listed = json.loads(machines[1].cli("conflicts", "--json").stdout)
    assert [c["path"] for c in listed] == conflicted and all(not c["stray_markers"] for c in listed)
    for m in machines:
        with open_index(m.store) as index:
            assert sorted(h.path for h in index.conflicted()) == conflicted, m.name
    # Every form of resolve handles every note: no marker left, or a clear refusal.
    for path in conflicted:
        text = final[path]
        blocks = blocks_of(text)
        for label in {name for block in blocks for name in block.machines}:
            try:
                kept = resolve_text(text, f"keep:{label}")
            except UsageError as exc:
                assert any(label not in block.machines for block in blocks), exc
                assert "has no version" in str(exc)
            else:
                assert not has_conflict_markers(kept)
        everything = resolve_text(text, "both")
        # Every version is kept, but of a front-matter field only the value in the field.
        assert not has_conflict_markers(everything)
        assert set(TOKEN_RE.findall(everything)) == set(TOKEN_RE.findall(text)) - other_field_values(text)
        for me in names:  # ours needs my version in every block; theirs, blocks of two, one of them mine
            has_mine = [[me in s.names or s.label == me for s in block.sections] for block in blocks]
            for keep, refused in (
                ("ours", not all(any(mine) for mine in has_mine)),
                ("theirs", any(len(mine) != 2 or sum(mine) != 1 for mine in has_mine)),
            ):
                if refused:
                    with pytest.raises(UsageError, match="version"):
                        resolve_text(text, keep, me=me)
                else:
                    assert not has_conflict_markers(resolve_text(text, keep, me=me))
    if conflicted:
        m = machines[2]
        present -= {t for text in final.values() for t in other_field_values(text)}
        for path in conflicted:
            proc = m.cli("resolve", path, "--both")
            assert proc.returncode == 0, proc.stderr
        world.settle()
        assert json.loads(machines[4].cli("conflicts", "--json").stdout) == []
        resolved = machines[0].files()
        assert present <= set(TOKEN_RE.findall("\n".join(resolved.values())))
    assert world.stats["killed"] and world.stats["git_killed"], world.stats
    print(
        f"\nnway {topology} seed {seed}: {len(world.written)} versions written, {len(world.may_vanish & world.written)} "
        f"replaced by the machine that saw them, {len(conflicted)} notes conflicted at the end; {world.stats}"
    )
