"""Every writer as careful as sync: a wrong branch, a hand-started rebase, a full disk, bad input.

Real git, real `anamnesis` processes, a real MCP client, the real dashboard
over HTTP, the real hook process, and a real tmpfs filled to the brim.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import ROOT, RunCli, cli_env
from transcripts import typical

from anamnesis.base.paths import Store, open_store

BRANCH_WORDS = "checked out, but notes live on branch main"
REBASE_WORDS = "in the middle of a rebase started outside anamnesis"


def git(repo: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=check,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"},
    )
    return proc.stdout.strip()


def init(run_cli: RunCli, home: Path | None = None) -> None:
    result = run_cli("init", "--local-only", home_dir=home) if home else run_cli("init", "--local-only")
    assert result.returncode == 0, result.stderr


def new(run_cli: RunCli, title: str, body: str, **kw: Any) -> dict[str, Any]:
    result = run_cli("new", title, "-G", "--body", body, "--json", **kw)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def editor(tmp_path: Path, code: str, name: str = "ed.py") -> dict[str, str]:
    """$EDITOR running `code` with `path` the file to edit; it also leaves a mark that it ran."""
    script = tmp_path / name
    mark = tmp_path / f"{name}.ran"
    script.write_text(
        f"import sys, pathlib\npathlib.Path({str(mark)!r}).write_text('ran')\npath = pathlib.Path(sys.argv[1])\n"
        + code
    )
    return {"EDITOR": f"{sys.executable} {script}"}


def ran(tmp_path: Path, name: str = "ed.py") -> bool:
    return (tmp_path / f"{name}.ran").exists()


def snapshot(memory: Path) -> tuple[str, str, str, list[str]]:
    """What must not move when a write is refused: branch, HEAD, working tree, files."""
    files = sorted(str(p.relative_to(memory)) for p in memory.rglob("*.md"))
    return (
        git(memory, "symbolic-ref", "-q", "HEAD", check=False),
        git(memory, "rev-parse", "HEAD"),
        git(memory, "status", "--porcelain"),
        files,
    )


# -- a wrong branch, a hand-started rebase --------------------------------------------


def test_cli_writers_refuse_on_another_branch_with_syncs_message(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    init(run_cli)
    kept = new(run_cli, "Kept on main", "alpha words")
    other = new(run_cli, "Another note", "beta words")
    memory = home / "memory"
    git(memory, "checkout", "-q", "-b", "experiment")
    before = snapshot(memory)
    sync = run_cli("sync")
    assert sync.returncode == 12 and BRANCH_WORDS in sync.stderr, sync.stderr
    append = editor(tmp_path, "path.write_text(path.read_text() + 'more words\\n')\n")
    for args in (
        ("new", "Written on the wrong branch", "-G", "--body", "gamma"),
        ("new", "Typed in the editor", "-G"),
        ("edit", kept["id"]),
        ("edit", kept["id"], "--supersedes", other["id"]),
        ("rm", kept["id"], "-y"),
    ):
        result = run_cli(*args, env=append)
        assert result.returncode == 12, (args, result.stderr)
        assert result.stderr == sync.stderr, args  # the same one line as sync's refusal
    assert not ran(tmp_path), "the editor must not open for a write that cannot be saved"
    assert snapshot(memory) == before
    git(memory, "checkout", "-q", "main")
    made = new(run_cli, "Written back on main", "delta")
    assert (memory / made["path"]).exists() and (memory / kept["path"]).exists()
    assert git(memory, "status", "--porcelain") == ""
    doctor = json.loads(run_cli("doctor", "--json").stdout)  # the refused sync is still the last one
    assert [f["problem"][:13] for f in doctor["findings"]] == ["the last sync"]
    assert run_cli("sync").returncode == 0 and run_cli("doctor").returncode == 0


def _start_rebase_by_hand(memory: Path) -> None:
    """`git rebase -i` stopped at an `edit` step: a rebase in progress on a detached HEAD."""
    proc = subprocess.run(
        ["git", "-C", str(memory), "-c", "sequence.editor=sed -i 1s/^pick/edit/", "rebase", "-i", "HEAD~1"],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert (memory / ".git" / "rebase-merge").is_dir()


def test_cli_writers_refuse_in_the_middle_of_a_hand_started_rebase(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    init(run_cli)
    kept = new(run_cli, "Before the rebase", "alpha words")
    memory = home / "memory"
    _start_rebase_by_hand(memory)
    before = snapshot(memory)
    sync = run_cli("sync")
    assert sync.returncode == 12 and REBASE_WORDS in sync.stderr and "rebase --abort" in sync.stderr
    append = editor(tmp_path, "path.write_text(path.read_text() + 'more\\n')\n")
    for args in (
        ("new", "During the rebase", "-G", "--body", "gamma"),
        ("edit", kept["id"]),
        ("rm", kept["id"], "-y"),
    ):
        result = run_cli(*args, env=append)
        assert result.returncode == 12, (args, result.stderr)
        assert result.stderr == sync.stderr, args
    assert not ran(tmp_path)
    assert snapshot(memory) == before
    git(memory, "rebase", "--abort")
    assert new(run_cli, "After the rebase", "delta")["path"]
    assert json.loads(run_cli("search", "alpha", "--json").stdout)[0]["id"] == kept["id"]


def test_resolve_refuses_on_another_branch(run_cli: RunCli, home: Path) -> None:
    """`resolve` writes and commits a note: it is refused like every other writer."""
    init(run_cli)
    made = new(run_cli, "Conflicted", "start")
    memory = home / "memory"
    path = memory / made["path"]
    text = path.read_text()
    path.write_text(text + "<<<<<<< desktop-1\nport 5432\n=======\nport 6432\n>>>>>>> laptop-2\n")
    git(memory, "commit", "-q", "-am", "laptop-2: sync: conflict")
    git(memory, "checkout", "-q", "--detach")
    before = snapshot(memory)
    result = run_cli("resolve", made["id"], "--both")
    assert result.returncode == 12, result.stderr
    assert "a detached HEAD checked out" in result.stderr
    assert snapshot(memory) == before


def _mcp(store: Store, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "anamnesis", "mcp"], env=cli_env(store.home), cwd=str(ROOT)
    )
    results: list[Any] = []

    async def main() -> None:
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                for name, args in calls:
                    results.append(await session.call_tool(name, args))

    asyncio.run(asyncio.wait_for(main(), timeout=120))
    return results


def test_mcp_and_dashboard_writes_refuse_on_another_branch(store: Store) -> None:
    from web_support import dashboard

    from anamnesis.store.operations import create_note
    from anamnesis.store.recovery import wedged
    from anamnesis.web.security import csrf_for

    note = create_note(store, type="semantic", title="Served note", body="served words\n")
    git(store.memory, "checkout", "-q", "-b", "experiment")
    reason = wedged(store)
    assert reason is not None
    before = snapshot(store.memory)
    results = _mcp(
        store,
        [
            ("write", {"title": "From an agent", "body": "agent words", "global_note": True}),
            ("update", {"ref": note.id, "body": "changed by an agent"}),
            ("delete", {"ref": note.id}),
        ],
    )
    assert len(results) == 3
    for result in results:
        assert result.is_error and result.content[0].text.endswith(": " + reason)
    assert snapshot(store.memory) == before
    with dashboard(store.home) as running:
        client = httpx.Client(
            base_url=running.base, cookies={f"anamnesis_{running.port}": running.token}, timeout=30
        )
        with client:
            csrf = csrf_for(running.token)
            created = client.post(
                "/new", data={"title": "From the web", "type": "semantic", "body": "web words", "_csrf": csrf}
            )
            assert created.status_code == 409 and "notes live on branch main" in created.text
            page = client.get("/edit/" + note.path).text
            base = page.split('name="base" value="', 1)[1].split('"', 1)[0]
            edited = client.post(
                "/edit/" + note.path,
                data={
                    "title": "Served note",
                    "type": "semantic",
                    "tags": "",
                    "body": "web edit",
                    "base": base,
                    "_csrf": csrf,
                },
            )
            assert edited.status_code == 409 and "notes live on branch main" in edited.text
    assert snapshot(store.memory) == before


def _hook(home: Path, event: str, payload: dict[str, Any]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "anamnesis.hooks", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=cli_env(home),
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr


def test_capture_is_queued_while_the_repo_is_wedged_and_written_after(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    from anamnesis.agents.capture import queued_notes, session_note_id

    memory = store.memory
    git(memory, "checkout", "-q", "-b", "experiment")
    before = snapshot(memory)
    transcript = typical("queued-1", cwd=str(tmp_path)).write(tmp_path / "one.jsonl")
    payload = {"session_id": "queued-1", "transcript_path": str(transcript), "cwd": str(tmp_path)}
    _hook(store.home, "session-end", payload)
    assert snapshot(memory) == before  # nothing written or committed on the wrong branch
    assert len(queued_notes(store)) == 1
    log = (store.log_dir / "hooks.log").read_text()
    assert "queued" in log and BRANCH_WORDS in log
    by_hand = run_cli("capture", str(transcript))
    assert by_hand.returncode == 12 and BRANCH_WORDS in by_hand.stderr
    doctor = json.loads(run_cli("doctor", "--json").stdout)
    assert any("waiting to be written" in f["problem"] for f in doctor["findings"])
    git(memory, "checkout", "-q", "main")
    other = typical("queued-2", cwd=str(tmp_path)).write(tmp_path / "two.jsonl")
    _hook(store.home, "session-end", {**payload, "session_id": "queued-2", "transcript_path": str(other)})
    assert queued_notes(store) == []
    tracked = git(memory, "ls-files")
    for session in ("queued-1", "queued-2"):
        assert f"-{session_note_id(session)}.md" in tracked, session
    assert git(memory, "status", "--porcelain") == ""
    found = json.loads(run_cli("search", "connection pool timeout", "--json").stdout)
    assert {session_note_id("queued-1"), session_note_id("queued-2")} <= {f["id"] for f in found}


# -- bad input --------------------------------------------------------------------------


def test_an_edit_that_empties_the_note_is_refused_like_new(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    init(run_cli)
    made = new(run_cli, "Keep my words", "precious words")
    memory = home / "memory"
    original = (memory / made["path"]).read_bytes()
    head = git(memory, "rev-parse", "HEAD")
    emptied = run_cli("edit", made["id"], env=editor(tmp_path, "path.write_text('')\n"))
    assert emptied.returncode == 2, emptied.stderr
    assert "empty" in emptied.stderr and "nothing was written" in emptied.stderr
    assert emptied.stderr.count("\n") == 1
    assert (memory / made["path"]).read_bytes() == original
    # The body removed, the front matter kept: refused too, and what was typed is kept.
    cut = "text = path.read_text(); path.write_text(text[: text.index('---', 4) + 4])\n"
    headless = run_cli("edit", made["id"], env=editor(tmp_path, cut, "cut.py"))
    assert headless.returncode == 2, headless.stderr
    kept_at = headless.stderr.rsplit("your text is kept in ", 1)[1].strip()
    assert Path(kept_at).read_text().startswith("---\nid: " + made["id"])
    assert (memory / made["path"]).read_bytes() == original
    assert git(memory, "rev-parse", "HEAD") == head and git(memory, "status", "--porcelain") == ""
    assert json.loads(run_cli("search", "precious", "--json").stdout)[0]["id"] == made["id"]


def test_an_edit_is_not_saved_over_a_change_made_meanwhile(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    init(run_cli)
    made = new(run_cli, "Shared note", "first version")
    note = home / "memory" / made["path"]
    # While the editor is open, a sync brings another machine's version of the note.
    code = (
        f"real = pathlib.Path({str(note)!r})\n"
        "real.write_text(real.read_text().replace('first version', 'from the other machine'))\n"
        "path.write_text(path.read_text().replace('first version', 'typed here'))\n"
    )
    result = run_cli("edit", made["id"], env=editor(tmp_path, code))
    assert result.returncode == 1 and "changed on disk while you were editing it" in result.stderr
    assert "from the other machine" in note.read_text()
    kept = Path(result.stderr.rsplit("your text is kept in ", 1)[1].strip())
    assert "typed here" in kept.read_text()


def test_a_broken_settings_file_stops_every_writer(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    init(run_cli)
    made = new(run_cli, "Written before", "words")
    memory = home / "memory"
    settings = home / "settings.json"
    settings.write_text('{"machine_id": "desk-1234", "peers": {')  # cut short by a crash or a bad edit
    before = snapshot(memory)
    for args in (
        ("new", "Needs a machine", "-G", "--body", "words"),
        ("edit", made["id"]),
        ("rm", made["id"], "-y"),
    ):
        result = run_cli(*args, env=editor(tmp_path, "path.write_text(path.read_text() + 'x\\n')\n"))
        assert result.returncode == 1, (args, result.stderr)
        assert result.stderr.startswith("anamnesis: error:") and result.stderr.count("\n") == 1
        assert str(settings) in result.stderr and "nothing was changed" in result.stderr and result.stderr.count("fix it by hand") == 1
    assert not ran(tmp_path)
    assert snapshot(memory) == before
    assert "unknown" not in git(memory, "log", "--format=%s")


# -- a full disk ------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 3 MB tmpfs (root only), unmounted afterwards whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path, leave: int) -> None:
    """Fill `disk` until only `leave` bytes are free."""
    filler = disk / "filler"
    filler.unlink(missing_ok=True)
    st = os.statvfs(disk)
    room = st.f_bavail * st.f_frsize - leave
    with open(filler, "wb") as handle:
        try:
            handle.write(b"\0" * max(room, 0))
        except OSError:
            pass


def indexed(home: Path, title: str) -> bool:
    import sqlite3

    conn = sqlite3.connect(str(home / "index.db"))
    try:
        return conn.execute("SELECT count(*) FROM notes WHERE title = ?", (title,)).fetchone()[0] > 0
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def test_new_on_a_full_disk_writes_all_or_nothing(small_disk: Path, run_cli: RunCli) -> None:
    """Free space swept from none to plenty: every attempt is whole (exit 0) or absent (exit 8)."""
    import base64

    home = small_disk / "home"
    init(run_cli, home)
    memory = home / "memory"
    body = base64.b64encode(os.urandom(15000)).decode()  # does not compress: git needs room too
    stages: set[str] = set()
    written: list[str] = []
    for step, leave in enumerate([*range(0, 256 * 1024, 4 * 1024), *range(256 * 1024, 640 * 1024, 32 * 1024)]):
        title = f"Attempt {step}"
        head = git(memory, "rev-parse", "HEAD")
        fill(small_disk, leave)
        result = run_cli("new", title, "-G", "--body", body, home_dir=home)
        (small_disk / "filler").unlink()
        files = [p for p in memory.rglob("*.md") if p.name.startswith(f"attempt-{step}-")]
        assert "Traceback" not in result.stderr and "cannot rollback" not in result.stderr, result.stderr
        if result.returncode == 0:
            assert len(files) == 1 and git(memory, "status", "--porcelain") == ""
            assert str(files[0].relative_to(memory)) in git(memory, "ls-files")
            assert indexed(home, title)
            written.append(title)
            continue
        assert result.returncode == 8, (leave, result.stderr)
        assert result.stderr.startswith("anamnesis: error: no space left on the disk of")
        assert result.stderr.count("\n") == 1
        assert "nothing was written" in result.stderr or "nothing was changed" in result.stderr
        stages.add(result.stderr.split("free (", 1)[1].split(":", 1)[0])
        assert files == [], (leave, result.stderr)
        assert git(memory, "rev-parse", "HEAD") == head
        assert git(memory, "status", "--porcelain") == "", (leave, result.stderr)
        if "may show the change until its next refresh" not in result.stderr:
            assert not indexed(home, title), result.stderr
        assert not list(memory.rglob(".*.tmp"))
    assert written, "with room to spare, the note must be written"
    # the sweep must reach past the file write (where each stage fails depends on the file system's
    # block use, so which later stage it catches is not fixed)
    assert "writing the note" in stages and len(stages) >= 2, stages
    # A retrying script, once the person has made room (the notes written above can fill the 3 MB disk,
    # and then git itself cannot write its index): the failures left nothing for sync to commit, so
    # nothing is duplicated.
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    synced = run_cli("sync", home_dir=home)
    assert synced.returncode == 0, synced.stderr
    listed = json.loads(run_cli("list", "--json", "-n", "500", home_dir=home).stdout)
    assert sorted(n["title"] for n in listed) == sorted(written)  # a stale index row is gone too
    assert len(git(memory, "log", "--format=%s").splitlines()) == 1 + len(written)
    assert run_cli("doctor", home_dir=home).returncode == 0


def test_rm_and_edit_on_a_full_disk_keep_the_note(small_disk: Path, run_cli: RunCli, tmp_path: Path) -> None:
    import sqlite3

    from anamnesis.store.operations import create_note

    home = small_disk / "home"
    init(run_cli, home)
    memory = home / "memory"
    leaves = [*range(0, 96 * 1024, 8 * 1024), 1 << 20]
    made = [
        create_note(open_store(home), type="semantic", title=f"Note {n}", body=f"words of note {n}\n")
        for n in range(2 * len(leaves))
    ]
    append = editor(tmp_path, "path.write_text(path.read_text() + 'an added line\\n')\n")
    outcomes: dict[int, set[str]] = {0: set(), 8: set()}
    stages: set[str] = set()
    # The index stays open meanwhile, as the dashboard or the MCP server keep it: reading it then
    # needs no new room, so the sweep reaches the later steps of a write.
    reader = sqlite3.connect(str(home / "index.db"))
    try:
        assert reader.execute("SELECT count(*) FROM notes").fetchone()[0] == len(made)
        for step, leave in enumerate(leave for leave in leaves for _twice in (1, 2)):
            target = made[step]
            original = (memory / target.path).read_bytes()
            head = git(memory, "rev-parse", "HEAD")
            fill(small_disk, leave)
            command = ("rm", target.id, "-y") if step % 2 else ("edit", target.id)
            result = run_cli(*command, home_dir=home, env=append)
            (small_disk / "filler").unlink()
            assert "Traceback" not in result.stderr
            assert result.returncode in (0, 8), (command, leave, result.stderr)
            outcomes[result.returncode].add(command[0])
            assert git(memory, "status", "--porcelain") == ""
            if result.returncode == 8:
                assert result.stderr.count("\n") == 1 and "free some space" in result.stderr
                stages.add(result.stderr.split("free (", 1)[-1].split(":", 1)[0])
                assert git(memory, "rev-parse", "HEAD") == head
                assert (memory / target.path).read_bytes() == original
                if "your text is kept in " in result.stderr:
                    kept = Path(result.stderr.rsplit("your text is kept in ", 1)[1].strip())
                    assert kept.read_text().endswith("an added line\n")
            elif command[0] == "rm":
                assert not (memory / target.path).exists()
            else:
                assert (memory / target.path).read_text().endswith("an added line\n")
    finally:
        reader.close()
    assert outcomes[8] == {"rm", "edit"} and outcomes[0] == {"rm", "edit"}, outcomes
    assert "committing to git" in stages, stages
    assert not list(memory.rglob(".*.tmp"))
    run_cli("list", home_dir=home)  # a refresh, as any search or list does
    assert run_cli("doctor", home_dir=home).returncode == 0


def test_sync_writes_the_session_notes_queued_while_the_repo_was_wedged(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    from anamnesis.agents.capture import queued_notes, session_note_id

    git(store.memory, "checkout", "-q", "-b", "experiment")
    transcript = typical("queued-3", cwd=str(tmp_path)).write(tmp_path / "three.jsonl")
    _hook(
        store.home,
        "session-end",
        {"session_id": "queued-3", "transcript_path": str(transcript), "cwd": str(tmp_path)},
    )
    assert len(queued_notes(store)) == 1
    git(store.memory, "checkout", "-q", "main")
    assert run_cli("sync").returncode == 0
    assert queued_notes(store) == [] and f"-{session_note_id('queued-3')}.md" in git(store.memory, "ls-files")
