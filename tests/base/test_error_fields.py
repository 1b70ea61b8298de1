"""Errors and problems are told apart by their fields, never by their words.

Each test words a message, a field value or a path so that a test of the text would decide
wrongly (a note whose type is "conflict", a lock file in a folder whose name holds ": ", a
reworded git error, a repository git refuses for its owner), and checks the outcome.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli
from fleet import Fleet

from anamnesis.base.errors import GitError
from anamnesis.base.git import explain, run_git
from anamnesis.base.notes import ProblemKind, parse_note
from anamnesis.base.paths import Store
from anamnesis.search.index import open_index
from anamnesis.store.operations import create_note
from anamnesis.sync.engine import _why

CONFLICT_WORDS = "---\ntitle: Words\ntype: conflict\ncreated: conflict\nsupersedes: {conflict: 1}\n---\nbody\n"


def doctor_findings(run_cli: RunCli) -> list[dict[str, Any]]:
    result = run_cli("doctor", "--json")
    assert "Traceback" not in result.stderr, result.stderr
    findings: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return findings


# -- note problems carry a kind ------------------------------------------------------------


def test_a_problem_that_says_conflict_does_not_make_a_note_conflicted() -> None:
    note = parse_note(CONFLICT_WORDS, "global/facts/words.md")
    assert any("conflict" in p for p in note.problems), note.problems  # the words say it...
    assert not note.conflicted  # ...the kinds do not
    assert {p.kind for p in note.problems} == {ProblemKind.UNKNOWN_TYPE, ProblemKind.FIELD, ProblemKind.SUPERSEDES}


def test_conflict_markers_in_the_front_matter_still_make_a_note_conflicted() -> None:
    text = "---\n<<<<<<< a\ntitle: One\n=======\ntitle: Two\n>>>>>>> b\n---\nbody\n"
    note = parse_note(text, "global/facts/torn.md")
    assert note.conflicted
    assert {p.kind for p in note.problems} == {ProblemKind.CONFLICT}
    assert note.problems[0].fix.startswith("resolve the conflict")


def test_the_index_and_doctor_go_by_kind_for_a_note_whose_type_is_conflict(run_cli: RunCli, home: Path) -> None:
    assert run_cli("init", "--local-only").returncode == 0
    folder = home / "memory" / "global" / "facts"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "words.md").write_text(CONFLICT_WORDS)
    (folder / "kind.md").write_text("---\ntitle: Kind\ntype: binary\n---\nbody\n")
    with open_index(Store(home)) as index:
        index.refresh()
        assert index.conflicted() == []
    findings = doctor_findings(run_cli)
    fixes = {f["where"]: f["fix"] for f in findings if "unknown type" in f["problem"]}
    set_type = "set `type:` to semantic, procedural, episodic or preference"
    assert fixes == {
        "global/facts/words.md": set_type,  # not "resolve the conflict"
        "global/facts/kind.md": set_type,  # not "move it out of memory/"
    }, findings


def test_doctor_attaches_the_fix_of_a_file_the_index_skipped(run_cli: RunCli, home: Path) -> None:
    assert run_cli("init", "--local-only").returncode == 0
    folder = home / "memory" / "global" / "facts"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "blob.md").write_bytes(b"\0\1\2 not text")
    (folder / "conflict.md").write_text("---\ntitle: Fine\n---\nA note whose name says conflict.\n")
    findings = doctor_findings(run_cli)
    assert [(f["where"], f["fix"]) for f in findings] == [("global/facts/blob.md", "move it out of memory/")]


# -- git errors carry the command, git's words and its status ------------------------------


def test_a_failed_git_command_carries_its_command_stderr_and_status(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with pytest.raises(GitError) as caught:
        run_git(tmp_path, "rev-parse", "--verify", "no-such-ref-here")
    exc = caught.value
    assert exc.command == "git rev-parse --verify"
    assert exc.returncode == 128
    assert exc.reason.startswith("fatal:") and exc.reason in exc.stderr
    assert str(exc) == f"git rev-parse --verify failed: {exc.reason}"


def test_why_a_peer_failed_is_gits_reason_however_the_message_is_worded() -> None:
    reworded = GitError("the fetch did not work, said git: fatal: x failed: y", reason="fatal: x failed: y")
    assert _why(reworded) == "fatal: x failed: y"


# -- a peer's failure carries what it is about ----------------------------------------------


def test_only_a_peer_without_a_repository_is_marked_so(tmp_path: Path) -> None:
    dubious = (
        "fatal: detected dubious ownership in repository at '/srv/shared/hub.git'\n"
        "To add an exception for this directory, call:\n\n"
        "\tgit config --global --add safe.directory /srv/shared/hub.git\n"
        "fatal: Could not read from remote repository.\n"
    )
    assert not explain(dubious, "/srv/shared/hub.git").no_repository
    (tmp_path / "typo.git").mkdir()  # a folder, no repository in it
    typo = str(tmp_path / "typo.git")
    missing = f"fatal: '{typo}' does not appear to be a git repository\n"
    assert explain(missing, typo).no_repository


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the hub to another user")
def test_peers_add_keeps_a_repository_git_refuses_for_its_owner(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--local-only").returncode == 0
    hub = tmp_path / "repository-shared.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)
    for path in (hub, *hub.rglob("*")):
        os.lchown(path, 54321, 54321)
    added = run_cli("peers", "add", "shared", str(hub))
    # docs/cli.md: only a URL that holds no repository is refused; this one is kept, with a warning
    assert added.returncode == 0, added.stdout + added.stderr
    assert "dubious ownership" in added.stdout and "will not work" in added.stdout, added.stdout
    listed = json.loads(run_cli("peers", "list", "--json").stdout)
    assert [p["name"] for p in listed if p["configured"]] == ["shared"], listed


@pytest.mark.e2e
def test_a_stale_lock_in_a_hub_whose_path_holds_a_colon_is_found_whole(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    hub = fleet.hub("shared: main")
    a = fleet.machine("a", {"desk": str(hub)})
    assert a.cli("sync").returncode == 0
    create_note(a.store, type="semantic", title="Second", body="y\n")
    lock = hub / "refs" / "heads" / "main.lock"
    lock.write_text("")
    old = lock.stat().st_mtime - 3600
    os.utime(lock, (old, old))
    run = a.cli("sync", "--json", timeout=60)
    assert run.returncode == 0, run.stderr  # a lock a killed git left in a hub on a path is removed...
    report = json.loads(run.stdout)
    assert any(f"removed {lock}," in line for line in report["repaired"]), report  # ...found whole, ": " and all
    assert not lock.exists()


# -- an SQLite error is named by its result code ----------------------------------------------


def test_a_write_that_fails_in_sqlite_is_named_by_its_result_code(tmp_path: Path) -> None:
    import sqlite3

    from anamnesis.base.errors import IndexLocked, LockTimeout
    from anamnesis.store.transaction import _failed

    store = Store(tmp_path / "home")
    worded = _failed(store, "indexing", sqlite3.OperationalError("no such column: locked"), "kept", "a.md")
    assert not isinstance(worded, LockTimeout) and "reindex" in str(worded), worded
    db = tmp_path / "held.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(db, timeout=0)
    with pytest.raises(sqlite3.OperationalError) as caught:
        other.execute("INSERT INTO t VALUES (1)")
    holder.rollback()
    holder.close()
    other.close()
    busy = _failed(store, "indexing", caught.value, "nothing was lost", "a.md")
    assert isinstance(busy, IndexLocked) and str(busy).endswith("; nothing was lost"), busy


def test_the_index_is_thrown_away_only_when_sqlite_says_it_is_damaged(tmp_path: Path) -> None:
    import sqlite3

    from anamnesis.search.index import _is_damaged

    db = tmp_path / "index.db"
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(sqlite3.DatabaseError) as caught:
        sqlite3.connect(db).execute("SELECT 1 FROM sqlite_master")
    assert _is_damaged(caught.value)  # SQLITE_NOTADB
    # the same words, from no SQLite result code: no reason to delete a person's index
    assert not _is_damaged(sqlite3.DatabaseError("database disk image is malformed"))


# -- a sync commit is known by the subject the sync engine writes -------------------------------


def test_a_note_whose_path_says_sync_is_not_taken_for_a_sync(tmp_path: Path) -> None:
    from anamnesis.store import history
    from anamnesis.store.operations import init_store

    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"machine_id": "desk"}))
    store = Store(home)
    init_store(store)
    note = create_note(store, type="semantic", title="Async sync: merge queues", body="x\n", project="async-io")
    (desk,) = [m for m in history.machine_activity(store) if m.machine == "desk"]
    assert "async-io" in desk.last_message and note.path in desk.last_message, desk
    assert (desk.last_sync, desk.peers) == ("", set()), desk
