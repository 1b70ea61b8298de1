"""Merging two versions of a note: markers for same-line edits, fields merged by field, symmetric."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from anamnesis.base.errors import UsageError
from anamnesis.base.notes import has_conflict_markers, parse_note
from anamnesis.store.merge import Block, Side, Stray, merge_texts, parse_blocks, resolve_text, stray_markers
from anamnesis.sync.treemerge import TreeMerger

BASE = """---
id: abcdefghjk
type: semantic
title: Pool sizing
tags:
- postgres
- ops
created: '2024-01-01T00:00:00Z'
updated: '2024-01-01T00:00:00Z'
machine: laptop
---

first line
middle line
last line
"""


def test_same_line_edits_keep_both_sides_as_markers_with_valid_front_matter() -> None:
    laptop = BASE.replace("middle line", "middle from laptop")
    desktop = BASE.replace("middle line", "middle from desktop")
    merged = merge_texts("global/facts/x.md", BASE, Side("laptop", laptop), Side("desktop", desktop))
    assert merged.conflicted
    assert "<<<<<<< desktop\nmiddle from desktop\n=======\nmiddle from laptop\n>>>>>>> laptop\n" in merged.text
    note = parse_note(merged.text, "global/facts/x.md")
    assert note.conflicted
    assert note.title == "Pool sizing"
    assert not any("front matter" in p for p in note.problems)


def test_merge_is_the_same_whichever_side_is_ours() -> None:
    one = BASE.replace("middle line", "one").replace("- postgres", "- pg")
    two = BASE.replace("middle line", "two").replace("last line", "last two")
    a = merge_texts("n.md", BASE, Side("m1", one), Side("m2", two))
    b = merge_texts("n.md", BASE, Side("m2", two), Side("m1", one))
    assert a.text == b.text


def test_front_matter_merges_by_field() -> None:
    laptop = BASE.replace("- ops\n", "- ops\n- perf\n").replace(
        "updated: '2024-01-01T00:00:00Z'", "updated: '2024-02-01T00:00:00Z'"
    )
    desktop = BASE.replace("title: Pool sizing\n", "title: Pool sizing (pgbouncer)\n").replace(
        "last line", "last line, edited"
    )
    merged = merge_texts("n.md", BASE, Side("laptop", laptop), Side("desktop", desktop))
    assert not merged.conflicted, merged.text
    meta = yaml.safe_load(merged.text.split("---")[1])
    assert meta["title"] == "Pool sizing (pgbouncer)"
    assert meta["tags"] == ["postgres", "ops", "perf"]
    assert meta["updated"] == "2024-02-01T00:00:00Z"
    assert "last line, edited" in merged.text


def test_tags_added_on_both_sides_are_united_and_a_removal_sticks() -> None:
    one = BASE.replace("- ops\n", "- ops\n- a\n")
    two = BASE.replace("- postgres\n", "").replace("- ops\n", "- ops\n- b\n")
    merged = merge_texts("n.md", BASE, Side("x", one), Side("y", two))
    meta = yaml.safe_load(merged.text.split("---")[1])
    assert meta["tags"] == ["ops", "a", "b"]


def test_tags_written_as_one_string_merge_tag_by_tag() -> None:
    base = "---\ntitle: T\ntags: deploy, ops\n---\n\nbody\n"
    one = base.replace("tags: deploy, ops", "tags: deploy, ops, a")
    two = base.replace("tags: deploy, ops", "tags: ops b")
    merged = merge_texts("n.md", base, Side("x", one), Side("y", two))
    assert not merged.conflicted
    assert yaml.safe_load(merged.text.split("---")[1])["tags"] == ["ops", "a", "b"]


def test_same_field_changed_on_both_sides_is_a_visible_conflict_and_resolvable() -> None:
    one = BASE.replace("title: Pool sizing", "title: Pool A").replace("2024-01-01T00:00:00Z'\nmachine", "2024-01-02T00:00:00Z'\nmachine")
    two = BASE.replace("title: Pool sizing", "title: Pool B")
    merged = merge_texts("n.md", BASE, Side("one", one), Side("two", two))
    assert merged.conflicted
    assert "title: Pool A" in merged.text and "title: Pool B" in merged.text
    assert yaml.safe_load(merged.text.split("---")[1])["title"] == "Pool A"  # the later `updated` wins the field
    theirs = resolve_text(merged.text, "theirs", me="one")
    assert yaml.safe_load(theirs.split("---")[1])["title"] == "Pool B"
    assert "<<<<<<<" not in theirs and "first line" in theirs
    assert resolve_text(merged.text, "keep:two") == theirs
    ours = resolve_text(merged.text, "ours", me="two")  # `ours` is this machine's version, wherever it sits
    assert yaml.safe_load(ours.split("---")[1])["title"] == "Pool B"
    both = resolve_text(merged.text, "both")  # the front matter keeps what sync chose: the later edit
    assert yaml.safe_load(both.split("---")[1])["title"] == "Pool A" and "<<<<<<<" not in both


def test_both_added_the_same_path_merges_against_an_empty_base() -> None:
    one = "---\nid: a\ntitle: T\n---\n\nalpha\n"
    two = "---\nid: a\ntitle: T\n---\n\nbeta\n"
    merged = merge_texts("n.md", None, Side("x", one), Side("y", two))
    assert merged.conflicted and "alpha" in merged.text and "beta" in merged.text


def test_gitignore_lines_are_united() -> None:
    merged = merge_texts(".gitignore", "a\n", Side("x", "a\nb\n"), Side("y", "a\nc\n"))
    assert not merged.conflicted
    assert set(merged.text.split()) == {"a", "b", "c"}


def test_resolve_keep_ours_theirs_both() -> None:
    text = "top\n<<<<<<< a\nA\n=======\nB\n>>>>>>> b\nmid\n<<<<<<< a\nA2\n=======\nB2\n>>>>>>> b\nend\n"
    assert resolve_text(text, "keep:b") == "top\nB\nmid\nB2\nend\n"
    assert resolve_text(text, "ours", me="b") == "top\nB\nmid\nB2\nend\n"
    assert resolve_text(text, "theirs", me="b") == "top\nA\nmid\nA2\nend\n"
    assert resolve_text(text, "both") == "top\nA\nB\nmid\nA2\nB2\nend\n"
    with pytest.raises(UsageError, match=r"c has no version in the conflict at line 2; it has a, b"):
        resolve_text(text, "ours", me="c")
    with pytest.raises(UsageError, match=r"this machine \(c\) has no version.*--keep"):
        resolve_text(text, "theirs", me="c")
    three = "<<<<<<< a\nA\n======= b\nB\n=======\nC\n>>>>>>> c\n"
    assert resolve_text(three, "keep:b") == "B\n"
    assert resolve_text(three, "both") == "A\nB\nC\n"
    with pytest.raises(UsageError, match=r"3 versions \(a, b, c\).*--keep"):
        resolve_text(three, "theirs", me="a")
    # A version two machines wrote alike is one section, named after both.
    shared = "<<<<<<< a, c\nA\n=======\nB\n>>>>>>> b\n"
    assert resolve_text(shared, "keep:c") == resolve_text(shared, "keep:a") == "A\n"


def test_nested_blocks_of_earlier_versions_read_as_one_flat_block() -> None:
    # What three machines on one line used to produce: a block inside each side of a block.
    nested = (
        "top\n<<<<<<< m0\n<<<<<<< m0\nfrom m0\n=======\nfrom m1\n>>>>>>> m1\n=======\n"
        "<<<<<<< m1\nfrom m1\n=======\nfrom m2\n>>>>>>> m2\n>>>>>>> m2\nbottom\n"
    )
    [block] = [p for p in parse_blocks(nested) if isinstance(p, Block)]
    assert [(s.label, s.text) for s in block.sections] == [(f"m{i}", f"from m{i}\n") for i in range(3)]
    assert resolve_text(nested, "keep:m1") == "top\nfrom m1\nbottom\n"
    assert resolve_text(nested, "both") == "top\nfrom m0\nfrom m1\nfrom m2\nbottom\n"


def test_unbalanced_markers_are_strays_both_drops_them_a_side_refuses() -> None:
    # Two opens and three closes, as merging marker lines as text used to leave.
    text = "a\n<<<<<<< m0\nx\n=======\ny\n>>>>>>> m1\n>>>>>>> m2\nb\n<<<<<<< m3\nz\n"
    pieces = parse_blocks(text)
    assert sum(isinstance(p, Block) for p in pieces) == 1
    assert [p.number for p in pieces if isinstance(p, Stray)] == [7, 9]
    assert stray_markers(text) == [7, 9]
    assert has_conflict_markers("a\n>>>>>>> m2\nb\n")
    assert resolve_text(text, "both") == "a\nx\ny\nb\nz\n"
    with pytest.raises(UsageError, match=r"line 7 `>>>>>>> m2`, line 9 `<<<<<<< m3`.*--edit"):
        resolve_text(text, "keep:m0")


def conflicted(base: str, *sides: tuple[str, str]) -> str:
    """The note as two machines leave it: `sides[0]` merged into `sides[1]`."""
    (l1, t1), (l2, t2) = sides
    return merge_texts("n.md", base, Side(l1, t1), Side(l2, t2)).text


def test_a_conflict_replayed_onto_another_conflict_is_one_flat_block() -> None:
    # m1 pushed; m0 recorded {m0, m1} but did not push; m2 recorded {m1, m2} and pushed; m0 replays.
    v = {m: BASE.replace("middle line", f"middle from {m}") for m in ("m0", "m1", "m2")}
    upstream = v["m1"]
    local = conflicted(BASE, ("m0", v["m0"]), ("m1", upstream))
    hub = conflicted(BASE, ("m1", upstream), ("m2", v["m2"]))
    for one, two in (((("m2", hub)), ("m0", local)), (("m0", local), ("m2", hub))):
        merged = merge_texts("n.md", upstream, Side(*one), Side(*two))
        assert merged.conflicted
        body = merged.text.split("---\n", 2)[2]
        assert body == (
            "\nfirst line\n<<<<<<< m0\nmiddle from m0\n======= m1\nmiddle from m1\n=======\nmiddle from m2\n"
            ">>>>>>> m2\nlast line\n"
        ), merged.text
    # A fourth machine that edited the original meets it: still one block, now of four.
    v3 = BASE.replace("middle line", "middle from m3")
    four = merge_texts("n.md", BASE, Side("m3", v3), Side("m0", merged.text)).text
    [block] = [p for p in parse_blocks(four) if isinstance(p, Block)]
    assert [s.label for s in block.sections] == ["m0", "m1", "m2", "m3"]
    assert four.count("<<<<<<<") == 1 and four.count(">>>>>>>") == 1
    # One that had m1's version and replaced it: m1's version leaves, the new one comes in.
    five = merge_texts(
        "n.md", upstream, Side("m4", BASE.replace("middle line", "from m4")), Side("m0", merged.text)
    ).text
    [block] = [p for p in parse_blocks(five) if isinstance(p, Block)]
    assert [s.label for s in block.sections] == ["m0", "m2", "m4"]


def test_versions_a_side_replaced_leave_the_block() -> None:
    # m1 changes its line again after a conflict it never saw: its old version is replaced.
    v1 = BASE.replace("middle line", "v1 from m1")
    local = conflicted(BASE, ("m0", BASE.replace("middle line", "from m0")), ("m1", v1))
    again = BASE.replace("middle line", "v2 from m1")
    merged = merge_texts("n.md", v1, Side("m1", again), Side("m0", local))
    assert "v2 from m1" in merged.text and "v1 from m1" not in merged.text and "from m0" in merged.text
    assert merged.text.count("<<<<<<<") == 1


def test_a_resolution_meeting_a_new_version_is_a_conflict_of_the_two() -> None:
    block = conflicted(BASE, ("a", BASE.replace("middle line", "A")), ("b", BASE.replace("middle line", "B")))
    resolved = resolve_text(block, "keep:a")
    grown = merge_texts("n.md", BASE, Side("c", BASE.replace("middle line", "C")), Side("x", block)).text
    merged = merge_texts("n.md", block, Side("a", resolved), Side("c", grown))
    [only] = [p for p in parse_blocks(merged.text) if isinstance(p, Block)]
    assert sorted(s.text for s in only.sections) == ["A\n", "C\n"]  # the choice, and what it did not see
    # Two machines resolving differently: a conflict about the resolutions, even where one kept a version.
    other = resolve_text(block, "keep:b")
    merged = merge_texts("n.md", block, Side("a", resolved), Side("b", other))
    [only] = [p for p in parse_blocks(merged.text) if isinstance(p, Block)]
    assert sorted(s.text for s in only.sections) == ["A\n", "B\n"]
    # The same resolution on both: clean.
    assert not merge_texts("n.md", block, Side("a", resolved), Side("b", resolved)).conflicted


def test_front_matter_blocks_of_three_machines_are_one() -> None:
    def titled(title: str, stamp: str) -> str:
        return BASE.replace("title: Pool sizing", f"title: {title}").replace(
            "2024-01-01T00:00:00Z'\nmachine", f"{stamp}'\nmachine"
        )

    t0, t1, t2 = (
        titled("T0", "2024-01-02T00:00:00Z"),
        titled("T1", "2024-01-03T00:00:00Z"),
        titled("T2", "2024-01-04T00:00:00Z"),
    )
    local = conflicted(BASE, ("m0", t0), ("m1", t1))
    hub = conflicted(BASE, ("m1", t1), ("m2", t2))
    merged = merge_texts("n.md", t1, Side("m2", hub), Side("m0", local)).text
    blocks = [p for p in parse_blocks(merged.split("---\n", 2)[2]) if isinstance(p, Block)]
    assert len(blocks) == 1 and blocks[0].front_matter
    assert [s.text for s in blocks[0].sections] == ["title: T0\n", "title: T1\n", "title: T2\n"]
    assert yaml.safe_load(resolve_text(merged, "keep:m0").split("---")[1])["title"] == "T0"


def test_a_front_matter_conflict_resolved_on_one_machine_meets_a_new_value_from_another() -> None:
    def titled(title: str, stamp: str) -> str:
        return BASE.replace("title: Pool sizing", f"title: {title}").replace(
            "2024-01-01T00:00:00Z'\nmachine", f"{stamp}'\nmachine"
        )

    t1, t2, t3 = (
        titled("T1", "2024-01-02T00:00:00Z"),
        titled("T2", "2024-01-03T00:00:00Z"),
        titled("T3", "2024-01-04T00:00:00Z"),
    )
    block = conflicted(BASE, ("a", t1), ("b", t2))  # {T1, T2}, the title field T2 (the later edit)
    resolved = resolve_text(block, "both")  # a keeps the front matter as it is: T2, no block
    grown = merge_texts("n.md", BASE, Side("c", t3), Side("b", block)).text  # c's T3 joins the block
    merged = merge_texts("n.md", block, Side("a", resolved), Side("c", grown)).text
    [only] = [p for p in parse_blocks(merged.split("---\n", 2)[2]) if isinstance(p, Block)]
    assert sorted(s.text for s in only.sections) == ["title: T2\n", "title: T3\n"]  # the choice, and T3
    # Both resolved alike: no block, and the front matter holds the choice.
    other = resolve_text(block, "keep:a")
    merged = merge_texts("n.md", block, Side("a", other), Side("b", block))
    assert not merged.conflicted and "<<<<<<<" not in merged.text
    assert yaml.safe_load(merged.text.split("---")[1])["title"] == "T1"


def test_a_note_about_conflict_markers_keeps_its_example_through_merges() -> None:
    example = (
        "---\ntitle: Git\n---\n\nIntro\n\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> branch\n\nOutro\n"
    )
    one = example.replace("Intro", "Intro, edited")
    two = example.replace("Outro", "Outro, edited")
    merged = merge_texts("n.md", example, Side("a", one), Side("b", two))
    assert not merged.conflicted
    assert merged.text == example.replace("Intro", "Intro, edited").replace("Outro", "Outro, edited")


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for key, value in (("user.name", "anamnesis@t"), ("user.email", "t@x.invalid")):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    return repo


def _commit(repo: Path, files: dict[str, str | None], message: str, parent: str | None = None) -> str:
    if parent:
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach", parent], check=True)
    for path, text in files.items():
        full = repo / path
        if text is None:
            full.unlink()
        else:
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", message], check=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def _show(repo: Path, commit: str, path: str) -> str | None:
    proc = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def test_tree_merge_edit_beats_delete_both_ways_and_double_delete_stays_deleted(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    base = _commit(repo, {"a.md": "a\n", "b.md": "b\n", "c.md": "c\n"}, "base")
    ours = _commit(repo, {"a.md": "a edited\n", "b.md": None, "c.md": None}, "ours", parent=base)
    theirs = _commit(repo, {"a.md": None, "b.md": "b edited\n", "c.md": None}, "theirs", parent=base)
    merger = TreeMerger(repo, tmp_path / "idx")
    built = merger.merge(ours, theirs, "merge")
    assert _show(repo, built.commit, "a.md") == "a edited\n"
    assert _show(repo, built.commit, "b.md") == "b edited\n"
    assert _show(repo, built.commit, "c.md") is None
    assert built.conflicts == []
    # The working tree and HEAD were never touched.
    assert subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() == theirs
    merger.close()


def test_tree_merge_replay_skips_a_change_already_applied(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    base = _commit(repo, {"a.md": "a\n"}, "base")
    upstream = _commit(repo, {"a.md": "a2\n"}, "upstream", parent=base)
    local = _commit(repo, {"a.md": "a2\n"}, "same change", parent=base)
    merger = TreeMerger(repo, tmp_path / "idx")
    assert merger.pick(upstream, local, base) is None
    merger.close()


def test_tree_merge_keeps_both_when_one_side_made_a_file_a_symlink(tmp_path: Path) -> None:
    import os

    repo = _repo(tmp_path)
    base = _commit(repo, {"n.md": "text\n", "other.md": "other\n"}, "base")
    theirs = _commit(repo, {"n.md": "text, edited\n"}, "edited", parent=base)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach", base], check=True)
    (repo / "n.md").unlink()
    os.symlink("other.md", repo / "n.md")
    ours = _commit(repo, {}, "made a link")
    merger = TreeMerger(repo, tmp_path / "idx")
    built = merger.merge(ours, theirs, "merge")
    merger.close()
    assert built.conflicts == ["n.md"]
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", built.commit], capture_output=True, text=True
    ).stdout
    kept = {line.split("\t")[1]: line.split()[0] for line in listed.splitlines()}
    side = next(p for p in kept if p.startswith("n.md.") and p.endswith(".conflict"))
    assert {kept["n.md"], kept[side]} == {"120000", "100644"}  # the link and the edited text, each with its mode
    texts = {_show(repo, built.commit, "n.md"), _show(repo, built.commit, side)}
    assert texts == {"other.md", "text, edited\n"}  # nothing of the edit was dropped


def test_one_conflict_recorded_on_two_machines_then_written_beside_merges_without_copies() -> None:
    # Machines a and b met c's edit of the same line and each recorded the same block; b then
    # wrote a line right after it (or before it) and a did not. Where the two meet, the block is
    # the same on both sides: b's line goes beside it once, not into every version of the block
    # (which then meets a's block again, and the note doubles at each meeting).
    block = conflicted(BASE, ("a", BASE.replace("middle line", "from a")), ("c", BASE.replace("middle line", "from c")))
    for wrote in ("after", "before"):
        if wrote == "after":
            more = block.replace(">>>>>>> c\n", ">>>>>>> c\nwritten on b after it\n")
        else:
            more = block.replace("<<<<<<< a\n", "written on b before it\n<<<<<<< a\n")
        for one, two in ((Side("b", more), Side("a", block)), (Side("a", block), Side("b", more))):
            merged = merge_texts("n.md", BASE, one, two)
            assert merged.text == more and not merged.conflicted, merged.text  # no new conflict
    # Both wrote after the same block: a block of just those lines beside it.
    mine = block.replace(">>>>>>> c\n", ">>>>>>> c\nfrom b\n")
    theirs = block.replace(">>>>>>> c\n", ">>>>>>> c\nfrom d\n")
    merged = merge_texts("n.md", BASE, Side("b", mine), Side("d", theirs)).text
    assert merged.count("from a\n") == 1 and merged.count("from c\n") == 1, merged
    assert ">>>>>>> c\n<<<<<<< b\nfrom b\n=======\nfrom d\n>>>>>>> d\nlast line\n" in merged, merged


def test_lines_written_after_a_block_stay_after_it_when_the_block_meets_a_longer_version() -> None:
    # b and c each added a line at the end: c recorded the block {b, c}, then wrote another line
    # after it. b, which never saw the block, wrote a second line of its own. Where they meet
    # (base: b's first line), b's lines are its version in the block and c's new line stays after
    # the block, once: not copied into every version, which the next meeting copies again.
    b1 = BASE + "b 1\n"
    block = conflicted(BASE, ("b", b1), ("c", BASE + "c 1\n"))
    c_side = block + "c 2\n"
    b_side = b1 + "b 2\n"
    want = BASE + "<<<<<<< b\nb 1\nb 2\n=======\nc 1\n>>>>>>> c\nc 2\n"
    for one, two in ((Side("c", c_side), Side("b", b_side)), (Side("b", b_side), Side("c", c_side))):
        merged = merge_texts("n.md", b1, one, two)
        assert merged.text == want, merged.text


def _commit_as(repo: Path, author: str, files: dict[str, str], parents: list[str]) -> str:
    """A commit by `author` (a machine) with `files` over the first parent's tree."""
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-f", "--detach", parents[0]], check=True)
    for path, text in files.items():
        (repo / path).write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    tree = subprocess.run(["git", "-C", str(repo), "write-tree"], capture_output=True, text=True).stdout.strip()
    args = ["git", "-C", str(repo), "commit-tree", tree, "-m", f"{author}: sync"]
    for parent in parents:
        args += ["-p", parent]
    env = {**os.environ, "GIT_AUTHOR_NAME": f"anamnesis@{author}", "GIT_AUTHOR_EMAIL": "x@x.invalid"}
    return subprocess.run(args, capture_output=True, text=True, env=env, check=True).stdout.strip()


