"""Small core behaviours sync relies on."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, Machine, fleet  # noqa: F401

from anamnesis.base.errors import AnamnesisError
from anamnesis.base.notes import has_conflict_markers, parse_note
from anamnesis.base.paths import Store
from anamnesis.search.index import open_index
from anamnesis.store.operations import create_note, delete_note, move_note
from anamnesis.store.recovery import checkout_started, start_checkout


def test_deleting_a_note_that_was_never_committed(store: Store) -> None:
    path = store.memory / "global" / "facts" / "draft.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Draft\n\nwritten by hand, deleted before any sync\n")
    delete_note(store, "global/facts/draft.md")
    assert not path.exists()


# -- a checkout cut short by a kill (the whole process group: git died too) -----------------
#
# These build the half-moved tree such a kill leaves by hand, so that each state is there
# for sure; tests/sync/test_power_cut.py gets them from real kills.


@dataclass
class HalfMoved:
    """A and B share six notes, n1..n6 in git's order; B appended a line to each and synced. A has
    the hub's commit (target) but is still at orig, with the checkout marker a sync writes first."""

    a: Machine
    b: Machine
    orig: str
    target: str
    paths: list[str]

    def at_target(self, path: str) -> str:
        return subprocess.run(
            ["git", "-C", str(self.a.memory), "show", f"{self.target}:{path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout


def _half_moved(fleet: Fleet) -> HalfMoved:
    hub, a, b = _pair(fleet)
    paths = [
        create_note(
            a.store, type="semantic", title=f"N{i}", body=f"first line of n{i}\nmiddle\nlast line of n{i}\n"
        ).path
        for i in range(1, 7)
    ]
    assert paths == sorted(paths)
    a.sync()
    b.sync()
    for path in paths:
        b.write(path, b.read(path) + "appended on b\n")
    assert b.sync().exit_code == 0
    orig, target = _start_move(a, hub)
    return HalfMoved(a, b, orig, target, paths)


def _pair(fleet: Fleet) -> tuple[Path, Machine, Machine]:
    """A hub and machines a and b syncing through it."""
    hub = fleet.hub()
    return hub, fleet.machine("a", {"hub": fleet.url(hub)}), fleet.machine("b", {"hub": fleet.url(hub)})


def _start_move(a: Machine, hub: Path) -> tuple[str, str]:
    """Fetch the hub's main into `a` and write the checkout marker, as a sync does before git moves
    the files; (orig, target). The tests then leave the files as a kill would have."""
    orig = a.git("rev-parse", "HEAD")
    a.git("fetch", "-q", str(hub), "main")
    target = a.git("rev-parse", "FETCH_HEAD")
    start_checkout(a.store, orig, target)
    return orig, target


def _whole(machine: Machine, path: str, title: str) -> str:
    text = machine.read(path)
    note = parse_note(text, path)
    assert note.title == title and note.id and note.type == "semantic", text
    assert not has_conflict_markers(text), text
    return text


def _body(text: str) -> str:
    return text.split("\n---\n", 1)[1]


def _index_rows(machine: Machine) -> set[str]:
    with open_index(machine.store) as index:
        return {row[0] for row in index.conn.execute("SELECT path FROM notes")}


def test_a_checkout_killed_after_it_removed_a_moved_note_counts_as_begun_and_is_finished(fleet: Fleet) -> None:
    # git's checkout removes what the target lacks first, then writes the rest: killed in between,
    # a note another machine moved is at neither path. That checkout had begun (it changed the
    # tree), so the sync that ran it finishes it, instead of forgetting it and leaving the note
    # gone from the working tree for the next commit to record as a deletion.
    hub, a, b = _pair(fleet)
    old = create_note(a.store, type="semantic", title="Moved note", body="kept through the move\n").path
    a.sync()
    b.sync()
    new = move_note(b.store, old, "global/facts/moved-elsewhere.md").note.path
    assert b.sync().exit_code == 0
    _start_move(a, hub)
    (a.memory / old).unlink()  # what git had done when the kill came; `new` not written yet
    assert checkout_started(a.store)
    result = a.sync()
    assert result.exit_code == 0, result.to_dict()
    assert not (a.memory / old).exists() and "kept through the move" in a.read(new)
    assert set(a.files()) == set(b.files())


def test_a_note_a_killed_checkout_emptied_is_finished_never_merged_as_an_edit(fleet: Fleet) -> None:
    cut = _half_moved(fleet)
    a, b, (n1, n2, n3, n4, n5, n6) = cut.a, cut.b, cut.paths
    # git wrote n1 and n2, died writing n3 (created, nothing in it yet), n4 was removed to be written again,
    # n5 and n6 not reached; since the kill the user appended to n1 (the new version) and edited n6's first line.
    for path in (n1, n2):
        a.write(path, cut.at_target(path))
    a.write(n1, a.read(n1) + "added here after the power cut\n")
    a.write(n3, "")
    (a.memory / n4).unlink()
    a.write(n6, a.read(n6).replace("first line of n6", "first line of n6, edited here"))
    result = a.sync()
    assert result.exit_code == 0 and not result.conflicts, result.to_dict()
    assert any("finished an interrupted sync" in line for line in result.repaired), result.repaired
    for i, path in enumerate((n1, n2, n3, n4, n5, n6), 1):
        assert "appended on b" in _whole(a, path, f"N{i}")
    assert a.read(n1).endswith("appended on b\nadded here after the power cut\n")  # kept as it was written
    assert "first line of n6, edited here" in a.read(n6)  # merged with the incoming line
    assert a.read(n3) == cut.at_target(n3)
    assert a.git("merge-base", "--is-ancestor", cut.target, "HEAD", check=False) == ""
    assert not (a.home / "state" / "sync-checkout.json").exists()
    assert b.sync().exit_code == 0
    assert b.read(n1) == a.read(n1) and b.read(n6) == a.read(n6)
    assert _index_rows(a) == set(a.files())


def test_an_edit_from_before_the_checkout_started_is_never_taken_for_a_cut_write(fleet: Fleet) -> None:
    cut = _half_moved(fleet)
    a, (n1, n2) = cut.a, cut.paths[:2]
    # Both hold only the beginning of the incoming version. n2 was written since the checkout
    # started: git died writing it. n1 is older than the checkout: the user cut it, git never got there.
    a.write(n1, cut.at_target(n1).split("middle")[0])
    an_hour_ago = time.time() - 3600
    os.utime(a.memory / n1, (an_hour_ago, an_hour_ago))
    a.write(n2, cut.at_target(n2)[:40])
    result = a.sync()
    assert a.read(n2) == cut.at_target(n2)
    text = a.read(n1)
    assert has_conflict_markers(text) and "appended on b" in text and "edited here" in text  # both sides kept
    assert result.conflicts == [n1] and result.exit_code == 10


def test_new_after_a_killed_checkout_finishes_it_before_committing(fleet: Fleet) -> None:
    cut = _half_moved(fleet)
    a, (n1, n2) = cut.a, cut.paths[:2]
    a.write(n1, cut.at_target(n1))
    a.write(n2, "")
    (a.memory / ".git" / "index.lock").write_text("")  # the killed git's
    note = create_note(a.store, type="semantic", title="Written after the cut", body="between syncs\n")
    assert a.read(n2) == cut.at_target(n2)
    assert a.git("rev-parse", "HEAD~1") == cut.target  # committed on top of the finished move
    assert not (a.home / "state" / "sync-checkout.json").exists()
    assert a.git("status", "--porcelain") == ""
    result = a.sync()
    assert result.exit_code == 0 and not result.conflicts
    for i, path in enumerate(cut.paths, 1):
        assert "appended on b" in _whole(a, path, f"N{i}")
    assert a.read(n2) == cut.at_target(n2)
    assert note.path in _index_rows(a)


def test_a_half_moved_tree_under_a_commit_made_meanwhile_is_put_back_not_committed(fleet: Fleet) -> None:
    cut = _half_moved(fleet)
    a, (n1, n2, n3) = cut.a, cut.paths[:3]
    a.write(n1, cut.at_target(n1))
    a.write(n2, "")
    (a.memory / n3).unlink()
    # A program that did not finish the move first (an older version still running) commits a note of its own.
    a.write("global/facts/by-hand.md", "---\ntitle: By hand\n---\n\nwritten meanwhile\n")
    a.git("add", "global/facts/by-hand.md")
    a.git("commit", "-q", "-m", "by hand")
    result = a.sync()
    assert result.exit_code == 0 and not result.conflicts, result.to_dict()
    assert any("put back" in line for line in result.repaired), result.repaired
    for i, path in enumerate(cut.paths, 1):
        assert "appended on b" in _whole(a, path, f"N{i}")
    assert "written meanwhile" in a.read("global/facts/by-hand.md")
    assert a.git("status", "--porcelain") == ""


def test_a_move_that_cannot_be_finished_is_refused_and_nothing_is_committed(fleet: Fleet) -> None:
    cut = _half_moved(fleet)
    a, (n1, n2) = cut.a, cut.paths[:2]
    a.write(n1, "")
    (a.memory / n2).unlink()
    (a.memory / n2).mkdir()
    (a.memory / n2 / "something.txt").write_text("a person's file in the way\n")
    with pytest.raises(AnamnesisError, match="cannot finish an interrupted sync"):
        a.sync()
    assert a.git("rev-parse", "HEAD") == cut.orig
    assert (a.home / "state" / "sync-checkout.json").exists()
    (a.memory / n2 / "something.txt").unlink()
    (a.memory / n2).rmdir()
    assert a.sync().exit_code == 0
    assert a.read(n1) == cut.at_target(n1) and a.read(n2) == cut.at_target(n2)


def test_no_index_row_outlives_a_note_written_between_a_killed_sync_and_the_next(fleet: Fleet) -> None:
    from anamnesis.store.recovery import RUNNING_MARKER, write_marker

    hub, a, b = _pair(fleet)
    create_note(a.store, type="semantic", title="Kept", body="kept\n")
    a.sync()
    # A sync killed before its index update: the next one indexes from where that one started.
    write_marker(a.store, RUNNING_MARKER, {"started": "", "index_base": a.git("rev-parse", "HEAD")})
    note = create_note(a.store, type="semantic", title="Short lived", body="written between two syncs\n")
    a.git("push", "-q", str(hub), "main")  # as a second sync, killed after its push, would have
    b.sync()
    delete_note(b.store, note.path)
    assert b.sync().exit_code == 0
    assert a.sync().exit_code == 0
    assert not (a.memory / note.path).exists()
    assert note.path not in _index_rows(a)
    assert _index_rows(a) == set(a.files())


def test_text_typed_into_a_note_a_killed_checkout_emptied_keeps_the_front_matter(fleet: Fleet) -> None:
    cut = _half_moved(fleet)
    a, n3 = cut.a, cut.paths[2]
    # git died writing n3 (created, nothing in it); then the user opened the empty file and typed a line
    a.write(n3, "typed into the empty note after the power cut\n")
    a.sync()
    text = a.read(n3)
    assert "typed into the empty note after the power cut" in text and "appended on b" in text  # nothing lost
    note = parse_note(text, n3)
    assert note.title == "N3" and note.id and note.type == "semantic", text  # the front matter is still there


def test_head_ref_reads_what_git_says_in_every_form(tmp_path: Path) -> None:
    """The branch check every write makes reads .git/HEAD itself; it must agree with git."""
    from anamnesis.base.git import head_ref
    from anamnesis.base.repo import head

    def git(repo: Path, *args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout

    def says(repo: Path) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), "symbolic-ref", "-q", "HEAD"], capture_output=True, text=True
        ).stdout.strip()

    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    assert head_ref(repo) == says(repo) == "refs/heads/main"  # unborn branch
    assert head(repo) is None
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one")
    assert head(repo) == git(repo, "rev-parse", "HEAD").strip()
    git(repo, "pack-refs", "--all")  # no loose ref file left: git is asked
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert head(repo) == git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "side")
    assert head_ref(repo) == says(repo) == "refs/heads/side"
    git(repo, "checkout", "-q", "--detach")
    assert head_ref(repo) == says(repo) == ""
    git(repo, "checkout", "-q", "main")
    linked = tmp_path / "linked"  # a worktree: .git is a file, HEAD lives elsewhere; git is asked
    git(repo, "worktree", "add", "-q", "-b", "wt", str(linked))
    assert (linked / ".git").is_file()
    assert head_ref(linked) == says(linked) == "refs/heads/wt"
    assert head(linked) == git(linked, "rev-parse", "HEAD").strip()
    table = tmp_path / "table"  # refs in a reftable (git 2.45+): HEAD names refs/heads/.invalid
    made = subprocess.run(["git", "init", "-q", "-b", "main", "--ref-format=reftable", str(table)], capture_output=True)
    if made.returncode == 0:
        assert head_ref(table) == says(table) == "refs/heads/main"
        git(table, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one")
        assert head(table) == git(table, "rev-parse", "HEAD").strip()


def test_lines_typed_into_a_note_a_killed_checkout_cut_short_keep_every_line_of_it(fleet: Fleet) -> None:
    # git died writing n3 mid-line and n4 at the end of a line; then the user appended a line to
    # what they saw. The lines git never wrote were in both commits: merged with the old version as
    # base, the cut read as the user deleting them, and they were lost (the random fleet over ssh).
    cut = _half_moved(fleet)
    a, b, n3, n4 = cut.a, cut.b, cut.paths[2], cut.paths[3]
    whole3, whole4 = cut.at_target(n3), cut.at_target(n4)
    a.write(n3, whole3[: whole3.index("middle") + 3].rstrip("\n") + "\ntyped on n3\n")
    a.write(n4, whole4[: whole4.index("middle")].rstrip("\n") + "\ntyped on n4\n")
    result = a.sync()
    assert result.exit_code == 0 and not result.conflicts, result.to_dict()
    for path, title, whole in ((n3, "N3", whole3), (n4, "N4", whole4)):  # stamped as edited here: the body
        assert _body(_whole(a, path, title)) == _body(whole) + f"typed on {title.lower()}\n"
    assert b.sync().exit_code == 0
    assert b.read(n3) == a.read(n3) and b.read(n4) == a.read(n4)


def test_an_edit_near_the_end_of_a_note_git_had_written_is_not_taken_for_typing_after_a_cut(fleet: Fleet) -> None:
    # git wrote the new version whole (six lines longer than the old one); the user then edited
    # its second-to-last line. That is an edit of the new version, merged as one (both versions
    # kept, as the docs say, when the merge cannot tell), never text typed after a cut, which
    # would put the end of the edited line after the whole new version, on a line of its own.
    hub, a, b = _pair(fleet)
    path = create_note(a.store, type="semantic", title="Long", body="first\nsecond\n").path
    a.sync()
    b.sync()
    b.write(path, b.read(path) + "".join(f"line {i} from b\n" for i in range(1, 7)))
    assert b.sync().exit_code == 0
    _orig, target = _start_move(a, hub)
    whole = a.git("show", f"{target}:{path}") + "\n"
    a.write(path, whole.replace("line 5 from b", "line 5 from b, edited on a"))
    a.sync()
    text = a.read(path)
    assert "\nline 5 from b, edited on a\n" in text, text
    assert "\n, edited on a" not in text, text
    assert all(f"line {i} from b" in text for i in range(1, 7)), text


def test_a_note_one_machine_took_before_its_writer_replayed_it_merges_without_conflict(fleet: Fleet) -> None:
    """In a mesh each machine fetches the others' main: b takes a's new note, then a's sync replays
    that commit onto c's history (it never gave it to anyone it knows of), and a goes on writing to
    the note. b's copy and a's replayed one add the same file; merged with an empty base, a's later
    lines were a conflict with an empty side, a machine against itself."""
    from anamnesis.store.operations import update_note

    c = fleet.machine("c")
    a = fleet.machine("a", {"c": fleet.url(c)})
    b = fleet.machine("b", {"a": fleet.url(a)})
    for m in (a, b):
        m.sync()
    create_note(c.store, type="semantic", title="On c", body="c's own\n")  # c's history moves on
    note = create_note(a.store, type="semantic", title="Pool size", body="pool_size = 20\n")
    assert b.sync().exit_code == 0  # b takes a's commit as it is
    assert a.sync().exit_code == 0  # a replays it onto c's history: same file, another commit
    update_note(a.store, note.id, body="pool_size = 20\nraised to 40 in March\n")
    result = b.sync()
    assert result.exit_code == 0 and not result.recorded, result
    text = (b.store.memory / note.path).read_text()
    assert not has_conflict_markers(text) and "raised to 40 in March" in text


def test_a_note_moved_to_the_same_place_on_two_machines_and_edited_on_one_merges_cleanly(fleet: Fleet) -> None:
    hub = fleet.hub()
    a, b = fleet.machine("a", {"hub": fleet.url(hub)}), fleet.machine("b", {"hub": fleet.url(hub)})
    note = create_note(a.store, type="semantic", title="Name", body="line one\nline two\nline three\n")
    a.sync()
    b.sync()
    target = note.path.replace("name-", "better-name-")
    move_note(a.store, note.id, target)
    move_note(b.store, note.id, target)
    text = (a.store.memory / target).read_text().replace("line one\n", "line one EDITED-ON-A\n")
    (a.store.memory / target).write_text(text)
    assert a.sync().exit_code == 0
    result = b.sync()
    assert result.exit_code == 0 and not result.recorded, result
    assert "line one EDITED-ON-A" in (b.store.memory / target).read_text()


def test_an_edit_a_peer_took_from_main_is_never_replayed_into_a_second_copy(fleet: Fleet) -> None:
    """b takes a's edit straight from a's main; a's next sync must not replay that commit onto c's
    history (it would then exist twice, and a's next line would conflict with nothing): a machine
    that others take from merges its new commits instead."""
    from anamnesis.store.operations import update_note

    c = fleet.machine("c")
    a = fleet.machine("a", {"c": fleet.url(c)})
    b = fleet.machine("b", {"a": fleet.url(a)})
    note = create_note(a.store, type="semantic", title="Pool size", body="line 1\n")
    for m in (a, c, b, a):
        m.sync()
    create_note(c.store, type="semantic", title="On c", body="c's own\n")  # c's history moves on
    update_note(a.store, note.id, body="line 1\nline 2\n")
    assert b.sync().exit_code == 0  # b takes a's commit as it is
    assert a.sync().exit_code == 0  # a integrates c: its edit must stay the one commit b has
    update_note(a.store, note.id, body="line 1\nline 2\nline 3\n")
    result = b.sync()
    assert result.exit_code == 0 and not result.recorded, result
    text = (b.store.memory / note.path).read_text()
    assert not has_conflict_markers(text) and "line 3" in text
    patches = subprocess.run(  # the change each commit makes, whatever commit makes it
        ["git", "-C", str(b.store.memory), "log", "--no-merges", "-p", "--", note.path],
        capture_output=True, check=True,
    ).stdout
    ids = subprocess.run(["git", "patch-id", "--stable"], input=patches, capture_output=True, check=True).stdout.split()
    changes = ids[0::2]
    assert len(changes) == len(set(changes)), ids  # no change made by two commits


def _write_while_git_moves_files(monkeypatch: pytest.MonkeyPatch, write: Callable[[], None]) -> None:
    """Make `write` happen while sync's checkout runs: after git checked the working tree and
    replaced the files, before sync looks again — the instant an editor's or a script's write
    can land on the file git is replacing."""
    from anamnesis.sync import engine

    real = engine.run_git

    def run_git(repo: Path, *args: str, **kwargs: Any) -> Any:
        proc = real(repo, *args, **kwargs)
        if "reset" in args and "--keep" in args:
            write()
        return proc

    monkeypatch.setattr(engine, "run_git", run_git)


def _write(file: Any, text: str) -> None:
    file.write(text)
    file.flush()


def test_a_line_appended_to_a_note_while_the_checkout_replaces_it_is_kept(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script appending to a note opened it just before sync's checkout replaced the file: its
    line went into the file git unlinked. Sync sees the old file changed under it and lays the
    line over the incoming version, so the next sync carries it everywhere."""
    _hub, a, b = _pair(fleet)
    note = create_note(a.store, type="semantic", title="Build log", body="first\nsecond\nthird\n")
    a.sync()
    b.sync()
    a.write(note.path, a.read(note.path).replace("first\n", "first, from a\n"))
    assert a.sync().exit_code == 0
    with open(b.memory / note.path, "a", encoding="utf-8") as held:  # opened before the checkout
        _write_while_git_moves_files(monkeypatch, lambda: _write(held, "appended on b during the checkout\n"))
        assert b.sync().exit_code == 0
        monkeypatch.undo()
    text = b.read(note.path)
    assert "first, from a" in text and "appended on b during the checkout" in text, text
    assert not has_conflict_markers(text)
    assert b.sync().exit_code == 0 and a.sync().exit_code == 0
    assert "appended on b during the checkout" in a.read(note.path)


def test_a_note_rewritten_in_place_while_the_checkout_deletes_it_is_kept(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit beats a deletion, also when it lands in the instant the checkout removes the file."""
    _hub, a, b = _pair(fleet)
    note = create_note(a.store, type="semantic", title="Pinned", body="keep me\n")
    a.sync()
    b.sync()
    delete_note(a.store, note.id)
    assert a.sync().exit_code == 0
    with open(b.memory / note.path, "r+", encoding="utf-8") as held:
        before = held.read()
        held.seek(0)
        _write_while_git_moves_files(monkeypatch, lambda: _write(held, before.replace("me\n", "me, edited on b\n")))
        assert b.sync().exit_code == 0
        monkeypatch.undo()
    assert "keep me, edited on b" in b.read(note.path)


def test_a_late_write_that_clashes_with_the_incoming_version_is_announced_as_a_conflict(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both sides added a line at the same place: the two versions are set side by side and the
    sync says so (never `synced`), and so does the machine the block reaches."""
    _hub, a, b = _pair(fleet)
    note = create_note(a.store, type="semantic", title="Build log", body="first\n")
    a.sync()
    b.sync()
    a.write(note.path, a.read(note.path) + "from a\n")
    assert a.sync().exit_code == 0
    with open(b.memory / note.path, "a", encoding="utf-8") as held:
        _write_while_git_moves_files(monkeypatch, lambda: _write(held, "from b\n"))
        result = b.sync()
        monkeypatch.undo()
    assert result.exit_code != 0 and note.path in result.recorded, result
    text = b.read(note.path)
    assert has_conflict_markers(text) and "from a" in text and "from b" in text
    b.sync()
    result = a.sync()
    assert note.path in [c.path for c in result.conflict_notes], result


def test_a_note_whose_front_matter_holds_itself_is_malformed_not_a_crash(fleet: Fleet) -> None:
    """`a: &a [*a]` is valid to YAML and loops for ever in every writer: it is a malformed note,
    named by doctor, committed and carried as it is, and every other note syncs."""
    _hub, a, b = _pair(fleet)
    create_note(a.store, type="semantic", title="Fine", body="an ordinary note\n")
    a.write("global/facts/loop.md", "---\na: &a [*a]\ntitle: Loop\n---\nbody\n")
    assert a.sync().exit_code == 0
    assert b.sync().exit_code == 0
    assert b.read("global/facts/loop.md") == "---\na: &a [*a]\ntitle: Loop\n---\nbody\n"
    doctor = a.cli("doctor")
    assert "global/facts/loop.md" in doctor.stdout and "refers to itself" in doctor.stdout, doctor.stdout
    shown = a.cli("show", "global/facts/loop.md", "--json")
    assert shown.returncode == 0 and "refers to itself" in shown.stdout, shown.stderr
