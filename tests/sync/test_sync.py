"""Sync between machines on one host: real git repos, real processes, file-path peers."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fleet import Fleet, Machine, fleet  # noqa: F401

from anamnesis.search.engine import search as search_notes
from anamnesis.search.index import open_index
from anamnesis.store.operations import create_note, delete_note, update_note


def search_paths(machine: Machine, query: str) -> list[str]:
    with open_index(machine.store) as index:
        return [hit.path for hit in search_notes(index, query, limit=50)]


def no_git_leftovers(machine: Machine) -> None:
    git_dir = machine.memory / ".git"
    for name in ("rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD", "index.lock"):
        assert not (git_dir / name).exists(), name
    assert machine.git("symbolic-ref", "HEAD") == "refs/heads/main"
    assert machine.git("status", "--porcelain") == ""


def test_round_trip_through_a_hub_updates_the_index(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    note = create_note(a.store, type="semantic", title="Pgbouncer pool", body="pool_size is 20 per instance\n")
    result = a.sync()
    assert result.exit_code == 0 and result.sent >= 1
    result = b.sync()
    assert result.exit_code == 0 and result.received >= 1
    assert note.path in result.changed
    assert search_paths(b, "pool_size") == [note.path]  # the sync updated b's index
    assert a.tree() == b.tree()
    # b had no notes of its own: it took a's history as it is (no merge commit).
    assert b.git("rev-parse", "HEAD") == a.git("rev-parse", "HEAD")
    no_git_leftovers(a)
    no_git_leftovers(b)


def test_hand_edits_deletes_and_local_commits_all_travel(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    one = create_note(a.store, type="semantic", title="One", body="one\n")
    two = create_note(a.store, type="semantic", title="Two", body="two\n")
    a.sync()
    b.sync()
    a.write(one.path, a.read(one.path).replace("one\n", "one, edited in an editor\n"))
    a.write("global/facts/hand-written.md", "# Hand written\n\nno front matter at all\n")
    delete_note(a.store, two.path)
    result = a.sync()
    assert len(result.committed) == 2  # the edit and the new file; the delete was committed by delete_note
    assert "sync: 2 notes changed" in a.git("log", "-1", "--format=%s")
    b.sync()
    assert "edited in an editor" in b.read(one.path)
    assert not (b.memory / two.path).exists()
    assert search_paths(b, "hand written") == ["global/facts/hand-written.md"]
    assert search_paths(b, "two") == []
    assert a.tree() == b.tree()


def test_same_line_conflict_is_recorded_committed_and_propagated(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    c = fleet.machine("c", {"hub": fleet.url(hub)})
    note = create_note(a.store, type="procedural", title="Deploy", body="step 1\nwait 10 minutes\nstep 3\n")
    other = create_note(a.store, type="semantic", title="Unrelated", body="x\n")
    for m in (a, b, c):
        m.sync()
    update_note(a.store, note.id, body="step 1\nwait 30 minutes\nstep 3\n")
    update_note(b.store, note.id, body="step 1\nwait an hour\nstep 3\n")
    update_note(b.store, other.id, body="x, and more\n")
    assert a.sync().exit_code == 0
    result = b.sync()
    assert result.exit_code == 10
    assert result.conflicts == [note.path]
    text = b.read(note.path)
    assert "<<<<<<< a\nwait 30 minutes\n=======\nwait an hour\n>>>>>>> b\n" in text
    no_git_leftovers(b)  # not mid-rebase, everything committed
    with open_index(b.store) as index:
        assert [h.path for h in index.conflicted()] == [note.path]
    c.sync()
    assert c.read(note.path) == text  # propagated, resolvable anywhere
    assert "x, and more" in c.read(other.path)  # unrelated notes kept syncing
    # A person removes the markers in an editor and syncs: done.
    c.write(note.path, text.replace(text[text.index("<<<<<<<") : text.index("step 3")], "wait 45 minutes\n"))
    assert c.sync().exit_code == 0
    a.sync()
    assert "wait 45 minutes" in a.read(note.path) and "<<<<<<<" not in a.read(note.path)
    with open_index(a.store) as index:
        assert index.conflicted() == []


def test_edit_beats_delete_in_both_directions(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    kept_a = create_note(a.store, type="semantic", title="Edited on a", body="v1\n")
    kept_b = create_note(a.store, type="semantic", title="Edited on b", body="v1\n")
    gone = create_note(a.store, type="semantic", title="Deleted twice", body="v1\n")
    a.sync()
    b.sync()
    update_note(a.store, kept_a.id, body="v2 from a\n")
    delete_note(b.store, kept_a.path)
    delete_note(a.store, kept_b.path)
    update_note(b.store, kept_b.id, body="v2 from b\n")
    delete_note(a.store, gone.path)
    delete_note(b.store, gone.path)
    a.sync()
    assert b.sync().exit_code == 0
    a.sync()
    for m in (a, b):
        assert "v2 from a" in m.read(kept_a.path)
        assert "v2 from b" in m.read(kept_b.path)
        assert not (m.memory / gone.path).exists()
    assert a.tree() == b.tree()


def test_a_note_moved_by_hand_on_one_machine_and_edited_on_another_is_one_note(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    moved_on_b = create_note(a.store, type="semantic", title="Moved on b", body="one\ntwo\nthree\n")
    moved_on_a = create_note(a.store, type="semantic", title="Moved on a", body="one\ntwo\nthree\n")
    both = create_note(a.store, type="semantic", title="Moved and edited", body="one\ntwo\nthree\nfour\nfive\n")
    a.sync()
    b.sync()
    (b.memory / both.path).unlink()
    b.write("moved-and-edited.md", a.read(both.path).replace("five\n", "five, b\n"))
    a.write(both.path, a.read(both.path).replace("one\n", "one, a\n"))
    (b.memory / "archive").mkdir()
    (b.memory / moved_on_b.path).rename(b.memory / "archive" / "moved-on-b.md")
    a.write(moved_on_b.path, a.read(moved_on_b.path).replace("two\n", "two, edited on a\n"))
    (a.memory / "archive").mkdir()
    (a.memory / moved_on_a.path).rename(a.memory / "archive" / "moved-on-a.md")
    b.write(moved_on_a.path, b.read(moved_on_a.path).replace("two\n", "two, edited on b\n"))
    a.sync()
    assert b.sync().exit_code == 0
    a.sync()
    assert a.tree() == b.tree()
    for m in (a, b):
        assert not (m.memory / moved_on_b.path).exists() and not (m.memory / moved_on_a.path).exists()
        assert "two, edited on a" in m.read("archive/moved-on-b.md")  # the edit followed the move
        assert "two, edited on b" in m.read("archive/moved-on-a.md")
        assert not (m.memory / both.path).exists()  # moved and edited on b, edited on a: both edits, one note
        assert "one, a\n" in m.read("moved-and-edited.md") and "five, b\n" in m.read("moved-and-edited.md")
        no_git_leftovers(m)


def test_both_adding_the_same_path_keeps_both_versions(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    a.sync()
    b.sync()
    a.write("global/facts/same.md", "---\ntitle: Same\n---\n\nfrom a\n")
    b.write("global/facts/same.md", "---\ntitle: Same\n---\n\nfrom b\n")
    a.sync()
    assert b.sync().exit_code == 10
    text = b.read("global/facts/same.md")
    assert "from a" in text and "from b" in text


def test_a_note_about_conflict_markers_merges_cleanly_without_a_conflict(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    text = (
        "---\ntitle: Git tips\n---\n\nA conflict looks like\n\n<<<<<<< HEAD\nmine\n=======\ntheirs\n"
        ">>>>>>> branch\n\nline a\n\nline b\n\nline c\n\nline d\n"
    )
    a.write("hand/git-tips.md", text)
    a.sync()
    b.sync()
    a.write("hand/git-tips.md", text.replace("line a", "line a from a"))
    b.write("hand/git-tips.md", text.replace("line d", "line d from b"))
    a.sync()
    result = b.sync()
    assert result.conflicts == [] and result.exit_code == 0  # different lines: a clean merge
    merged = b.read("hand/git-tips.md")
    assert "line a from a" in merged and "line d from b" in merged and "<<<<<<< HEAD\nmine\n" in merged


def test_mesh_of_three_without_a_hub_converges(fleet: Fleet) -> None:
    names = ("a", "b", "c")
    machines = {n: fleet.machine(n) for n in names}
    for n, m in machines.items():
        for other in names:
            if other != n:
                fleet.add_peer(m, other, fleet.url(machines[other]))
    notes = {n: create_note(m.store, type="semantic", title=f"From {n}", body=f"written on {n}\n") for n, m in machines.items()}
    for n in ("a", "b", "c", "a", "b"):
        assert machines[n].sync().exit_code == 0
    trees = {m.tree() for m in machines.values()}
    assert len(trees) == 1
    for m in machines.values():
        for note in notes.values():
            assert (m.memory / note.path).exists()
        assert sorted(search_paths(m, "written")) == sorted(n.path for n in notes.values())
        no_git_leftovers(m)
    # A machine's store is pushed to through refs/anamnesis/incoming/<sender>, never to its checked-out main.
    incoming = [m.git("for-each-ref", "--format=%(refname)", "refs/anamnesis/incoming/") for m in machines.values()]
    assert any(incoming)
    assert all(ref.startswith("refs/anamnesis/incoming/") for refs in incoming for ref in refs.split())
    update_note(machines["b"].store, notes["a"].id, body="edited on b\n")
    for n in ("b", "c", "a"):
        machines[n].sync()
    assert "edited on b" in machines["a"].read(notes["a"].path)


def test_unreachable_peer_still_commits_locally_and_next_sync_pushes(fleet: Fleet) -> None:
    disk = fleet.root / "disk"
    disk.mkdir()
    hub = fleet.hub().rename(disk / "hub.git")
    away = fleet.root / "usb" / "away.git"
    away.parent.mkdir()  # a disk that is not mounted: an outage, not a setting that never works
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    fleet.add_peer(a, "laptop", fleet.url(away))
    note = create_note(a.store, type="semantic", title="Written offline", body="x\n", commit=False)
    hub.rename(fleet.root / "parked.git")  # its disk unplugged: disk/ is an empty mount point
    result = a.sync()
    assert result.exit_code == 11
    assert {p.name: p.status for p in result.peers} == {"hub": "unreachable", "laptop": "unreachable"}
    assert note.path in result.committed
    assert a.git("status", "--porcelain") == ""
    (fleet.root / "parked.git").rename(hub)
    result = a.sync(peers=["hub"])
    assert result.exit_code == 0 and result.sent >= 1
    shown = subprocess.run(["git", "-C", str(hub), "ls-tree", "-r", "--name-only", "main"], capture_output=True, text=True)
    assert note.path in shown.stdout
    from anamnesis.sync.peers import get_peer

    peer = get_peer(a.store, "hub")
    assert peer.last_ok and peer.last_error  # the failure is remembered, and so is the success after it


def test_a_peer_pointed_at_a_new_repo_gets_everything_pushed(fleet: Fleet) -> None:
    old_hub, new_hub = fleet.hub("old"), fleet.hub("new")
    a = fleet.machine("a", {"hub": fleet.url(old_hub)})
    note = create_note(a.store, type="semantic", title="Everywhere", body="moved hubs\n")
    assert a.sync().exit_code == 0
    head = a.git("rev-parse", "HEAD")
    fleet.add_peer(a, "hub", fleet.url(new_hub))  # the hub moved to another machine: an empty repo
    result = a.sync()
    assert result.exit_code == 0 and result.sent >= 1
    shown = subprocess.run(["git", "-C", str(new_hub), "rev-parse", "main"], capture_output=True, text=True)
    assert shown.stdout.strip() == head  # not "up to date" because the old hub had it
    b = fleet.machine("b", {"hub": fleet.url(new_hub)})
    assert b.sync().exit_code == 0 and (b.memory / note.path).exists()
    assert a.git("rev-parse", "HEAD") == head  # nothing was rewritten


def test_push_rejected_because_the_hub_moved_on_is_retried_in_the_same_sync(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    c = fleet.machine("c", {"hub": fleet.url(hub)})
    a.sync()
    c.sync()
    before = create_note(c.store, type="semantic", title="Synced before", body="from c\n")
    c.sync()
    theirs = create_note(c.store, type="semantic", title="Pushed meanwhile", body="from c\n")
    ours = create_note(a.store, type="semantic", title="Ours", body="from a\n")
    # Right after a's fetch has updated its view of the hub, c pushes: a's push then finds the hub moved on.
    flag = fleet.root / "c-pushed"
    hook = a.memory / ".git" / "hooks" / "reference-transaction"
    hook.write_text(
        "#!/bin/sh\n"
        '[ "$1" = committed ] || exit 0\n'
        "grep -q refs/anamnesis/peers/hub/main || exit 0\n"
        f'[ -e "{flag}" ] && exit 0\n'
        f'touch "{flag}"\n'
        "unset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE\n"
        f'git -C "{c.memory}" push -q "{hub}" main:main\n'
    )
    hook.chmod(0o755)
    result = a.sync()
    assert flag.exists()
    assert result.exit_code == 0
    hub_files = subprocess.run(["git", "-C", str(hub), "ls-tree", "-r", "--name-only", "main"], capture_output=True, text=True).stdout
    assert theirs.path in hub_files and ours.path in hub_files and before.path in hub_files
    assert (a.memory / theirs.path).exists()
    assert a.git("rev-parse", "HEAD") == subprocess.run(
        ["git", "-C", str(hub), "rev-parse", "main"], capture_output=True, text=True
    ).stdout.strip()
    hook.unlink()


def test_join_new_machine_takes_history_and_one_with_notes_merges(fleet: Fleet) -> None:
    from anamnesis.sync.engine import join

    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    create_note(a.store, type="semantic", title="From a", body="a\n")
    a.sync()
    fresh = fleet.machine("fresh")
    result = join(fresh.store, str(hub), "hub")
    assert result.exit_code == 0 and result.received >= 2 and len(result.changed) == 1
    assert fresh.git("rev-parse", "HEAD") == a.git("rev-parse", "HEAD")
    busy = fleet.machine("busy")
    mine = create_note(busy.store, type="semantic", title="From busy", body="busy\n")
    join(busy.store, str(hub))
    assert (busy.memory / mine.path).exists()
    assert search_paths(busy, "from")  # both notes indexed
    assert len(search_paths(busy, "from")) == 2
    a.sync()
    assert (a.memory / mine.path).exists()


def test_init_with_peer_joins_from_the_command_line(fleet: Fleet, tmp_path: Path) -> None:
    hub, note = fleet.hub_with_a_note()
    newcomer = Machine("new", tmp_path / "new")
    proc = newcomer.cli("init", "--peer", str(hub), "--no-schedule", "--no-claude", "--json")
    assert proc.returncode == 0, proc.stderr
    assert (newcomer.memory / note.path).exists()
    settings = json.loads((newcomer.home / "settings.json").read_text())
    assert settings["peers"]["hub"]["url"] == str(hub)
    assert not (newcomer.memory / "settings.json").exists()


def test_init_with_a_mistyped_peer_fails_and_does_not_keep_it(fleet: Fleet, tmp_path: Path) -> None:
    hub = fleet.hub()
    newcomer = Machine("new", tmp_path / "new")
    proc = newcomer.cli("init", "--peer", str(fleet.root / "hubb.git"), "--no-schedule", "--no-claude")
    assert proc.returncode != 0 and "cannot join" in proc.stderr
    assert json.loads(newcomer.cli("peers", "list", "--json").stdout) == []  # not a peer every sync would miss
    proc = newcomer.cli("init", "--peer", str(hub), "--no-schedule", "--no-claude")
    assert proc.returncode == 0, proc.stderr
    assert [p["name"] for p in json.loads(newcomer.cli("peers", "list", "--json").stdout)] == ["hub"]
    assert newcomer.cli("sync").returncode == 0


def test_repo_left_mid_rebase_by_hand_is_refused_with_instructions(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    note = create_note(a.store, type="semantic", title="N", body="base\n")
    a.git("checkout", "-q", "-b", "side")
    a.write(note.path, a.read(note.path).replace("base", "side"))
    a.git("commit", "-qam", "side")
    a.git("checkout", "-q", "main")
    a.write(note.path, a.read(note.path).replace("base", "main"))
    a.git("commit", "-qam", "main")
    a.git("rebase", "side", check=False)  # stops on the conflict
    assert (a.memory / ".git" / "rebase-merge").exists()
    head = a.git("rev-parse", "HEAD")
    proc = a.cli("sync")
    assert proc.returncode == 12
    assert "rebase --abort" in proc.stderr and "rebase --continue" in proc.stderr
    refused = a.cli("sync", "--json")
    assert refused.returncode == 12 and json.loads(refused.stdout)["outcome"] == "refused"
    assert a.git("rev-parse", "HEAD") == head
    assert (a.memory / ".git" / "rebase-merge").exists()  # a person's rebase is theirs to finish
    a.git("rebase", "--abort")
    assert a.cli("sync").returncode == 0


def test_eight_concurrent_syncs_on_one_store_all_succeed(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    for i in range(8):
        a.write(f"global/facts/n{i}.md", f"---\ntitle: N{i}\n---\n\nnote {i}\n")
    procs = [a.spawn_sync() for _ in range(8)]
    outputs = [p.communicate(timeout=120) for p in procs]
    codes = [p.returncode for p in procs]
    assert codes == [0] * 8, [err for _, err in outputs]
    assert a.git("status", "--porcelain") == ""
    hub_files = subprocess.run(["git", "-C", str(hub), "ls-tree", "-r", "--name-only", "main"], capture_output=True, text=True).stdout
    assert all(f"global/facts/n{i}.md" in hub_files for i in range(8))


def test_stale_index_lock_is_removed_only_when_no_git_process_owns_it(fleet: Fleet) -> None:
    a = fleet.machine("a")
    lock = a.memory / ".git" / "index.lock"
    lock.write_text("")
    # A git process working in the repo (as a killed sync's orphan would be): sync waits for it.
    worker = subprocess.Popen(
        ["git", "-C", str(a.memory), "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    outcome: dict[str, object] = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("result", a.sync()))
    thread.start()
    time.sleep(0.5)
    assert lock.exists() and thread.is_alive()
    assert worker.stdin is not None
    worker.stdin.close()
    worker.wait(timeout=10)
    thread.join(timeout=30)
    result = outcome["result"]
    assert result.exit_code == 0  # type: ignore[attr-defined]
    assert any("index.lock" in line for line in result.repaired)  # type: ignore[attr-defined]
    assert not lock.exists()


def test_interrupted_checkout_is_finished_without_losing_an_edit(fleet: Fleet) -> None:
    from anamnesis.store.recovery import CHECKOUT_MARKER, write_marker

    a = fleet.machine("a")
    one = create_note(a.store, type="semantic", title="One", body="one v1\n")
    two = create_note(a.store, type="semantic", title="Two", body="two v1\n")
    three = create_note(a.store, type="semantic", title="Three", body="three v1\n")
    four = create_note(a.store, type="semantic", title="Four", body="four v1\nmiddle\nlast line\n")
    orig = a.git("rev-parse", "HEAD")
    # The commit a killed sync was moving to: one, two and four changed.
    a.write(one.path, a.read(one.path).replace("v1", "v2"))
    a.write(two.path, a.read(two.path).replace("v1", "v2"))
    a.write(four.path, a.read(four.path).replace("four v1", "four v2"))
    a.git("commit", "-qam", "target")
    target = a.git("rev-parse", "HEAD")
    target_two = a.read(two.path)
    a.git("reset", "-q", "--hard", orig)
    # Killed half-way: `one` already moved, `two` not yet; meanwhile the user edited `three`.
    a.git("show", f"{target}:{one.path}")
    (a.memory / one.path).write_text(a.git("show", f"{target}:{one.path}") + "\n")
    a.write(three.path, a.read(three.path).replace("v1", "edited meanwhile"))
    a.write(four.path, a.read(four.path).replace("last line", "last line, edited meanwhile"))
    write_marker(a.store, CHECKOUT_MARKER, {"orig": orig, "target": target})
    result = a.sync()
    assert result.exit_code == 0
    assert any("interrupted" in line for line in result.repaired)
    assert a.git("merge-base", "--is-ancestor", target, "HEAD", check=False) == ""
    assert a.read(two.path) == target_two
    assert "one v2" in a.read(one.path)
    assert "edited meanwhile" in a.read(three.path)
    assert "four v2" in a.read(four.path) and "last line, edited meanwhile" in a.read(four.path)
    no_git_leftovers(a)


def test_a_note_seen_half_moved_is_not_deleted_or_overwritten_with_what_was_seen(fleet: Fleet) -> None:
    """A sync killed while git moved the tree left a note at its old version; another machine's line
    is in the version it was moving to. Deleting the note, or writing a body made from the old
    version, would drop that line unseen: both are refused until the person looks again."""
    from anamnesis.base.errors import NoteChanged
    from anamnesis.store.recovery import CHECKOUT_MARKER, write_marker

    a = fleet.machine("a")
    note = create_note(a.store, type="semantic", title="Shared", body="mine\n")
    other = create_note(a.store, type="semantic", title="Other", body="other\n")
    orig = a.git("rev-parse", "HEAD")
    a.write(note.path, a.read(note.path) + "added on another machine\n")
    a.write(other.path, a.read(other.path) + "also added\n")
    a.git("commit", "-qam", "target")
    target = a.git("rev-parse", "HEAD")
    a.git("reset", "-q", "--hard", orig)  # killed before git wrote either file
    write_marker(a.store, CHECKOUT_MARKER, {"orig": orig, "target": target})
    seen = a.read(note.path)
    assert "added on another machine" not in seen
    with pytest.raises(NoteChanged, match="look at it"):
        delete_note(a.store, note.path)
    assert "added on another machine" in a.read(note.path)  # finished, and kept
    assert a.git("rev-parse", "HEAD") == target
    # Once looked at again, the same deletion goes through.
    delete_note(a.store, note.path)
    assert not (a.memory / note.path).exists()
    # A new body made from a half-moved note is refused the same way; other fields are not.
    orig = a.git("rev-parse", "HEAD")
    a.write(other.path, a.read(other.path) + "later line\n")
    a.git("commit", "-qam", "target 2")
    target = a.git("rev-parse", "HEAD")
    a.git("reset", "-q", "--hard", orig)
    write_marker(a.store, CHECKOUT_MARKER, {"orig": orig, "target": target})
    with pytest.raises(NoteChanged):
        update_note(a.store, other.path, body="rewritten from what was seen\n")
    assert "later line" in a.read(other.path)
    update_note(a.store, other.path, body=a.read(other.path).split("---\n", 2)[2] + "and mine\n")
    assert "later line" in a.read(other.path) and "and mine" in a.read(other.path)
    no_git_leftovers(a)


def test_sync_log_feeds_status_and_peers_list(fleet: Fleet) -> None:
    from anamnesis.sync.synclog import last_sync_summary

    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    (fleet.root / "usb").mkdir()  # a disk that is not mounted: the peer is off, not misconfigured
    fleet.add_peer(a, "gone", str(fleet.root / "usb" / "nowhere.git"))
    a.sync()
    summary = last_sync_summary(a.store)
    assert summary["last_sync"]["exit_code"] == 11
    assert summary["last_error"]["unreachable"][0]["peer"] == "gone"
    proc = a.cli("status", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert "some peers unreachable" in info["last_sync"]
    assert "gone" in info["last_error"]
    listed = json.loads(a.cli("peers", "list", "--json").stdout)
    by_name = {p["name"]: p for p in listed}
    assert by_name["hub"]["last_ok"] and not by_name["hub"]["last_error"]
    assert by_name["gone"]["last_error"] and not by_name["gone"]["last_ok"]
    log = a.home / "logs" / "sync.log"
    assert log.exists() and not str(log).startswith(str(a.memory))


def test_settings_and_peers_never_enter_memory(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    a.sync()
    tracked = a.git("ls-files")
    assert "settings.json" not in tracked and "peers.json" not in tracked and "sync.log" not in tracked


def test_a_symbolic_link_in_memory_is_never_committed_nor_carried_to_a_peer(fleet: Fleet, tmp_path: Path) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": str(hub)})
    outside = tmp_path / "outside.md"
    outside.write_text("---\ntitle: Private\n---\nnot for the peers\n")
    (a.memory / "global" / "facts").mkdir(parents=True, exist_ok=True)
    (a.memory / "global" / "facts" / "linked.md").symlink_to(outside)
    (a.memory / "projects").mkdir(exist_ok=True)
    (a.memory / "projects" / "elsewhere").symlink_to(tmp_path)
    create_note(a.store, type="semantic", title="A real note", body="synced\n")
    proc = a.cli("sync")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "left out: global/facts/linked.md is a symbolic link" in " ".join(proc.stdout.split()), proc.stdout
    tracked = a.git("ls-files")
    assert "linked.md" not in tracked and "projects/elsewhere" not in tracked
    on_hub = subprocess.run(["git", "-C", str(hub), "ls-tree", "-r", "--name-only", "main"], capture_output=True, text=True)
    assert "a-real-note" in on_hub.stdout and "linked.md" not in on_hub.stdout and "elsewhere" not in on_hub.stdout
    again = json.loads(a.cli("sync", "--json").stdout)
    assert sorted(again["left_out"]) == ["global/facts/linked.md", "projects/elsewhere"]
    assert (a.memory / "global" / "facts" / "linked.md").is_symlink()  # left where it is