def test_a_criss_cross_merge_takes_what_both_sides_share_as_shared(tmp_path: Path) -> None:
    # A mesh: b and c each added a line; a merged both (recording the block {b, c}), and so did
    # b after adding a second line (or c, in the mirror case). The two merges have two best common
    # ancestors, b's commit and c's. Taking either alone as the base makes the other's line look
    # new on one side, and the merge copies it into the block again; the merge of both is the base.
    repo = _repo(tmp_path)
    start = _commit_as(repo, "a", {"n.md": BASE}, [_commit(repo, {}, "root")])
    b1 = _commit_as(repo, "b", {"n.md": BASE + "b 1\n"}, [start])
    c1 = _commit_as(repo, "c", {"n.md": BASE + "c 1\n"}, [start])
    on_a = conflicted(BASE, ("b", BASE + "b 1\n"), ("c", BASE + "c 1\n"))
    theirs = _commit_as(repo, "a", {"n.md": on_a}, [b1, c1])
    for grew, more in (("b", BASE + "b 1\nb 2\n"), ("c", BASE + "c 1\nc 2\n")):
        again = _commit_as(repo, grew, {"n.md": more}, [b1 if grew == "b" else c1])
        other = BASE + ("c 1\n" if grew == "b" else "b 1\n")
        mine = conflicted(BASE, (grew, more), ("c" if grew == "b" else "b", other))
        ours = _commit_as(repo, grew, {"n.md": mine}, [again, c1 if grew == "b" else b1])
        merger = TreeMerger(repo, tmp_path / "idx")
        for one, two in ((ours, theirs), (theirs, ours)):
            built = merger.merge(one, two, "merge")
            assert _show(repo, built.commit, "n.md") == mine, (grew, _show(repo, built.commit, "n.md"))
        merger.close()


