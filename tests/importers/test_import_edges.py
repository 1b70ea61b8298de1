"""`anamnesis import` just off its happy path: two folders of one name, a person's edit meeting a
changed source, options given again, titles from file names, odd 0.1.3 notes, Ctrl-C, emoji.

Real git, the real CLI (in this process, or as a real process where a signal is sent).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, RunCli, cli_env
from test_import import head, imported, run_json

from anamnesis.base.notes import parse_note
from anamnesis.base.paths import Store
from anamnesis.store.operations import read_note, save_note


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def search_paths(run_cli: RunCli, query: str) -> list[str]:
    proc = run_cli("search", query, "--json")
    assert proc.returncode == 0, proc.stderr
    data: Any = json.loads(proc.stdout)
    hits = data["results"] if isinstance(data, dict) else data
    return [hit["path"] for hit in hits]


def test_two_folders_of_the_same_name_never_share_a_note(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    write(tmp_path / "projA" / "docs" / "README.md", "# Project A readme\nA uses Postgres.\n")
    write(tmp_path / "projB" / "docs" / "README.md", "# Project B readme\nB uses MySQL.\n")
    first = run_json(run_cli, "markdown", str(tmp_path / "projA" / "docs"), "-p", "github.com/acme/a")
    second = run_json(run_cli, "markdown", str(tmp_path / "projB" / "docs"), "-p", "github.com/acme/b")
    assert (first["created"], second["created"], second["updated"]) == (1, 1, 0)
    notes = {n.title: n for n in imported(store).values()}
    assert notes["Project A readme"].project == "github.com/acme/a" and "Postgres" in notes["Project A readme"].body
    assert notes["Project B readme"].project == "github.com/acme/b"
    assert len(search_paths(run_cli, "Postgres")) == 1 and len(search_paths(run_cli, "MySQL")) == 1


def test_a_note_an_older_version_keyed_by_folder_name_is_adopted_not_doubled(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    docs = tmp_path / "projA" / "docs"
    write(docs / "README.md", "# Project A readme\nA uses Postgres.\n")
    run_json(run_cli, "markdown", str(docs))
    (key, note), = imported(store).items()
    # as versions before this one keyed it: the folder's name and the file's path
    text = (store.memory / note.path).read_text(encoding="utf-8").replace(key, "markdown:docs/README.md")
    (store.memory / note.path).write_text(text, encoding="utf-8")
    subprocess.run(["git", "-C", str(store.memory), "commit", "-qam", "m: import markdown: 1 new"], check=True)

    again = run_json(run_cli, "markdown", str(docs))
    assert (again["created"], again["updated"]) == (0, 1)
    assert list(imported(store)) == [key]  # the one note, under the new key
    assert run_json(run_cli, "markdown", str(docs))["unchanged"] == 1


def edit_body(store: Store, path: str, old: str, new: str) -> None:
    note = read_note(store, path)
    assert old in note.body
    note.body = note.body.replace(old, new)
    save_note(store, note, message="m: edit by hand")


def test_an_edit_made_here_is_merged_with_the_sources_change_or_kept_beside_it(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    source = write(vault / "deploy.md", "# Deploy\n\nStep one: build.\n\nStep two: ship.\n\nStep three: watch.\n")
    run_json(run_cli, "markdown", str(vault))
    (note,) = imported(store).values()

    # a change on other lines than the person's: both kept, no conflict
    edit_body(store, note.path, "Step one: build.", "Step one: build with make.")
    source.write_text("# Deploy\n\nStep one: build.\n\nStep two: ship.\n\nStep three: watch the graphs.\n")
    merged = run_json(run_cli, "markdown", str(vault))
    assert (merged["updated"], merged["conflicted"]) == (1, 0)
    body = read_note(store, note.path).body
    assert "build with make" in body and "watch the graphs" in body

    # the same line changed on both sides: both versions in a conflict block, listed by `conflicts`
    edit_body(store, note.path, "Step two: ship.", "Step two: ship on Tuesdays.")
    source.write_text("# Deploy\n\nStep one: build.\n\nStep two: ship to staging.\n\nStep three: watch the graphs.\n")
    clash = run_json(run_cli, "markdown", str(vault))
    assert (clash["updated"], clash["conflicted"]) == (1, 1)
    body = read_note(store, note.path).body
    assert "ship on Tuesdays" in body and "ship to staging" in body and "build with make" in body
    assert "<<<<<<< import\n" in body and ">>>>>>> " in body  # labelled: the source, and this machine
    listed = run_cli("conflicts", "--json")
    assert [c["path"] for c in json.loads(listed.stdout)] == [note.path]
    human = run_cli("import", "markdown", str(vault))
    assert human.returncode == 0 and "unchanged" in human.stdout  # the source did not change again

    # a source change while the conflict is unresolved: reported, the note left as it is
    source.write_text("# Deploy\n\nStep one: build.\n\nStep two: ship to production.\n")
    before = (store.memory / note.path).read_text()
    waiting = run_json(run_cli, "markdown", str(vault))
    assert waiting["updated"] == 0 and "conflict not resolved yet" in waiting["skipped"][0]["reason"]
    assert (store.memory / note.path).read_text() == before

    # a note nobody edited is still simply updated
    write(vault / "other.md", "# Other\nfirst\n")
    run_json(run_cli, "markdown", str(vault))
    write(vault / "other.md", "# Other\nsecond\n")
    run_json(run_cli, "markdown", str(vault))
    other = next(n for n in imported(store).values() if n.title == "Other")
    assert other.body == "# Other\nsecond\n"


def test_another_tag_or_project_on_a_second_run_is_applied(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / "pool.md", "# Pool\npool_size is 20\n")
    run_json(run_cli, "markdown", str(vault))
    tagged = run_json(run_cli, "markdown", str(vault), "-g", "ops", "-p", "github.com/acme/api")
    assert (tagged["updated"], tagged["unchanged"]) == (1, 0)
    (note,) = imported(store).values()
    assert note.tags == ["ops"] and note.project == "github.com/acme/api"
    assert note.path.startswith("projects/github.com-acme-api/"), note.path  # filed with its project's notes
    assert not list((store.memory / "global").rglob("*.md"))
    same = run_json(run_cli, "markdown", str(vault), "-g", "ops", "-p", "github.com/acme/api")
    assert (same["updated"], same["unchanged"]) == (0, 1)
    assert run_json(run_cli, "markdown", str(vault))["unchanged"] == 1  # no options: nothing to apply


def test_titles_from_dated_file_names_keep_the_date(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    vault = tmp_path / "journal"
    write(vault / "2026-11-26.md", "Shipped the importer.\n")
    write(vault / "2026-11-27-standup_notes.md", "Talked about sync.\n")
    write(vault / "release-plan.md", "Freeze on Friday.\n")
    run_json(run_cli, "markdown", str(vault))
    titles = sorted(n.title for n in imported(store).values())
    assert titles == ["2026-11-26", "2026-11-27 standup notes", "release plan"]


def test_emoji_titles_are_written_as_utf8(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / "deploy.md", "---\ntitle: Déploiement 🚀\ntags: [🚀]\n---\nOn Fridays.\n")
    run_json(run_cli, "markdown", str(vault))
    (note,) = imported(store).values()
    text = (store.memory / note.path).read_text(encoding="utf-8")
    assert "title: Déploiement 🚀\n" in text and "\\U0001F680" not in text
    assert parse_note(text, note.path).title == "Déploiement 🚀"


def test_importing_this_stores_own_notes_says_so(store: Store, run_cli: RunCli) -> None:
    for source, words in (("markdown", "its notes are already here"), ("anamnesis-memory", "not an anamnesis-memory 0.1.3 store")):
        proc = run_cli("import", source, str(store.memory))
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr
        assert "move an anamnesis-memory 0.1.3 store aside" not in proc.stderr


def _proc_text(pid: int, name: str) -> str:
    """What /proc says of a process (for the task folder: each thread's wchan), for a failure message."""
    base = Path(f"/proc/{pid}")
    try:
        if name == "task":
            return " ".join(f"{t.name}:{(t / 'wchan').read_text()}" for t in sorted((base / "task").iterdir()))
        text = (base / name).read_text()
        wanted = ("State", "Threads", "SigBlk", "SigIgn", "SigPnd", "ShdPnd")
        return " ".join(line for line in text.splitlines() if line.startswith(wanted)) or text
    except OSError as exc:
        return f"unreadable: {exc}"


def _signal_an_import_waiting_for_the_store(
    store: Store, home: Path, tmp_path: Path, sig: signal.Signals
) -> tuple[int, str, str]:
    """Start an import of 20 notes while the test holds the store, send `sig` once it waits there
    to write, and return its exit code, stdout and stderr."""
    from anamnesis.base.lock import store_lock

    vault = tmp_path / "vault"
    for number in range(20):
        write(vault / f"a{number:02}.md", f"# Note {number}\ntext {number}\n")
    lock = str(store.lock_path)
    with store_lock(store, "the test holds the store"):  # the import plans, then waits here to write
        proc = subprocess.Popen(
            [sys.executable, "-m", "anamnesis", "import", "markdown", str(vault)],
            env=cli_env(home), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # as from a terminal: a suite started in the background (`cmd &`) ignores SIGINT, and its
            # children inherit that, so the import would rightly ignore this Ctrl-C too
            preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 180  # a loaded machine can take a while to start the import
        waiting = False
        while time.monotonic() < deadline and not waiting and proc.poll() is None:
            time.sleep(0.05)
            waiting = lock in _open_files(proc.pid)
        assert waiting, f"the import never waited for the store (it ended with {proc.poll()})"
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=180)  # seen once to take over 60 s with the whole suite running
        except subprocess.TimeoutExpired:
            stuck = {name: _proc_text(proc.pid, name) for name in ("wchan", "status", "task")}
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"the import did not end after {sig.name}: {stuck}; stderr {err!r}") from None
    return proc.returncode, out, err


