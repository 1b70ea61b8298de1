"""`updated:` and `machine:` tell the truth: stamped when sync commits a hand edit (and by
`resolve`), and merged by meaning when two machines edited one note (the later stamp wins, its
machine with it), with real git through a hub."""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import yaml
from fleet import Fleet, Machine, fleet  # noqa: F401

from anamnesis.base.notes import split_front_matter
from anamnesis.store.merge import Side, merge_texts

NOTE = """---
id: {id}
type: semantic
title: {title}
created: '2026-01-01T00:00:00Z'
updated: '{updated}'
machine: a
---

line one
line two
line three
line four
line five
"""


def iso(at: float) -> str:
    """Unix time `at` written as notes write times."""
    return dt.datetime.fromtimestamp(int(at), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fields(text: str) -> dict[str, object]:
    front, _body = split_front_matter(text)
    loaded = yaml.safe_load(front or "")
    assert isinstance(loaded, dict), text
    return loaded


def edit(m: Machine, path: str, old: str, new: str, at: float) -> str:
    """Edit a note as an editor does, saved at Unix time `at`; the text typed."""
    text = m.read(path).replace(old, new)
    m.write(path, text)
    os.utime(m.memory / path, (at, at))
    return text


def listed(m: Machine) -> list[dict[str, str]]:
    proc = m.cli("list", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def hub_fleet(fleet: Fleet, names: str) -> list[Machine]:
    hub = fleet.hub()
    return [fleet.machine(n, {"hub": fleet.url(hub)}) for n in names]


def seeded(machines: list[Machine]) -> None:
    """Two notes written on the first machine long ago, and every machine up to date."""
    first = machines[0]
    first.write("global/facts/one-aaaaaaaaaa.md", NOTE.format(id="aaaaaaaaaa", title="One", updated="2026-01-01T00:00:00Z"))
    first.write("global/facts/two-bbbbbbbbbb.md", NOTE.format(id="bbbbbbbbbb", title="Two", updated="2026-01-02T00:00:00Z"))
    os.utime(first.memory / "global/facts/one-aaaaaaaaaa.md", (1767225600, 1767225600))  # as old as its stamp
    os.utime(first.memory / "global/facts/two-bbbbbbbbbb.md", (1767312000, 1767312000))
    for m in machines:
        assert m.sync().exit_code == 0
    for m in machines:
        assert m.sync().exit_code == 0


ONE, TWO = "global/facts/one-aaaaaaaaaa.md", "global/facts/two-bbbbbbbbbb.md"


def both_edit(fleet: Fleet, on_a: tuple[str, str, float], on_b: tuple[str, str, float]) -> tuple[Machine, Machine]:
    """Machines a and b with the seeded notes, each having edited note ONE ((old, new, when)) unsynced."""
    a, b = hub_fleet(fleet, "ab")
    seeded([a, b])
    edit(a, ONE, *on_a)
    edit(b, ONE, *on_b)
    return a, b


def test_a_hand_edit_is_stamped_when_sync_commits_it_and_the_rest_of_the_file_is_kept(fleet: Fleet) -> None:
    a, b = hub_fleet(fleet, "ab")
    seeded([a, b])
    assert [n["path"] for n in listed(b)] == [TWO, ONE]
    at = time.time() - 60
    typed = edit(b, ONE, "line two\n", "line two, edited in an editor  \n", at)
    b.write("global/facts/plain.md", "# No front matter\n\nleft as typed\n")
    b.write("global/facts/bare.md", "---\ntitle: Bare   # a comment\n---\n\nbody\n")
    untouched = b.read(TWO)
    result = b.sync()
    assert result.exit_code == 0
    stamp = iso(at)
    # Only the two lines changed, every other byte is as it was typed.
    assert b.read(ONE) == typed.replace("updated: '2026-01-01T00:00:00Z'", f"updated: '{stamp}'").replace(
        "machine: a\n", "machine: b\n"
    )
    assert b.read(TWO) == untouched  # not edited: not rewritten
    assert b.read("global/facts/plain.md") == "# No front matter\n\nleft as typed\n"
    assert b.read("global/facts/bare.md").startswith(
        f"---\ntitle: Bare   # a comment\nupdated: '{stamp[:11]}"
    )  # missing lines are added at the end of the front matter
    assert fields(b.read("global/facts/bare.md"))["machine"] == "b"
    assert b.git("status", "--porcelain") == ""  # what was committed is what is on disk
    assert b.git("show", f"HEAD:{ONE}") == b.read(ONE).rstrip("\n")
    # The index says so too: listed first, with the new stamp and machine.
    rows = {n["path"]: n for n in listed(b)}
    assert rows[ONE]["updated"] == stamp and rows[ONE]["machine"] == "b"
    order = [n["path"] for n in listed(b)]
    assert order.index(ONE) < order.index(TWO)  # "recently updated" puts the edited note first
    shown = json.loads(b.cli("show", "aaaaaaaaaa", "--json").stdout)
    assert shown["updated"] == stamp and shown["machine"] == "b"
    # ...and on the other machine after it syncs.
    assert a.sync().exit_code == 0
    assert a.read(ONE) == b.read(ONE)
    rows = {n["path"]: n for n in listed(a)}
    assert rows[ONE]["updated"] == stamp and rows[ONE]["machine"] == "b"
    assert b.sync().exit_code == 0 and b.git("status", "--porcelain") == ""
    # An edit that sets `updated:` itself keeps it.
    edit(b, TWO, "updated: '2026-01-02T00:00:00Z'", "updated: '2026-06-06T06:06:06Z'", at)
    edit(b, TWO, "line one\n", "line one, with its own stamp\n", at)
    assert b.sync().exit_code == 0
    assert fields(b.read(TWO))["updated"] == "2026-06-06T06:06:06Z" and fields(b.read(TWO))["machine"] == "a"


def test_two_machines_editing_different_lines_never_conflict_on_the_stamp(fleet: Fleet) -> None:
    # a is still the note's machine (base machine: a) and edits later; b edits earlier and syncs first.
    now = time.time()
    a, b = both_edit(fleet, ("line one\n", "line one, a\n", now - 10), ("line five\n", "line five, b\n", now - 100))
    assert b.sync().exit_code == 0
    result = a.sync()
    assert result.exit_code == 0 and not result.conflicts, result.to_dict()
    assert b.sync().exit_code == 0
    for m in (a, b):
        text = m.read(ONE)
        assert "<<<<<<<" not in text and "line one, a\n" in text and "line five, b\n" in text
        meta = fields(text)
        assert meta["updated"] == iso(now - 10) and meta["machine"] == "a", meta  # the later edit's
        assert {n["path"]: n for n in listed(m)}[ONE]["machine"] == "a"
    assert a.tree() == b.tree()


def test_three_machines_the_latest_stamp_wins_whoever_syncs_last(fleet: Fleet) -> None:
    a, b, c = hub_fleet(fleet, "abc")
    seeded([a, b, c])
    now = time.time()
    edit(a, ONE, "line one\n", "line one, a\n", now - 300)
    edit(b, ONE, "line three\n", "line three, b\n", now - 200)
    edit(c, ONE, "line five\n", "line five, c\n", now - 100)
    for m in (c, b, a, c, b):  # the latest edit is synced first
        result = m.sync()
        assert result.exit_code == 0 and not result.conflicts, result.to_dict()
    assert a.tree() == b.tree() == c.tree()
    text = a.read(ONE)
    assert all(f"{w}, {m}\n" in text for w, m in (("one", "a"), ("three", "b"), ("five", "c")))
    meta = fields(text)
    assert meta["updated"] == iso(now - 100) and meta["machine"] == "c", meta
    assert text.count("\nupdated:") == 1 and "<<<<<<<" not in text


def test_resolve_stamps_the_resolution(fleet: Fleet) -> None:
    now = time.time()
    a, b = both_edit(fleet, ("line three\n", "line three, a\n", now - 100), ("line three\n", "line three, b\n", now - 50))
    assert a.sync().exit_code == 0
    assert b.sync().exit_code == 10
    assert a.sync().exit_code == 10 and "<<<<<<<" in a.read(ONE)  # the conflict b recorded is announced here too
    before = time.time()
    proc = a.cli("resolve", ONE, "--keep", "b")
    assert proc.returncode == 0, proc.stderr
    meta = fields(a.read(ONE))
    assert meta["machine"] == "a"
    assert str(meta["updated"]) >= iso(before - 1), meta
    assert a.git("status", "--porcelain") == ""
    rows = {n["path"]: n for n in listed(a)}
    assert rows[ONE]["updated"] == meta["updated"] and rows[ONE]["machine"] == "a"
    # A hand resolution (markers removed in an editor, then `resolve NOTE`) is stamped too.
    text = b.read(ONE)
    start, end = text.index("<<<<<<<"), text.index("\n", text.index(">>>>>>>")) + 1
    b.write(ONE, text[:start] + "line three, by hand\n" + text[end:])
    before = time.time()
    proc = b.cli("resolve", ONE)
    assert proc.returncode == 0, proc.stderr
    meta = fields(b.read(ONE))
    assert meta["machine"] == "b" and str(meta["updated"]) >= iso(before - 1), meta
    assert b.git("status", "--porcelain") == ""
    assert "nothing to resolve" in b.cli("resolve", ONE).stderr  # no change: nothing stamped, nothing committed


def test_the_later_moment_wins_whatever_offset_it_is_written_with() -> None:
    base = "---\ntitle: T  # kept\nupdated: '2026-01-01T00:00:00Z'\nmachine: m0\ntags:\n- x\n---\n\none\ntwo\nthree\n"
    one = base.replace("2026-01-01T00:00:00Z", "2026-01-01T10:00:00+02:00").replace("m0", "m1").replace("one\n", "one, m1\n")
    two = base.replace("2026-01-01T00:00:00Z", "2026-01-01T09:00:00Z").replace("m0", "m2").replace("three\n", "three, m2\n")
    two = two.replace("- x\n", "- x\n- y\n")
    for first, second in ((Side("m1", one), Side("m2", two)), (Side("m2", two), Side("m1", one))):
        merged = merge_texts("n.md", base, first, second)
        assert not merged.conflicted, merged.text
        meta = fields(merged.text)
        assert meta["updated"] == "2026-01-01T09:00:00Z" and meta["machine"] == "m2", merged.text  # 09:00Z is later
        assert meta["tags"] == ["x", "y"]
        assert "title: T  # kept\n" in merged.text  # only the lines of changed fields are rewritten


def test_machine_goes_with_the_later_stamp_when_only_one_side_changed_it() -> None:
    base = "---\ntitle: T\nupdated: '2026-01-01T00:00:00Z'\nmachine: m1\n---\n\none\ntwo\nthree\n"
    again = base.replace("2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z").replace("one\n", "one again\n")
    other = base.replace("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z").replace("m1", "m2").replace("three\n", "3\n")
    merged = merge_texts("n.md", base, Side("m1", again), Side("m2", other))
    meta = fields(merged.text)
    assert meta == {"title": "T", "updated": "2026-03-01T00:00:00Z", "machine": "m1"}, merged.text