def _sections_by_writer(text: str) -> list[tuple[str, set[str]]]:
    """(label, the writers of its lines) of every section of every conflict block in `text`; a
    writer is the `mN` a line `mN K` starts with."""
    found = []
    for piece in parse_blocks(text):
        if isinstance(piece, Block):
            for section in piece.sections:
                found.append((section.label, {m.group(1) for line in section.lines if (m := re.match(r"(m\d) ", line))}))
    return found


def test_a_block_with_a_line_written_after_it_meeting_that_block_grown_keeps_each_version_one_machines(
    tmp_path: Path,
) -> None:
    # A kill between a push and its record: m2 pushed its line "m2 1" to m1, but still took it for
    # its own and replayed it onto m3's "m3 1" (recording the block {m2, m3}), then wrote "m2 2"
    # after that block. m1 merged m2's line with m3's "m3 1" and "m3 2": the same block, m3's
    # version grown. Where the two meet (base: m3's "m3 1"), one side is a block with a line after
    # it, the other a block: "m2 2" stays after the block, once, and is never copied into its
    # versions (m3's "m3 1" + "m2 2" was a version no machine ever had: four versions, two mixed).
    repo = _repo(tmp_path)
    merger = TreeMerger(repo, tmp_path / "idx")
    start = _commit_as(repo, "m1", {"n.md": BASE}, [_commit(repo, {}, "root")])
    m3_one = _commit_as(repo, "m3", {"n.md": BASE + "m3 1\n"}, [start])
    m3_two = _commit_as(repo, "m3", {"n.md": BASE + "m3 1\nm3 2\n"}, [m3_one])
    m2_one = _commit_as(repo, "m2", {"n.md": BASE + "m2 1\n"}, [start])
    on_m1 = merger.merge(m2_one, m3_two, "m1: sync: merge m2").commit
    replayed = merger.pick(m3_one, m2_one, start)
    assert replayed is not None and replayed.conflicts == ["n.md"]
    on_m2 = _commit_as(repo, "m2", {"n.md": (_show(repo, replayed.commit, "n.md") or "") + "m2 2\n"}, [replayed.commit])
    want = (_show(repo, on_m1, "n.md") or "") + "m2 2\n"
    assert "<<<<<<< m2\nm2 1\n=======\nm3 1\nm3 2\n>>>>>>> m3\n" in want, want
    for one, two in ((on_m2, on_m1), (on_m1, on_m2)):
        built = merger.merge(one, two, "merge")
        text = _show(repo, built.commit, "n.md") or ""
        assert [writers for _label, writers in _sections_by_writer(text) if len(writers) > 1] == [], text
        assert text == want, text
        for side in (one, two):  # met again, nothing changes
            again = merger.merge(built.commit, side, "again")
            assert _show(repo, again.commit, "n.md") == want
    merger.close()