@pytest.mark.parametrize(("sig", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_a_signal_during_an_import_says_so_writes_nothing_and_exits_as_a_shell_reports_it(
    store: Store, home: Path, tmp_path: Path, sig: signal.Signals, exit_code: int
) -> None:
    """Ctrl-C, and SIGTERM as Ctrl-C does (a closed terminal's SIGHUP too: SIGTERM took the import
    down mid-write, notes written and not committed, no word said): nothing written, one line."""
    before = head(store)
    code, out, err = _signal_an_import_waiting_for_the_store(store, home, tmp_path, sig)
    assert code == exit_code, (out, err)
    assert err.strip().splitlines()[-1] == "anamnesis: error: interrupted: nothing was imported (every note is as it was)"
    assert head(store) == before and not imported(store)
    status = subprocess.run(["git", "-C", str(store.memory), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""


def _open_files(pid: int) -> set[str]:
    """The files process `pid` has open (what /proc says they are)."""
    found: set[str] = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                found.add(os.readlink(fd))
            except OSError:
                continue
    except OSError:
        pass
    return found


@pytest.mark.e2e
def test_odd_notes_of_a_real_0_1_3_store(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    from test_import_e2e import old_cli, old_env

    old = tmp_path / "old-home" / ".anamnesis"
    old.mkdir(parents=True)
    transcript = write(tmp_path / "session.jsonl", "".join(json.dumps(line) + "\n" for line in (
        {"type": "user", "sessionId": "s1", "cwd": str(tmp_path), "message": {"role": "user", "content": "Fix the cache eviction bug"}},
        {"type": "assistant", "sessionId": "s1", "message": {"role": "assistant", "content": [{"type": "text", "text": "Fixed the TTL units in cache.py."}]}},
        {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "Document it too."}},
        {"type": "assistant", "sessionId": "s1", "message": {"role": "assistant", "content": [{"type": "text", "text": "Documented in docs/cache.md."}]}},
    )))
    proc = subprocess.run(
        [str(old_cli()), "capture", "--transcript", str(transcript), "--project", "github.com/acme/api", "--no-sync"],
        env=old_env(old), cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (written,) = (old / "memory" / "episodic").glob("*.md")
    front = written.read_text().split("---\n")[1]
    # the same note as 0.1.3 writes it, once with its title and no body, once with a front matter never closed
    empty = front.replace(written.stem, "01JABCDEFGHJKMNPQRSTVWXYZ0").replace("\ntitle: ", "\ntitle: Only a title ")
    write(old / "memory" / "semantic" / "01JABCDEFGHJKMNPQRSTVWXYZ0.md", f"---\n{empty}---\n")
    write(old / "memory" / "semantic" / "01JZZZZZZZZZZZZZZZZZZZZZZZ.md", f"---\n{front}\nthe body\n")

    data = run_json(run_cli, "anamnesis-memory", str(old))
    assert data["created"] == 2
    reasons = {Path(s["origin"]).name: s["reason"] for s in data["skipped"]}
    assert reasons["01JZZZZZZZZZZZZZZZZZZZZZZZ.md"] == "front matter is not closed by a '---' line"
    titled = read_note(store, "01JABCDEFGHJKMNPQRSTVWXYZ0")
    assert titled.title.startswith("Only a title") and titled.body.strip() == ""


def test_sync_reports_what_the_mirror_imported(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    from test_import import MEMORIES, make_project, write_memories

    from anamnesis.importers import set_mirror
    from anamnesis.importers.claude_auto_memory import sanitise

    project = make_project(tmp_path / "work" / "api")
    folder = tmp_path / "claude-config" / "projects" / sanitise(str(project.resolve())) / "memory"
    write_memories(folder, {k: v for k, v in MEMORIES.items() if k != "broken.md"})
    set_mirror(store, "claude-auto-memory", project, True)
    proc = run_cli("sync", "--json")
    assert proc.returncode == 0, proc.stderr
    (brought,) = json.loads(proc.stdout)["imported"]
    assert brought["source"] == "claude-auto-memory" and brought["created"] == 4 and brought["updated"] == 0
    assert brought["commit"] == head(store)

    write_memories(folder, {"project_owner.md": "---\nname: owner\ndescription: The billing team owns invoices\n---\n\nAsk them.\n"})
    text = run_cli("sync")
    assert text.returncode == 0, text.stderr
    assert "imported from claude-auto-memory" in text.stdout and "1 new, 0 updated notes" in text.stdout
    quiet = run_cli("sync", "--json")  # nothing changed in the source: nothing imported, nothing said
    assert json.loads(quiet.stdout)["imported"] == []


def test_a_fifo_a_huge_file_and_symbolic_links_are_skipped_with_their_reason(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    write(vault / "ok.md", "A plain note.\n")
    os.mkfifo(vault / "pipe.md")  # read, it would block the import for ever
    with open(vault / "huge.md", "wb") as handle:  # 400 MB long, and not a byte of it on disk
        handle.truncate(400_000_000)
    outside = tmp_path / "outside"
    write(outside / "secret.md", "Not part of the vault.\n")
    (vault / "link.md").symlink_to(outside / "secret.md")
    (vault / "linked-folder").symlink_to(outside)
    started = time.monotonic()
    proc = run_cli("import", "markdown", str(vault), "--json", timeout=30, real_process=True)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 20  # the FIFO was not opened, the huge file not read
    report = json.loads(proc.stdout)
    skipped = {Path(s["origin"]).name: s["reason"] for s in report["skipped"]}
    assert "not a regular file" in skipped["pipe.md"], skipped
    assert "too big for a note" in skipped["huge.md"], skipped
    assert "symbolic link" in skipped["link.md"] and "symbolic link" in skipped["linked-folder"], skipped
    assert [n.title for n in imported(store).values()] == ["ok"]


def test_notes_a_killed_import_had_written_are_committed_by_the_next_run(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    for n in range(3):
        write(vault / f"note-{n}.md", f"Note number {n}.\n")
    assert run_cli("import", "markdown", str(vault)).returncode == 0
    first = head(store)
    # As a SIGKILL between writing the files and committing them leaves it: one more note on
    # disk, indexed, never committed.
    write(vault / "note-3.md", "Note number 3.\n")
    subprocess.run(["git", "-C", str(store.memory), "reset", "-q", "--soft", first], check=True)
    assert run_cli("import", "markdown", str(vault)).returncode == 0
    subprocess.run(["git", "-C", str(store.memory), "reset", "-q", "--mixed", first], check=True)
    assert subprocess.run(
        ["git", "-C", str(store.memory), "status", "--porcelain"], capture_output=True, text=True
    ).stdout.startswith("??")  # the new note's file is here, untracked
    report = run_json(run_cli, "markdown", str(vault))
    assert report["unchanged"] == 4 and report["commit"], report
    status = subprocess.run(["git", "-C", str(store.memory), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""
    message = subprocess.run(["git", "-C", str(store.memory), "log", "-1", "--format=%s"], capture_output=True, text=True)
    assert "1 note an interrupted import had written, committed" in message.stdout


def test_crlf_sources_unreadable_folders_markdown_extensions_and_installed_packages(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    (vault / "plan.md").parent.mkdir(parents=True)
    (vault / "plan.md").write_bytes(b"# Plan\r\nalpha\r\nbeta\r\n")
    write(vault / "notes.markdown", "# Long name\nkept too\n")
    write(vault / "node_modules" / "left-pad" / "README.md", "# left-pad\nnot mine\n")
    write(vault / "locked" / "secret-plans.md", "# Locked\nunread\n")
    os.chmod(vault / "locked", 0)
    try:
        report = run_json(run_cli, "markdown", str(vault))
    finally:
        os.chmod(vault / "locked", 0o755)
    titles = {n.title: n for n in imported(store).values()}
    assert {"Plan", "Long name"} <= set(titles) and "left-pad" not in titles, titles
    assert b"\r" not in (store.memory / titles["Plan"].path).read_bytes()
    reasons = " ".join(f"{s['origin']}: {s['reason']}" for s in report["skipped"])
    assert "node_modules" in reasons and "installed packages" in reasons
    if os.geteuid() != 0:  # root reads a folder whatever its mode
        assert "locked" in reasons and "cannot be read" in reasons


def test_a_note_deleted_after_its_import_is_not_imported_again(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / "db.md", "# Database\nPostgres 16.\n")
    write(vault / "tabs.md", "# Tabs\nTwo spaces.\n")
    run_json(run_cli, "markdown", str(vault))
    notes = {n.title: n for n in imported(store).values()}
    assert run_cli("rm", notes["Database"].id, "--yes").returncode == 0
    write(vault / "db.md", "# Database\nPostgres 17 now.\n")  # the source changed since, too
    write(vault / "tabs.md", "# Tabs\nFour spaces.\n")
    again = run_json(run_cli, "markdown", str(vault))
    assert (again["created"], again["updated"]) == (0, 1), again
    assert any("deleted here after it was imported" in s["reason"] for s in again["skipped"]), again["skipped"]
    assert "Database" not in {n.title for n in imported(store).values()}


def test_a_conflict_resolved_with_ones_own_side_stays_resolved_when_the_source_changes_again(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    source = write(vault / "r.md", "# R\nl1\nl2\nl3\nl4\nl5\n")
    run_json(run_cli, "markdown", str(vault))
    (note,) = imported(store).values()
    edit_body(store, note.path, "l1\n", "l1 MINE\n")
    source.write_text("# R\nl1 THEIRS\nl2\nl3\nl4\nl5\n")
    assert run_json(run_cli, "markdown", str(vault))["conflicted"] == 1
    assert run_cli("resolve", note.id, "--ours").returncode == 0
    source.write_text("# R\nl1 THEIRS\nl2\nl3\nl4\nl5\nl6 new at source\n")
    again = run_json(run_cli, "markdown", str(vault))
    assert (again["updated"], again["conflicted"]) == (1, 0), again
    body = read_note(store, note.path).body
    assert "l1 MINE" in body and "l6 new at source" in body and "THEIRS" not in body and "<<<<<<<" not in body
    source.write_text("# R\nl1 THEIRS\nl2\nl3\nl4\nl5\nl6 new at source\nl7 and again\n")  # appended once more
    third = run_json(run_cli, "markdown", str(vault))
    assert (third["updated"], third["conflicted"]) == (1, 0), third
    assert "l7 and again" in read_note(store, note.path).body


def test_a_claude_md_heading_with_nothing_under_it_makes_no_note(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write(project / "CLAUDE.md", "# Project\nUse uv.\n\n## Later\n\n## Testing\nRun pytest -x.\n")
    report = run_json(run_cli, "claude-md", str(project))
    titles = sorted(n.title for n in imported(store).values())
    assert titles == ["Project", "Testing"], titles
    assert any(s["origin"].endswith("#later") and s["reason"].startswith("empty") for s in report["skipped"]), report


def test_a_title_changed_on_both_sides_keeps_yours_and_says_the_sources(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    source = write(vault / "hr.md", "---\ntitle: Rules\n---\nBe kind.\n")
    run_json(run_cli, "markdown", str(vault))
    (note,) = imported(store).values()
    mine = read_note(store, note.path)
    mine.title = "Rules (my title)"
    save_note(store, mine, message="m: retitle by hand")
    source.write_text("---\ntitle: Rules v2\n---\nBe kind.\nBe on time.\n")
    report = run_json(run_cli, "markdown", str(vault))
    (step,) = [s for s in report["notes"] if s["action"] != "unchanged"]
    assert "kept your title 'Rules (my title)'" in step["note"] and "'Rules v2'" in step["note"], step
    after = read_note(store, note.path)
    assert after.title == "Rules (my title)" and "Be on time." in after.body
    human = run_cli("import", "markdown", str(vault), "--print")
    assert human.returncode == 0
