"""Merging two versions of a note: markers for same-line edits, fields merged by field, symmetric."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from anamnesis.conflicts import Side, merge_texts, parse_blocks, resolve_text
from anamnesis.notes import parse_note
from anamnesis.treemerge import TreeMerger

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
    theirs = resolve_text(merged.text, "theirs")
    assert yaml.safe_load(theirs.split("---")[1])["title"] == "Pool B"
    assert "<<<<<<<" not in theirs and "first line" in theirs


def test_both_added_the_same_path_merges_against_an_empty_base() -> None:
    one = "---\nid: a\ntitle: T\n---\n\nalpha\n"
    two = "---\nid: a\ntitle: T\n---\n\nbeta\n"
    merged = merge_texts("n.md", None, Side("x", one), Side("y", two))
    assert merged.conflicted and "alpha" in merged.text and "beta" in merged.text


def test_gitignore_lines_are_united() -> None:
    merged = merge_texts(".gitignore", "a\n", Side("x", "a\nb\n"), Side("y", "a\nc\n"))
    assert not merged.conflicted
    assert set(merged.text.split()) == {"a", "b", "c"}


def test_resolve_ours_theirs_both_and_nested_blocks() -> None:
    text = "top\n<<<<<<< a\nA1\n<<<<<<< x\nX\n=======\nY\n>>>>>>> y\n=======\nB1\n>>>>>>> b\nend\n"
    assert resolve_text(text, "theirs") == "top\nB1\nend\n"
    # A nested block (three machines changed one line) is resolved the same way, in one go.
    assert resolve_text(text, "ours") == "top\nA1\nX\nend\n"
    assert resolve_text(text, "both") == "top\nA1\nX\nY\nB1\nend\n"
    nested_below = "top\n<<<<<<< c\nC\n=======\n<<<<<<< b\nB\n=======\nA\n>>>>>>> a\n>>>>>>> b\nend\n"
    assert resolve_text(nested_below, "theirs") == "top\nA\nend\n"
    assert resolve_text(nested_below, "both") == "top\nC\nB\nA\nend\n"
    pieces = parse_blocks(text)
    assert sum(1 for p in pieces if not isinstance(p, str)) == 1


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
