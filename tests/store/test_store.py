"""Store operations: safe paths, the lock, atomic and checked writes."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from anamnesis.base.errors import AnamnesisError, LockTimeout, OutsideStore
from anamnesis.base.lock import store_lock
from anamnesis.base.paths import Store
from anamnesis.store.operations import create_note, delete_note, read_note, safe_path, update_note


@pytest.mark.parametrize("bad", ["../x.md", "/etc/passwd", "a/../../x.md", ".git/config", "", "a\0b.md"])
def test_paths_outside_the_store_are_refused(store: Store, bad: str) -> None:
    with pytest.raises(OutsideStore):
        safe_path(store, bad)


def test_symlinked_folder_escaping_the_store_is_refused(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, store.memory / "escape")
    with pytest.raises(OutsideStore):
        safe_path(store, "escape/note.md")


def test_refs_that_are_paths_name_only_notes_and_may_be_relative_to_the_cwd(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anamnesis.base.errors import UsageError
    from anamnesis.store.operations import resolve_ref

    note = create_note(store, type="semantic", title="Kept", body="text")
    (store.memory / "global" / "img").mkdir()
    (store.memory / "global" / "img" / "a.png").write_bytes(b"png")
    (store.memory / ".trash").mkdir()
    (store.memory / ".trash" / "old.md").write_text("# old\n")
    for ref in ("global/img/a.png", ".trash/old.md", str(store.memory / "global" / "img" / "a.png")):
        with pytest.raises(UsageError):
            delete_note(store, ref)
    assert (store.memory / "global" / "img" / "a.png").exists()
    assert (store.memory / ".trash" / "old.md").exists()
    folder, name = note.path.rsplit("/", 1)
    monkeypatch.chdir(store.memory / folder)
    assert resolve_ref(store, "./" + name) == note.path
    assert resolve_ref(store, "../facts/" + name) == note.path
    assert resolve_ref(store, note.path) == note.path  # still relative to memory/ when not found here


@pytest.mark.parametrize("project", ["   ", "a\nb", "/", "..", "a\tb"])
def test_blank_or_multi_line_project_keys_and_titles_are_refused(store: Store, project: str) -> None:
    from anamnesis.base.errors import UsageError

    with pytest.raises(UsageError):
        create_note(store, type="semantic", title="T", body="b", project=project)
    with pytest.raises(UsageError):
        create_note(store, type="semantic", title="a\rb", body="b")
    with pytest.raises(UsageError):  # it would be written, then never indexed as "binary"
        create_note(store, type="semantic", title="t", body="text\0more")
    assert create_note(store, type="semantic", title="T", body="b", project=" ünï/key ").project == "ünï/key"
    assert list(store.memory.glob("projects/*/*/*.md")) != []


def test_update_detects_a_concurrent_change(store: Store) -> None:
    note = create_note(store, type="semantic", title="T", body="v1")
    path = store.memory / note.path
    seen = path.read_text()
    path.write_text(seen.replace("v1", "changed by someone else"))
    with pytest.raises(AnamnesisError, match="changed on disk"):
        update_note(store, note.id, body="v2", expected_text=seen)
    assert "changed by someone else" in path.read_text()
    update_note(store, note.id, body="v3", expected_text=path.read_text())
    assert read_note(store, note.id).body.strip() == "v3"


def test_every_write_is_committed(store: Store) -> None:
    note = create_note(store, type="procedural", title="Steps", body="one")
    update_note(store, note.id, body="two", tags=["x"])
    delete_note(store, note.id)
    log = subprocess.run(
        ["git", "-C", str(store.memory), "log", "--format=%s"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(log) == 4  # create store, new, update, delete
    status = subprocess.run(
        ["git", "-C", str(store.memory), "status", "--porcelain"], capture_output=True, text=True
    )
    assert status.stdout == ""


def test_a_commit_takes_exactly_the_named_note_even_with_glob_characters(store: Store) -> None:
    from anamnesis.base import repo

    facts = store.memory / "global" / "facts"
    facts.mkdir(parents=True, exist_ok=True)
    (facts / "[d].md").write_text("# draft\n")
    repo.commit_paths(store, ["global/facts/[d].md"], "draft")
    (facts / "d.md").write_text("# d\n")  # a hand edit not yet committed
    (facts / "[d].md").unlink()
    repo.commit_paths(store, ["global/facts/[d].md"], "draft deleted")  # must not commit d.md too
    status = subprocess.run(
        ["git", "-C", str(store.memory), "status", "--porcelain", "-uall"], capture_output=True, text=True, check=True
    ).stdout
    assert status.strip() == "?? global/facts/d.md"


def _hold_lock(home: str, ready: multiprocessing.synchronize.Event, seconds: float) -> None:  # type: ignore[name-defined]
    from anamnesis.base.paths import open_store

    with store_lock(open_store(home), "test holder"):
        ready.set()
        time.sleep(seconds)


def test_lock_waits_for_a_live_holder_and_times_out(store: Store) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(str(store.home), ready, 1.5))
    holder.start()
    assert ready.wait(20)
    with pytest.raises(LockTimeout, match="test holder"), store_lock(store, "impatient", timeout=0.2):
        pass
    started = time.monotonic()
    with store_lock(store, "patient", timeout=30):
        waited = time.monotonic() - started
    holder.join()
    assert waited > 0.2


def test_lock_of_a_killed_holder_is_free(store: Store) -> None:
    code = (
        "import sys, time; from anamnesis.base.paths import open_store; from anamnesis.base.lock import store_lock\n"
        "with store_lock(open_store(sys.argv[1]), 'doomed'):\n    print('held', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(store.home)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    proc.kill()
    proc.wait()
    with store_lock(store, "after kill", timeout=2):
        pass


def test_lock_is_reentrant_in_one_process(store: Store) -> None:
    with store_lock(store, "outer"), store_lock(store, "inner", timeout=0.1):
        note = create_note(store, type="semantic", title="inside", body="nested locking works")
        assert read_note(store, note.id).body.strip() == "nested locking works"  # written while both are held


def test_lock_excludes_other_threads_of_the_same_process(store: Store) -> None:
    import threading

    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def holder() -> None:
        with store_lock(store, "thread one"):
            inside.set()
            release.wait(10)
            order.append("one leaves")

    thread = threading.Thread(target=holder)
    thread.start()
    assert inside.wait(10)
    with pytest.raises(LockTimeout), store_lock(store, "thread two", timeout=0.2):
        pass
    release.set()
    with store_lock(store, "thread two", timeout=10):
        order.append("two enters")
    thread.join()
    assert order == ["one leaves", "two enters"]


def test_a_thread_inside_a_nested_lock_does_not_stall_other_threads(store: Store) -> None:
    import threading

    inside = threading.Event()
    release = threading.Event()

    def nested() -> None:
        with store_lock(store, "outer"), store_lock(store, "inner"):
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=nested)
    thread.start()
    assert inside.wait(10)
    outcome: list[str] = []

    def impatient() -> None:
        try:
            with store_lock(store, "impatient", timeout=0.2):
                outcome.append("entered")
        except LockTimeout:
            outcome.append("timed out")

    other = threading.Thread(target=impatient)
    other.start()
    other.join(5)
    release.set()
    thread.join()
    assert outcome == ["timed out"]  # it waited on the flock with its timeout, not forever


def test_a_note_made_at_a_chosen_path_gets_every_rule_of_a_new_note(store: Store) -> None:
    """The dashboard's "create the note this link points at" goes through create_note(path=...):
    the same refusals, and secrets redacted before anything reaches the file or git."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    note = create_note(
        store, type="semantic", title="Deploy keys", body=f"token {token}\n", path="global/links/deploy.md"
    )
    assert note.path == "global/links/deploy.md"
    text = (store.memory / "global/links/deploy.md").read_text()
    assert token not in text and "[REDACTED" in text
    log = subprocess.run(["git", "-C", str(store.memory), "log", "-p"], capture_output=True, text=True).stdout
    assert token not in log
    for bad, why in (
        ("global/links/deploy.md", "already exists"),
        ("global/x.txt", "not a note path"),
        (".git/x.md", "not a note path"),
        ("../escape.md", "outside|not a note path"),
    ):
        with pytest.raises(AnamnesisError, match=why):
            create_note(store, type="semantic", title="x", body="x", path=bad)
    assert not (store.home / "escape.md").exists()