def test_a_side_holding_two_blocks_meets_the_other_side_with_one_of_them_and_mixes_no_versions() -> None:
    # m1 and m2 each wrote a last line (block {m1, m2}); m2 and m3 then each wrote one after it
    # (block {m2, m3}). m3, on a base before both, wrote two lines. Read by machine across both
    # blocks, m1's version would be its line with m2's, and m3's m1's line with its own: versions
    # no machine had. The block m3's lines come from meets them; the other stays as it is.
    top = "top\n"
    first = conflicted(top, ("m1", top + "e1\n"), ("m2", top + "e2\n"))
    both = conflicted(first, ("m2", first + "m2 1\n"), ("m3", first + "m3 1\n"))
    assert both.count("<<<<<<< ") == 2, both
    on_m3 = top + "m3 1\nm3 2\n"
    want = first + "<<<<<<< m2\nm2 1\n======= m3\nm3 1\n=======\nm3 1\nm3 2\n>>>>>>> m3\n"
    for one, two in ((Side("m2", both), Side("m3", on_m3)), (Side("m3", on_m3), Side("m2", both))):
        merged = merge_texts("n.md", top, one, two)
        assert merged.text == want, merged.text
        assert [w for _label, w in _sections_by_writer(merged.text) if len(w) > 1] == [], merged.text
