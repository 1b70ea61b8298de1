"""One id, one note: a note moved on two machines (to two places, with big edits, or by hand
while a killed sync had it half moved) ends up at one path on every machine. Real git, a hub."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fleet import Fleet, Machine, fleet  # noqa: F401
from test_sync_merge import _commit, _repo, _show

from anamnesis.base.notes import Note, parse_note
from anamnesis.search.index import open_index
from anamnesis.store.operations import create_note, delete_note, move_note
from anamnesis.store.recovery import CHECKOUT_MARKER, start_checkout
from anamnesis.sync.treemerge import TreeMerger

BODY = "".join(f"line {n}\n" for n in range(1, 7))


def paths_by_id(m: Machine) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path, text in m.files().items():
        found.setdefault(parse_note(text, path).id, []).append(path)
    return found


def rewritten(text: str, who: str) -> str:
    """Most of the body written anew (a move that keeps too little alike for git to see it)."""
    head, body = text.split("\n---\n", 1)
    lines = body.splitlines(keepends=True)
    return head + "\n---\n" + "".join(line if n == 2 else f"{line.rstrip()} rewritten on {who} " * 3 + "\n" for n, line in enumerate(lines))


def move_by_hand(m: Machine, old: str, new: str, text: str | None = None) -> None:
    content = m.read(old) if text is None else text
    (m.memory / old).unlink()
    m.write(new, content)


def pair(fleet: Fleet) -> tuple[Machine, Machine]:
    """Two machines that sync through a hub."""
    hub = fleet.hub()
    a, b = (fleet.machine(n, {"hub": fleet.url(hub)}) for n in "ab")
    return a, b


def wanderer(fleet: Fleet, *others: str) -> tuple[Machine, Machine, Note, list[Note]]:
    """Two machines through a hub that both have the note "Wanderer" (and notes titled `others`)."""
    a, b = pair(fleet)
    note = create_note(a.store, type="semantic", title="Wanderer", body=BODY)
    more = [create_note(a.store, type="semantic", title=title, body="stays\n") for title in others]
    a.sync()
    b.sync()
    return a, b, note, more


def test_a_note_moved_to_two_places_with_big_edits_ends_up_in_one(fleet: Fleet) -> None:
    a, b, note, _ = wanderer(fleet)
    move_by_hand(a, note.path, f"zeta/moved-{note.id}.md", rewritten(a.read(note.path), "a"))
    move_by_hand(b, note.path, f"alpha/moved-{note.id}.md", b.read(note.path).replace("line 6\n", "line 6, b\n"))
    a.sync()
    result = b.sync()
    assert result.exit_code in (0, 10), result.to_dict()
    a.sync()
    for m in (a, b):
        assert paths_by_id(m)[note.id] == [f"alpha/moved-{note.id}.md"], paths_by_id(m)  # the first in path order
        text = m.read(f"alpha/moved-{note.id}.md")
        assert "rewritten on a" in text and "line 6, b" in text
    assert a.tree() == b.tree()


def test_an_edit_follows_a_move_that_came_with_big_edits(fleet: Fleet) -> None:
    a, b, note, _ = wanderer(fleet)
    new = f"archive/moved-{note.id}.md"
    move_by_hand(a, note.path, new, rewritten(a.read(note.path), "a"))
    b.write(note.path, b.read(note.path).replace("line 2\n", "line 2, b\n"))
    a.sync()
    assert b.sync().exit_code in (0, 10)
    a.sync()
    for m in (a, b):
        assert paths_by_id(m)[note.id] == [new], paths_by_id(m)
        assert "line 2, b" in m.read(new) and "rewritten on a" in m.read(new)
    assert a.tree() == b.tree()


def interrupted(m: Machine, peer: str = "hub") -> str:
    """What a sync killed just as git began moving the tree to the peer's main leaves: the
    checkout marker (written by sync before git starts), HEAD and files as they were. The target."""
    url = m.peers[peer]
    m.git("fetch", "-q", url, "main")
    target = m.git("rev-parse", "FETCH_HEAD")
    start_checkout(m.store, m.git("rev-parse", "HEAD"), target)
    return target


def test_a_note_moved_by_hand_while_a_killed_sync_had_it_half_moved_stays_one(fleet: Fleet) -> None:
    a, b, note, (other,) = wanderer(fleet, "Bystander")
    a.write(note.path, a.read(note.path).replace("line 1\n", "line 1, a\n"))
    a.write(other.path, a.read(other.path) + "more\n")
    a.sync()
    interrupted(b)  # killed before git wrote anything: every file still as in b's HEAD
    assert (b.home / "state" / CHECKOUT_MARKER).exists()
    # The person moves the note in a file manager and edits it, before any sync runs again.
    new = f"projects/other-proj/howto/moved-cobalt-{note.id}.md"
    move_by_hand(b, note.path, new, b.read(note.path).replace("line 5\n", "line 5, b\n"))
    result = b.sync()
    assert result.exit_code == 0, result.to_dict()
    a.sync()
    for m in (a, b):
        assert paths_by_id(m)[note.id] == [new], paths_by_id(m)
        text = m.read(new)
        assert "line 1, a\n" in text and "line 5, b\n" in text  # the incoming edit followed the move
        assert "more\n" in m.read(other.path)
        assert m.git("status", "--porcelain") == ""
    assert a.tree() == b.tree()


def test_a_note_git_had_written_and_a_person_then_moved_is_not_written_back(fleet: Fleet) -> None:
    a, b, note, _ = wanderer(fleet)
    fresh = create_note(a.store, type="semantic", title="Newcomer", body="new on a\n")
    a.write(note.path, a.read(note.path).replace("line 1\n", "line 1, a\n"))
    a.sync()
    target = interrupted(b)
    for path in (fresh.path, note.path):  # git wrote these two, then the power went
        b.write(path, b.git("show", f"{target}:{path}") + "\n")
    new_fresh, new_note = f"global/howto/moved-lumen-{fresh.id}.md", f"global/howto/moved-fern-{note.id}.md"
    move_by_hand(b, fresh.path, new_fresh)
    move_by_hand(b, note.path, new_note)
    assert b.sync().exit_code == 0
    a.sync()
    for m in (a, b):
        ids = paths_by_id(m)
        assert ids[fresh.id] == [new_fresh] and ids[note.id] == [new_note], ids
        assert "line 1, a\n" in m.read(new_note) and "new on a" in m.read(new_fresh)
    assert a.tree() == b.tree()


def test_two_notes_that_look_alike_are_never_taken_for_one_moved(fleet: Fleet) -> None:
    """Git's rename detection pairs a deleted note with another one that looks like it (one
    template); their ids say they are two notes, so each keeps its own edit."""
    a, b = pair(fleet)
    body = "".join(f"the same checklist line {n}\n" for n in range(30))
    one = create_note(a.store, type="semantic", title="Checklist", body=body)
    two = create_note(a.store, type="semantic", title="Checklist", body=body)
    a.sync()
    b.sync()
    a.write(one.path, a.read(one.path).replace("line 3\n", "line 3, edited on a\n"))
    (a.memory / two.path).unlink()
    delete_note(b.store, one.path)  # a commit of its own, then the edit: replayed one by one
    b.write(two.path, b.read(two.path).replace("line 20\n", "line 20, edited on b\n"))
    a.sync()
    result = b.sync()
    assert result.exit_code == 0, result.to_dict()  # edit beats delete, twice: no conflict
    a.sync()
    for m in (a, b):
        ids = paths_by_id(m)
        assert ids[one.id] == [one.path] and ids[two.id] == [two.path], ids
        assert "edited on a" in m.read(one.path) and "edited on b" not in m.read(one.path)
        assert "edited on b" in m.read(two.path) and "edited on a" not in m.read(two.path)
    assert a.tree() == b.tree()


@pytest.mark.parametrize("here", ["moved", "edited"])
def test_a_note_moved_elsewhere_while_a_killed_sync_had_it_half_moved_stays_one_with_both_edits(
    fleet: Fleet, here: str
) -> None:
    """a moves the note; b's sync bringing that move in is killed before git wrote anything, and
    b's person then moves the note too (it stays where b put it, moved after a's move) or edits
    it where b still sees it (the edit follows a's move)."""
    a, b, note, _ = wanderer(fleet)
    there = f"global/howto/moved-lumen-{note.id}.md"
    move_by_hand(a, note.path, there, a.read(note.path).replace("line 1\n", "line 1, a\n"))
    a.sync()
    interrupted(b)
    mine = f"projects/other-proj/howto/moved-cobalt-{note.id}.md" if here == "moved" else note.path
    move_by_hand(b, note.path, mine, b.read(note.path).replace("line 6\n", "line 6, b\n"))
    assert b.sync().exit_code == 0
    a.sync()
    where = mine if here == "moved" else there
    for m in (a, b):
        assert paths_by_id(m)[note.id] == [where], paths_by_id(m)
        assert "line 1, a\n" in m.read(where) and "line 6, b\n" in m.read(where)
    assert a.tree() == b.tree()


def _git(repo: Path, *args: str, input: str | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, text=True, check=True).stdout.strip()


NOTE = "---\nid: crisscross\ntitle: Wanderer\n---\n\n" + BODY
OLD = "notes/wanderer-crisscross.md"


def criss_cross(tmp_path: Path) -> tuple[Path, str, str]:
    """A repo with two merges of the same two commits, made in either order (as two machines of
    a mesh do): their best common ancestors are the commit that wrote the note and one that
    predates it, which a merge that takes a single base takes (it has the smaller id)."""
    repo = _repo(tmp_path)
    root = _commit(repo, {"other.md": "other\n"}, "root")
    # Ids are random: make both anew until they sort as needed (a born id that happens to sort
    # near 0 would leave a loop over `elsewhere` alone failing one run in a few hundred).
    for attempt in range(200):
        born = _commit(repo, {OLD: NOTE}, f"the note is written ({attempt})", parent=root)
        elsewhere = _commit(repo, {"x.md": f"elsewhere {attempt}\n"}, f"meanwhile {attempt}", parent=root)
        if elsewhere < born:
            break
    both = _commit(repo, {OLD: NOTE}, "both", parent=elsewhere)
    tree = _git(repo, "rev-parse", f"{both}^{{tree}}")
    one = _git(repo, "commit-tree", tree, "-p", elsewhere, "-p", born, input="merge on one machine\n")
    two = _git(repo, "commit-tree", tree, "-p", born, "-p", elsewhere, input="merge on another\n")
    return repo, one, two


def merged_both_ways(repo: Path, tmp_path: Path, one: str, two: str, where: str, said: bool = True) -> None:
    """Merging `one` and `two` (either way round) leaves the note at `where` only, with both edits;
    `said`: the merge says what it repaired (a move on one side only is no repair: the merge of
    both best common ancestors, the base, has the note where the other side left it)."""
    assert sorted(_git(repo, "merge-base", "--all", one, two).split())[0] < _git(repo, "rev-parse", f"{one}~1^2")
    merger = TreeMerger(repo, tmp_path / "idx")
    for ours, theirs in ((one, two), (two, one)):
        built = merger.merge(ours, theirs, "merge")
        files = _git(repo, "ls-tree", "-r", "--name-only", built.commit).split("\n")
        assert [f for f in files if "crisscross" in f] == [where], files
        text = _show(repo, built.commit, where) or ""
        assert "line 1, one\n" in text and "line 6, two\n" in text and "<<<<<<<" not in text, text
        assert built.conflicts == [] and bool(built.notices) == said, built
    merger.close()


def test_a_note_moved_to_two_places_over_a_criss_cross_merge_ends_up_in_one(tmp_path: Path) -> None:
    """Taken as the base, the ancestor that predates the note showed the note moved to two
    places as two new notes with the same id."""
    repo, one, two = criss_cross(tmp_path)
    one = _commit(repo, {OLD: None, "zeta/moved-crisscross.md": NOTE.replace("line 1\n", "line 1, one\n")}, "moved", parent=one)
    two = _commit(repo, {OLD: None, "alpha/moved-crisscross.md": NOTE.replace("line 6\n", "line 6, two\n")}, "moved", parent=two)
    merged_both_ways(repo, tmp_path, one, two, "alpha/moved-crisscross.md")


def test_a_note_moved_on_one_side_of_a_criss_cross_merge_and_edited_on_the_other_is_one(tmp_path: Path) -> None:
    repo, one, two = criss_cross(tmp_path)
    one = _commit(repo, {OLD: None, "zeta/moved-crisscross.md": NOTE.replace("line 1\n", "line 1, one\n")}, "moved", parent=one)
    two = _commit(repo, {OLD: NOTE.replace("line 6\n", "line 6, two\n")}, "edited where it was", parent=two)
    merged_both_ways(repo, tmp_path, one, two, "zeta/moved-crisscross.md", said=False)  # as without a criss-cross


def test_a_note_moved_by_hand_before_its_first_commit_leaves_no_row_behind(fleet: Fleet) -> None:
    """A reader indexed a hand-written note before any commit had it; moved by hand since, its
    old path is in no commit, and sync still drops the old row."""
    a, _b = pair(fleet)
    first, second = "global/facts/draft-abcdefghjk.md", "global/howto/moved-fern-abcdefghjk.md"
    a.write(first, "---\nid: abcdefghjk\ntitle: Draft\n---\n\nwritten by hand\n")
    assert first in a.cli("search", "written", "--json").stdout  # `search` indexes what is on disk
    move_by_hand(a, first, second)
    assert a.sync().exit_code == 0
    with open_index(a.store) as index:
        assert index.paths() == [second]


def test_a_move_committed_in_two_parts_still_takes_the_other_machines_edit_along(fleet: Fleet) -> None:
    """Moved by hand, then moved on with `anamnesis mv` before any sync: `mv` commits the new
    path, the next sync the old one's removal. Replayed one by one onto an edit of the note made
    elsewhere, the second commit is a deletion of an edited note, which must not keep the note
    at its old path beside the new one."""
    a, b, note, _ = wanderer(fleet)
    first, second = f"archive/moved-lumen-{note.id}.md", f"archive/moved-quartz-{note.id}.md"
    move_by_hand(b, note.path, first)
    move_note(b.store, first, second)
    a.write(note.path, a.read(note.path).replace("line 3\n", "line 3, a\n"))
    a.sync()
    assert b.sync().exit_code == 0
    a.sync()
    for m in (a, b):
        assert paths_by_id(m)[note.id] == [second], paths_by_id(m)
        assert "line 3, a\n" in m.read(second)
    assert a.tree() == b.tree()


def test_a_note_moved_by_hand_then_written_by_anamnesis_is_committed_as_one_move(fleet: Fleet) -> None:
    """Moved with `mv`, then moved again with `anamnesis mv` (or saved): the commit that makes is
    the whole move. It used to add the new path and keep the old one, and a machine that took
    that commit while it had edited the old path kept the note at both, for good."""
    a, b, note, _ = wanderer(fleet)
    b.write(note.path, b.read(note.path) + "edited on b\n")
    b.sync()
    first = "global/facts/wanderer-by-hand-" + note.id + ".md"
    move_by_hand(a, note.path, first)
    moved = move_note(a.store, first, "global/howto/wanderer-" + note.id + ".md").note
    in_head = a.git("ls-tree", "-r", "--name-only", "HEAD").splitlines()
    assert note.path not in in_head and moved.path in in_head, in_head  # the hand move is in the commit
    for m in (a, b, a, b):
        m.sync()
        assert paths_by_id(m)[note.id] == [moved.path], m.name
    assert "edited on b" in b.read(moved.path) and a.files() == b.files()


def test_copies_a_person_made_are_not_taken_for_a_move(fleet: Fleet) -> None:
    a, _b, note, _ = wanderer(fleet)
    copy = "global/facts/wanderer-copy-" + note.id + ".md"
    a.write(copy, a.read(note.path))
    create_note(a.store, type="semantic", title="Unrelated", body="x\n")
    in_head = a.git("ls-tree", "-r", "--name-only", "HEAD").splitlines()
    assert note.path in in_head and copy not in in_head  # a unit commits its own paths, nothing else


def test_a_note_deleted_here_and_edited_there_comes_back_with_a_word(fleet: Fleet) -> None:
    """Edit beats delete; the machine whose deletion is undone is told why the note is back."""
    a, b, note, _ = wanderer(fleet)
    (a.memory / note.path).unlink()  # deleted by hand on a
    b.write(note.path, b.read(note.path).replace("line 2\n", "line 2, b\n"))
    assert b.sync().exit_code == 0
    said = a.cli("sync")
    assert said.returncode == 0 and (a.memory / note.path).exists(), said.stdout
    flat = " ".join(said.stdout.split())
    assert f"{note.path} was deleted on one machine and edited on another: the edited note is kept" in flat, flat


def test_a_note_whose_front_matter_a_hand_edit_broke_is_named_by_the_sync_that_sends_it(fleet: Fleet) -> None:
    a, _b, note, _ = wanderer(fleet)
    a.write(note.path, a.read(note.path).replace("title: Wanderer", "title: During: interrupt: broken"))
    said = a.cli("sync")
    flat = " ".join(said.stdout.split())
    assert said.returncode == 0 and f"malformed: {note.path} —" in flat and "anamnesis doctor" in flat, flat
    assert "malformed" not in " ".join(a.cli("sync").stdout.split())  # said once, by the sync that sent it


def test_a_note_moved_by_hand_is_one_local_change(fleet: Fleet) -> None:
    a, _b, note, _ = wanderer(fleet)
    move_by_hand(a, note.path, f"global/howto/moved-lumen-{note.id}.md")
    said = " ".join(a.cli("sync").stdout.split())
    assert "committed 1 local change" in said, said
