"""A conflict is announced on every machine whose sync brings it in, and a note resolved half way
is never committed nor sent: real git, several machines (ANAMNESIS_HOME folders) in the README's
setup (the first machine a plain store the others push into) or around a bare hub.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fleet import Fleet, Machine, fleet  # noqa: F401
from procs import run_anamnesis

from anamnesis.base.errors import UsageError
from anamnesis.base.notes import has_conflict_markers
from anamnesis.store import recovery
from anamnesis.store.operations import create_note, update_note
from anamnesis.sync.engine import join
from anamnesis.sync.schedule import command
from anamnesis.sync.synclog import describe_sync, recent

ROOT_NOTE = "top\none\ntwo\nmiddle\nthree\nbottom\n"  # room between the lines edited


def readme_fleet(fleet: Fleet) -> tuple[Machine, Machine, Machine]:
    """desktop (no peer), laptop and server with desktop as their peer, as `init --peer` makes them."""
    desktop = fleet.machine("desktop")
    laptop = fleet.machine("laptop", {"desktop": fleet.url(desktop)})
    server = fleet.machine("server", {"desktop": fleet.url(desktop)})
    return desktop, laptop, server


def three_versions(fleet: Fleet) -> tuple[Machine, Machine, Machine, str, str]:
    """The issue's case: one line edited on all three; desktop's sync records a three-version block."""
    desktop, laptop, server = readme_fleet(fleet)
    note = create_note(desktop.store, type="semantic", title="Shared", body=ROOT_NOTE)
    for m in (laptop, server, desktop):
        m.sync()
    for m in (desktop, laptop, server):
        update_note(m.store, note.id, body=ROOT_NOTE.replace("middle", f"middle from {m.name}"))
    assert laptop.sync().exit_code == 10  # each records a two-version block...
    assert server.sync().exit_code == 10
    recorded = desktop.cli("sync")  # ...and desktop, integrating both, the three-version one
    assert recorded.returncode == 10, recorded.stdout + recorded.stderr
    assert f"conflict in {note.path} (Shared) — all 3 versions kept: desktop, laptop, server" in recorded.stdout
    assert "recorded here" in recorded.stdout and "both versions kept" not in recorded.stdout
    return desktop, laptop, server, note.id, note.path


def test_every_machine_whose_sync_brings_in_a_conflict_says_so(fleet: Fleet) -> None:
    desktop, laptop, server, _note_id, path = three_versions(fleet)
    # laptop, in JSON: the note, its versions, and that it came in rather than being recorded here.
    proc = laptop.cli("sync", "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 10 and data["exit_code"] == 10, proc.stdout
    assert data["outcome"] == "conflict received" and data["conflicts"] == [path]
    [found] = data["conflict_notes"]
    assert (found["path"], found["title"], found["versions"]) == (path, "Shared", 3)
    assert found["machines"] == ["desktop", "laptop", "server"] and found["recorded_here"] is False
    assert recent(laptop.store)[-1]["conflicts"] == [path]  # the sync log, and `status` from it
    assert "1 note in conflict" in describe_sync(recent(laptop.store)[-1])
    # A machine joining now (`init --peer`) is told too.
    joined = fleet.machine("tablet")
    assert join(joined.store, fleet.url(desktop), "desktop").conflicts == [path]
    phone = Machine("phone", fleet.root / "phone")  # and `init --peer` names the note and what to do
    init = phone.cli("init", "--peer", fleet.url(desktop), "--no-schedule", "--no-claude", "--no-semantic")
    assert f"1 note in conflict ({path}): see `anamnesis conflicts`" in " ".join(init.stdout.split()), init.stdout
    # server, as its timer runs it: the journal gets the line, and the exit code is 10.
    timer = subprocess.run(command(), env=server.env(), capture_output=True, text=True, timeout=120)
    assert timer.returncode == 10, timer.stdout + timer.stderr
    assert f"conflict in {path} (Shared) — all 3 versions kept: desktop, laptop, server (brought in)" in timer.stdout
    assert recent(server.store)[-1]["conflicts"] == [path]
    assert recent(server.store)[-1]["outcome"] == "conflict received"
    # Said once, by the sync that brought it in: the next ones have nothing new to say.
    for m in (desktop, laptop, server):
        again = m.cli("sync", "--json")
        assert again.returncode == 0 and json.loads(again.stdout)["conflicts"] == [], again.stdout
        assert json.loads(again.stdout)["unresolved"] == [path]  # still there, not news
        assert recent(m.store)[-1]["conflicts"] == []
    plain = desktop.cli("sync")  # a reminder, not a failure: exit 0
    assert plain.returncode == 0 and f"still in conflict: 1 note from before ({path})" in " ".join(plain.stdout.split())
    assert not plain.stdout.lstrip().startswith("✔"), plain.stdout  # no all-clear while a note is in conflict
    assert "still in conflict" not in desktop.cli("sync", "--quiet").stdout  # the timer is told only news


def test_a_hub_fleet_announces_it_on_the_machines_that_only_receive_it(fleet: Fleet) -> None:
    hub = fleet.hub()
    a, b, c = (fleet.machine(n, {"hub": fleet.url(hub)}) for n in ("a", "b", "c"))
    note = create_note(a.store, type="semantic", title="Hubbed", body=ROOT_NOTE)
    for m in (a, b, c):
        m.sync()
    update_note(a.store, note.id, body=ROOT_NOTE.replace("middle", "middle from a"))
    update_note(b.store, note.id, body=ROOT_NOTE.replace("middle", "middle from b"))
    assert a.sync().exit_code == 0
    recorded = b.sync()
    assert recorded.exit_code == 10 and recorded.outcome == "conflict recorded" and recorded.recorded == [note.path]
    for m in (a, c):  # both only receive it
        result = m.sync()
        assert result.exit_code == 10 and result.conflicts == [note.path] and result.outcome == "conflict received"
        assert result.conflict_notes[0].kept == "both versions kept"
    # Resolved on c: the resolution brings no conflict anywhere.
    assert c.cli("resolve", note.id, "--keep", "a").returncode == 0
    for m in (c, a, b):
        assert m.sync().exit_code == 0


def test_a_note_resolved_half_way_is_held_back_until_it_is_whole(fleet: Fleet) -> None:
    desktop, laptop, server, _note_id, path = three_versions(fleet)
    for m in (laptop, server):
        m.sync()
    blocked = server.read(path)
    # Every version but the closing `>>>>>>> server` line removed by hand, as in the issue.
    half = blocked.replace(
        "<<<<<<< desktop\nmiddle from desktop\n======= laptop\nmiddle from laptop\n=======\n", ""
    )
    assert half.count(">>>>>>> server\n") == 1 and "<<<<<<<" not in half
    server.write(path, half)
    line = half.splitlines().index(">>>>>>> server") + 1
    other = create_note(server.store, type="semantic", title="Other", body="unrelated\n", commit=False)
    head = server.git("rev-parse", "HEAD")
    proc = server.cli("sync")
    assert proc.returncode == 10, proc.stdout + proc.stderr
    assert f"held back: {path} — conflict marker outside a complete block at line {line} `>>>>>>> server`" in proc.stdout
    assert server.read(path) == half  # the person's edit stays, uncommitted
    assert server.git("status", "--porcelain", "--", path) == f"M {path}"
    assert server.git("show", f"HEAD:{path}") == blocked.rstrip("\n")
    assert server.git("rev-list", "--count", f"{head}..HEAD") == "1"  # the other note was committed
    log = recent(server.store)[-1]
    assert log["held_back"] == [path] and log["exit_code"] == 10 and log["outcome"] == "note held back"
    data = json.loads(server.cli("sync", "--json").stdout)
    assert data["held_back"] == [{"path": path, "title": "Shared", "lines": [{"line": line, "text": ">>>>>>> server"}]}]
    # Nothing of it left the machine; every other note kept syncing.
    for m in (desktop, laptop):
        m.sync()
        assert m.read(path) == blocked and m.read(other.path).endswith("unrelated\n")
    # Meanwhile laptop changes another line of the note: it comes in under the held edit.
    laptop.write(path, laptop.read(path).replace("\ntop\n", "\ntop (laptop)\n", 1))
    laptop.sync()
    desktop.sync()
    assert server.sync().exit_code == 10
    now = server.read(path)
    assert "top (laptop)\n" in now and ">>>>>>> server\n" in now and "middle from laptop" not in now
    assert server.git("status", "--porcelain", "--", path) == f"M {path}"
    # Finished: committed and sent like any edit.
    server.write(path, now.replace(">>>>>>> server\n", ""))
    result = server.sync()
    assert result.exit_code == 0 and result.held_back == [], result
    for m in (desktop, laptop):
        m.sync()
        final = m.read(path)
        assert not has_conflict_markers(final) and "top (laptop)\none\ntwo\nmiddle from server\nthree\n" in final


def test_whole_blocks_sync_and_a_note_that_quotes_markers_is_not_held(fleet: Fleet) -> None:
    """'Whole' means every marker line belongs to a complete block: a person who drops one version
    of three sends the two-version block like any edit (a note already in conflict: not news)."""
    desktop, laptop, _server, _note_id, path = three_versions(fleet)
    laptop.sync()
    text = laptop.read(path)
    laptop.write(path, text.replace("======= laptop\nmiddle from laptop\n", ""))
    result = laptop.sync()
    assert result.exit_code == 0 and result.held_back == [] and result.conflicts == []
    assert desktop.sync().conflicts == [] and desktop.read(path) == laptop.read(path)
    [listed] = json.loads(desktop.cli("conflicts", "--json").stdout)
    assert listed["machines"] == ["desktop", "server"] and listed["versions"] == 2
    # A note about git that quotes conflict markers, committed so, keeps syncing when edited, and
    # no sync announces it as a conflict (no merge recorded one): only `conflicts` lists it.
    quoting = create_note(
        laptop.store, type="semantic", title="Git markers", body="A rebase stops at:\n\n>>>>>>> theirs\n"
    )
    laptop.write(quoting.path, laptop.read(quoting.path) + "\nand more text\n")
    result = laptop.sync()
    assert result.held_back == [] and result.conflicts == [] and laptop.git("status", "--porcelain") == ""
    result = desktop.sync()
    assert result.exit_code == 0 and result.conflicts == []
    assert desktop.read(quoting.path).endswith("and more text\n")
    assert quoting.path in desktop.cli("conflicts").stdout


def test_a_sync_killed_with_an_edit_set_aside_loses_nothing(fleet: Fleet) -> None:
    from anamnesis.sync.engine import HELD_MARKER, set_aside  # here: the other tests run on code without them
    _desktop, _laptop, server, _note_id, path = three_versions(fleet)
    server.sync()
    half = server.read(path).replace("<<<<<<< desktop\n", "")
    server.write(path, half)
    head = server.git("rev-parse", "HEAD")
    set_aside(server.store, head, [path])  # what a sync does before moving the files; then it is killed
    assert server.read(path) != half and recovery.read_marker(server.store, HELD_MARKER)
    result = server.sync()  # the next sync puts the edit back first, then holds it back
    assert server.read(path) == half and [h.path for h in result.held_back] == [path]
    assert recovery.read_marker(server.store, HELD_MARKER) is None


def test_history_shows_the_merge_that_brought_the_block_and_each_version_a_resolution_replaced(
    fleet: Fleet,
) -> None:
    import httpx
    from web_support import dashboard

    from anamnesis.store import history

    _desktop, laptop, _server, note_id, path = three_versions(fleet)
    laptop.sync()
    assert laptop.cli("resolve", note_id, "--keep", "desktop").returncode == 0
    versions = history.note_history(laptop.store, path)
    # The merge commit where the three-version block came in is a version of the note.
    [merge] = [v for v in versions if v.message.startswith("desktop: sync: merge")]
    assert history.version_text(laptop.store, merge).count("middle from ") == 3
    changes = [history.describe_change(laptop.store, v, "Shared") for v in versions]
    assert changes[versions.index(merge)].title.endswith("conflict, all 3 versions kept: desktop, laptop, server")
    # The resolution: a real title, and a diff against every version it replaced.
    resolution = changes[0]
    assert resolution.title == "resolve conflict in “Shared”"
    assert [who for who, _diff in resolution.replaced] == ["desktop", "laptop", "server"]
    replaced = dict(resolution.replaced)
    changed = [line for line in replaced["desktop"] if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    # the version kept: nothing but the resolution's stamp (when and where) may differ; within the
    # second of the merge that brought the block in, the stamp is the merge's own and nothing does
    assert all(line[1:].startswith(("updated:", "machine:")) for line in changed), changed
    for dropped in ("laptop", "server"):
        assert f"-middle from {dropped}" in replaced[dropped] and "+middle from desktop" in replaced[dropped]
    assert "-middle from server" in resolution.diff  # its parent is the merge, not laptop's own edit
    # Each version is diffed against its own parent, not another machine's edit made beside it.
    mine = next(c for c in changes if c.version.message.startswith("laptop: update"))
    assert not any("middle from server" in line for line in mine.diff)
    with dashboard(laptop.home) as running, httpx.Client(
        base_url=running.base, cookies={f"anamnesis_{running.port}": running.token}, timeout=30
    ) as http:
        page = http.get("/history/" + path).text
    assert "resolve conflict in “Shared”" in page and "Against server’s version" in page
    assert "sync: merge incoming/server — conflict, all 3 versions kept: desktop, laptop, server" in page
    assert "-middle from server" in page


def test_commit_messages_name_the_notes_they_recorded_conflicts_in() -> None:
    from anamnesis.sync.treemerge import recorded_in, with_conflicts

    message = with_conflicts("m1: sync: merge hub", ["a.md", "dir/b c.md"])
    assert recorded_in(message) == ["a.md", "dir/b c.md"]
    older = "m1: update x.md\n\nConflicts (both sides kept, with markers):\n\tx.md\n\nrepaired: y\n"
    assert recorded_in(older) == ["x.md"] and recorded_in("m1: sync: 2 notes changed\n") == []


def test_an_editor_or_an_agent_cannot_save_a_note_resolved_half_way(fleet: Fleet, tmp_path: Path) -> None:
    """`anamnesis edit`, the dashboard's editor and the MCP `update` save through the store, which
    refuses what sync would hold back; the person's text is kept, the note is unchanged."""
    _desktop, laptop, _server, note_id, path = three_versions(fleet)
    laptop.sync()
    text = laptop.read(path)
    editor = tmp_path / "half-resolve"
    editor.write_text("#!/bin/sh\nsed -i '/^<<<<<<< desktop$/d' \"$1\"\n")
    editor.chmod(0o755)
    proc = run_anamnesis(("edit", note_id), laptop.env(EDITOR=str(editor), VISUAL=str(editor)), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "conflict marker outside a complete block" in proc.stderr and "your text is kept in" in proc.stderr
    assert laptop.read(path) == text and laptop.git("status", "--porcelain") == ""
    with pytest.raises(UsageError, match="half done"):
        update_note(laptop.store, note_id, body=text.split("---\n", 2)[2].replace(">>>>>>> server\n", ""))
    assert laptop.read(path) == text
    # Settled (or with the block kept whole) it saves as ever.
    update_note(laptop.store, note_id, body=ROOT_NOTE.replace("middle", "middle, settled"))
    assert not has_conflict_markers(laptop.read(path))


def test_a_note_made_the_committed_version_again_by_hand_is_no_longer_called_in_conflict(fleet: Fleet) -> None:
    # A half-resolved note held back on server, resolved whole on laptop meanwhile: server's sync
    # lays the held edit over laptop's resolution. The person then makes the note exactly what
    # laptop committed, so there is nothing to commit: the index row, last written from the
    # layered file, kept calling it in conflict ("still in conflict" on every sync).
    desktop, laptop, server, _note_id, path = three_versions(fleet)
    for m in (laptop, server):
        m.sync()
    half = server.read(path).replace(
        "<<<<<<< desktop\nmiddle from desktop\n======= laptop\nmiddle from laptop\n=======\n", ""
    )
    server.write(path, half)
    assert server.sync().exit_code == 10  # held back
    assert laptop.cli("resolve", path, "--keep", "laptop").returncode == 0
    for m in (laptop, desktop):
        m.sync()
    laid = server.sync()
    # the held edit, laid over the resolution: a block of the two, each named for whose it is, and
    # the person's leftover marker line after it (inside, it closed the block and named the wrong machine)
    layered = server.read(path)
    assert (
        "<<<<<<< incoming\nmiddle from laptop\n=======\nmiddle from server\n>>>>>>> server (not committed)\n"
        ">>>>>>> server\nthree\n"
    ) in layered, layered
    listed = json.loads(server.cli("conflicts", "--json").stdout)
    assert [n["blocks"] for n in listed if n["path"] == path] == [[["incoming", "server (not committed)"]]], listed
    where = f"line {layered.splitlines().index('>>>>>>> server') + 1} `>>>>>>> server`"
    assert laid.exit_code == 10 and [h.where for h in laid.held_back] == [where], laid.held_back  # where it is now
    assert [h.where for h in server.sync().held_back] == [where]
    committed = subprocess.run(
        ["git", "-C", str(server.memory), "show", f"HEAD:{path}"], capture_output=True, check=True
    ).stdout
    (server.memory / path).write_bytes(committed)
    result = server.sync()
    assert result.exit_code == 0 and result.unresolved == [] and result.held_back == [], result.to_dict()
    assert "still in conflict" not in server.cli("sync").stdout


def test_a_conflict_in_an_archived_note_is_resolved_by_its_id(fleet: Fleet) -> None:
    """Tidy archived the session on one machine while another added a line: the conflict lands
    under .archive/, where the index does not look; `conflicts` lists it and `resolve ID` finds it."""
    a = fleet.machine("a")
    archived = a.store.memory / ".archive" / "projects" / "p" / "sessions" / "why-exports-time-out-k3v9x2m7qa.md"
    archived.parent.mkdir(parents=True)
    archived.write_text(
        "---\nid: k3v9x2m7qa\ntype: episodic\ntitle: why exports time out\n---\n"
        "<<<<<<< vm-aaaa\nThe cursor fix worked.\n=======\nThe cursor fix worked; added a retry.\n>>>>>>> vm-bbbb\n"
    )
    a.git("add", "-A")
    a.git("commit", "-qm", "test: a conflict under the archive")
    listed = a.cli("conflicts", "--json")
    assert "k3v9x2m7qa" in listed.stdout, listed.stdout
    resolved = a.cli("resolve", "k3v9x2m7qa", "--keep", "vm-bbbb")
    assert resolved.returncode == 0, resolved.stderr
    assert not has_conflict_markers(archived.read_text()) and "added a retry" in archived.read_text()
