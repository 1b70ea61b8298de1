"""Per-note history, diffs, restore and the machines that wrote: `anamnesis.store.history` on real git."""

from __future__ import annotations

import pytest

from anamnesis.base.errors import AnamnesisError, NoteNotFound, UsageError
from anamnesis.base.git import git_out, run_git
from anamnesis.base.paths import Store
from anamnesis.store import history
from anamnesis.store.operations import create_note, update_note


def test_history_lists_every_version_newest_first(store: Store) -> None:
    note = create_note(store, type="semantic", title="Pool size", body="pool_size = 10\n")
    update_note(store, note.path, body="pool_size = 20\n")
    update_note(store, note.path, body="pool_size = 30\n")
    versions = history.note_history(store, note.path)
    assert len(versions) == 3
    assert [v.status for v in versions] == ["M", "M", "A"]
    assert "pool_size = 30" in history.version_text(store, versions[0])
    assert "pool_size = 10" in history.version_text(store, versions[2])
    machine = git_out(store.memory, "config", "user.name").removeprefix("anamnesis@")
    assert all(v.machine == machine for v in versions)


def test_change_diff_shows_what_each_version_changed(store: Store) -> None:
    note = create_note(store, type="semantic", title="Pool size", body="pool_size = 10\n")
    update_note(store, note.path, body="pool_size = 20\n")
    versions = history.note_history(store, note.path)
    diff = history.change_diff(store, versions, 0)
    assert "-pool_size = 10" in diff and "+pool_size = 20" in diff
    first = history.change_diff(store, versions, 1)
    assert first[0] == "--- /dev/null" and "+pool_size = 10" in first


def test_history_follows_renames(store: Store) -> None:
    note = create_note(store, type="semantic", title="Moved note", body="line one\nline two\nline three\n")
    new_path = note.path.replace("moved-note", "renamed-note")
    run_git(store.memory, "mv", note.path, new_path)
    run_git(store.memory, "commit", "-q", "-m", "laptop-1: rename")
    versions = history.note_history(store, new_path)
    assert [v.path for v in versions] == [new_path, note.path]
    assert versions[0].status.startswith("R")
    assert "line two" in history.version_text(store, versions[1])


def test_a_move_in_the_history_says_where_from_and_to(store: Store) -> None:
    from anamnesis.store.operations import move_note

    note = create_note(store, type="semantic", title="Moved note", body="line one\n")
    new_path = note.path.replace("global/facts/", "global/facts/old/")
    move_note(store, note.path, new_path)
    latest = history.note_history(store, new_path)[0]
    assert history.entry_title(latest, "Moved note") == f"move {note.path} to {new_path}"
    first = history.note_history(store, new_path)[-1]
    assert "“Moved note”" in history.entry_title(first, "Moved note")  # other entries still name the title


def test_history_of_a_file_name_git_would_quote(store: Store) -> None:
    # Notes made by hand in an editor have names like these; git's line output quotes them
    # ("caf\303\251..."), which made every version's path wrong and the history page a 404.
    old, new = 'global/facts/café "menu".md', "global/facts/brûlée.md"
    (store.memory / old).parent.mkdir(parents=True, exist_ok=True)
    (store.memory / old).write_text("---\ntitle: Menu\n---\nline one\nline two\nline three\n")
    run_git(store.memory, "add", "-A")
    run_git(store.memory, "commit", "-q", "-m", "laptop-1: add by hand")
    run_git(store.memory, "mv", old, new)
    run_git(store.memory, "commit", "-q", "-m", "laptop-1: rename")
    versions = history.note_history(store, new)
    assert [(v.status[:1], v.path) for v in versions] == [("R", new), ("A", old)]
    assert "+line two" in history.change_diff(store, versions, 1)
    assert "line three" in history.version_text(store, versions[0])


def test_history_of_a_file_name_with_glob_characters_is_its_own(store: Store) -> None:
    # "[draft] plan.md" as a pathspec is a glob that also matches "d plan.md": its history showed
    # the other note's commits, and restoring one copied the other note's text over this one.
    folder = store.memory / "global" / "facts"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "[draft] plan.md").write_text("---\ntitle: Draft\n---\ndraft\n")
    (folder / "d plan.md").write_text("---\ntitle: Other\n---\nother\n")
    run_git(store.memory, "add", "-A")
    run_git(store.memory, "commit", "-q", "-m", "laptop-1: add")
    (folder / "d plan.md").write_text("---\ntitle: Other\n---\nother, changed\n")
    run_git(store.memory, "commit", "-q", "-am", "laptop-1: change the other")
    versions = history.note_history(store, "global/facts/[draft] plan.md")
    assert [v.path for v in versions] == ["global/facts/[draft] plan.md"]


def test_restore_brings_back_an_old_version_as_a_new_commit(store: Store) -> None:
    note = create_note(store, type="semantic", title="Pool size", body="pool_size = 10\n")
    update_note(store, note.path, body="pool_size = 99 (wrong)\n")
    versions = history.note_history(store, note.path)
    current = (store.memory / note.path).read_text()
    history.restore_version(store, note.path, versions[1].commit, expected_text=current)
    text = (store.memory / note.path).read_text()
    assert "pool_size = 10" in text and "pool_size = 99" not in text  # (a random id may contain 99)
    after = history.note_history(store, note.path)
    assert len(after) == 3  # nothing rewritten: the restore is one more commit
    assert "restore" in after[0].message and versions[1].short in after[0].message
    assert git_out(store.memory, "status", "--porcelain") == ""


def test_restore_refuses_when_the_note_changed_since_it_was_read(store: Store) -> None:
    note = create_note(store, type="semantic", title="Pool size", body="pool_size = 10\n")
    update_note(store, note.path, body="pool_size = 20\n")
    versions = history.note_history(store, note.path)
    stale = (store.memory / note.path).read_text()
    update_note(store, note.path, body="pool_size = 30 (someone else)\n")
    with pytest.raises(AnamnesisError, match="changed on disk"):
        history.restore_version(store, note.path, versions[1].commit, expected_text=stale)
    assert "pool_size = 30" in (store.memory / note.path).read_text()


def test_commit_ids_from_outside_must_be_hex(store: Store) -> None:
    note = create_note(store, type="semantic", title="Pool size", body="x\n")
    for bad in ("--output=/tmp/x", "HEAD", "HEAD~1", "", "abc"):
        with pytest.raises(UsageError):
            history.text_at(store, bad, note.path)
    with pytest.raises(NoteNotFound):
        history.restore_version(store, note.path, "0" * 40)


def test_paths_outside_the_store_are_refused(store: Store) -> None:
    from anamnesis.base.errors import OutsideStore

    with pytest.raises(OutsideStore):
        history.note_history(store, "../settings.json")
    with pytest.raises(OutsideStore):
        history.text_at(store, "a" * 40, "../../etc/passwd")


def test_machines_come_from_authors_and_message_prefixes(store: Store) -> None:
    env = {"GIT_AUTHOR_NAME": "anamnesis@desktop-91bc", "GIT_COMMITTER_NAME": "anamnesis@desktop-91bc"}
    (store.memory / "a.md").write_text("# a\n")
    run_git(store.memory, "add", "a.md")
    run_git(store.memory, "commit", "-q", "-m", "desktop-91bc: sync: 1 note changed", env=env)
    (store.memory / "b.md").write_text("# b\n")
    run_git(store.memory, "add", "b.md")
    run_git(store.memory, "commit", "-q", "-m", "desktop-91bc: sync: merge hub", env=env)
    (store.memory / "c.md").write_text("# c\n")
    run_git(store.memory, "add", "c.md")
    by_hand = {"GIT_AUTHOR_NAME": "Someone", "GIT_COMMITTER_NAME": "Someone"}
    run_git(store.memory, "commit", "-q", "-m", "tablet-1: hand-made commit", env=by_hand)
    found = {m.machine: m for m in history.machine_activity(store)}
    desktop = found["desktop-91bc"]
    assert desktop.commits == 2 and desktop.last_sync and desktop.peers == {"hub"}
    assert "tablet-1" in found  # no anamnesis author: the message prefix names the machine
    this = git_out(store.memory, "config", "user.name").removeprefix("anamnesis@")
    assert found[this].commits >= 1  # the store's own first commit
    assert history.machine_activity(store)[0].machine == "tablet-1"  # most recently active first
