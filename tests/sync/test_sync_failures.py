"""Failures told apart: a peer that is off (11), a peer set up so that it never works (14), and a
fault of this machine (8 disk full, 9 a store it cannot write), which no peer is blamed for.

Real git, real file systems: a read-only bind mount and a small tmpfs made in a
mount namespace of the test's own (tests/mounts.py), files owned by another
user with root's powers dropped. ssh's classes are in test_ssh_errors.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fleet import ROOT, Fleet, Machine, fleet  # noqa: F401
from mounts import in_mount_namespace, read_only_bind, small_disk, without_root_powers

from anamnesis.base.errors import SYNC_EXIT_CODES, TIMER_SUCCESS, ExitCode
from anamnesis.store.operations import create_note

pytestmark = pytest.mark.timeout(180)

ANAMNESIS = [sys.executable, "-m", "anamnesis"]


def as_json(ran: Any) -> Any:
    assert ran.stdout.strip(), (ran.returncode, ran.stderr)
    return json.loads(ran.stdout)


def state_of(machine: Machine) -> dict[str, dict[str, Any]]:
    proc = machine.cli("peers", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    return {p["name"]: p for p in json.loads(proc.stdout)}


def last_log(machine: Machine) -> dict[str, Any]:
    return dict(json.loads((machine.home / "logs" / "sync.log").read_text().splitlines()[-1]))


def blames_no_peer(machine: Machine) -> None:
    """No peer is marked failing anywhere: `peers list`, `status`, the sync log."""
    for name, peer in state_of(machine).items():
        assert peer["last_error"] is None and peer["failing_since"] is None, (name, peer)
    assert last_log(machine)["unreachable"] == []
    status = json.loads(machine.cli("status", "--json").stdout)
    assert "unreachable" not in status, status
    for name in state_of(machine):
        assert f"{name}:" not in str(status.get("last_error", "")), status


def behind_a_hub(fleet: Fleet) -> Machine:
    """Machine a, whose peer `desktop` is a hub holding a note ("From b") that a has not fetched yet."""
    hub = fleet.hub()
    b = fleet.machine("b", {"hub": str(hub)})
    create_note(b.store, type="semantic", title="From b", body="x\n")
    b.sync()
    return fleet.machine("a", {"desktop": str(hub)})


# -- the registry -------------------------------------------------------------------------------


def exit_table(doc: str) -> set[int]:
    """The codes in the first column of the "Exit codes" table of a docs page."""
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    codes: set[int] = set()
    for line in text.splitlines():
        match = re.match(r"^\| ([\d, ]+) \|", line)
        if match:
            codes.update(int(c) for c in match.group(1).replace(" ", "").split(",") if c)
    return codes


def test_every_exit_code_is_unique_and_every_sync_code_is_documented() -> None:
    from anamnesis.cli.sync import SYNC_EPILOG

    values = [int(code) for code in ExitCode]
    assert len(values) == len(set(values))
    assert set(SYNC_EXIT_CODES) <= set(ExitCode) and len(set(SYNC_EXIT_CODES)) == len(SYNC_EXIT_CODES)
    missing = set(SYNC_EXIT_CODES) - exit_table("sync.md")
    assert not missing, f"docs/sync.md has no row for sync's exit codes {sorted(missing)}"
    assert not set(ExitCode) - exit_table("cli.md"), "docs/cli.md must list every exit code"
    said = {int(n) for n in re.findall(r"\b(\d+)\b", SYNC_EPILOG)}
    assert set(SYNC_EXIT_CODES) - {ExitCode.OK} <= said, "`sync --help` must say every code"


def test_the_timer_unit_counts_only_normal_outcomes_as_success(fleet: Fleet) -> None:
    from anamnesis.sync.schedule import schedule_plan as plan

    a = fleet.machine("a")
    units = plan(a.store, "5m", "systemd").files
    service = next(text for path, text in units.items() if str(path).endswith(".service"))
    (line,) = [x for x in service.splitlines() if x.startswith("SuccessExitStatus=")]
    success = {int(code) for code in line.split("=", 1)[1].split()}
    assert success == {int(c) for c in TIMER_SUCCESS} == {10, 11, 143}
    for failure in (ExitCode.PEER_MISCONFIGURED, ExitCode.STALE_PEER, ExitCode.DISK_FULL, ExitCode.LOCAL_FAULT):
        assert failure not in success


# -- local paths: typo, no repository, a disk not mounted ---------------------------------------


def test_a_mistyped_local_path_is_misconfigured_and_fails_the_timer_at_once(fleet: Fleet) -> None:
    from anamnesis.sync.peers import load_state, save_state
    from anamnesis.sync.schedule import command

    hub = fleet.hub()
    a = fleet.machine("a", {"hub": str(hub), "typo": str(hub.with_name("hbu.git"))})
    create_note(a.store, type="semantic", title="Kept", body="x\n")
    proc = a.cli("sync", "--json", real_process=True)
    assert proc.returncode == ExitCode.PEER_MISCONFIGURED, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    peers = {p["name"]: p for p in report["peers"]}
    assert peers["hub"]["status"] == "synced"  # the good peer still got everything
    assert peers["typo"]["status"] == "misconfigured"
    assert "does not exist" in peers["typo"]["hint"] and "peers add" in peers["typo"]["hint"]
    assert report["outcome"] == "a peer is misconfigured"
    text = a.cli("sync").stdout
    assert "typo: misconfigured" in text and "will retry" not in text.split("typo:")[1].split("\n")[0]
    listed = a.cli("peers", "list").stdout
    assert "misconfigured" in listed and "failing" not in listed, listed
    assert state_of(a)["typo"]["misconfigured"] is True
    # The timer's own command fails at once, not after a day.
    timer = subprocess.run(command(), capture_output=True, text=True, env=a.env(), cwd=ROOT, timeout=120)
    assert timer.returncode == ExitCode.PEER_MISCONFIGURED and timer.returncode not in TIMER_SUCCESS
    assert "typo" in timer.stdout
    # Failing for days as well: still 14 (what to fix), not 13.
    state = load_state(a.store)
    state["typo"]["failing_since"] = "2000-01-01T00:00:00Z"
    save_state(a.store, state)
    timer = subprocess.run(command(), capture_output=True, text=True, env=a.env(), cwd=ROOT, timeout=120)
    assert timer.returncode == ExitCode.PEER_MISCONFIGURED, timer.stdout
    # doctor says so at once, with the fix.
    doctor = json.loads(a.cli("doctor", "--json").stdout)["findings"]
    (finding,) = [f for f in doctor if f["where"].startswith("peer typo")]
    assert "peers add" in finding["fix"] and "peers rm typo" in finding["fix"]
    # Corrected: the state clears.
    assert a.cli("peers", "add", "typo", str(hub)).returncode == 0
    assert a.cli("sync").returncode == 0
    assert state_of(a)["typo"]["misconfigured"] is False


def test_init_joining_a_mistyped_path_exits_as_sync_would(fleet: Fleet) -> None:
    hub = fleet.hub()
    newcomer = fleet.machine("newcomer")
    proc = newcomer.cli("init", "--peer", str(hub.with_name("hbu.git")), "--no-schedule", "--no-claude")
    assert proc.returncode == ExitCode.PEER_MISCONFIGURED, proc.stdout + proc.stderr
    assert "does not exist" in proc.stderr and "the peer was not saved" in proc.stderr
    (fleet.root / "usb").mkdir()
    proc = newcomer.cli("init", "--peer", str(fleet.root / "usb" / "memory.git"), "--no-schedule", "--no-claude")
    assert proc.returncode == ExitCode.UNREACHABLE, proc.stdout + proc.stderr


def test_a_folder_that_holds_no_repository_is_misconfigured(fleet: Fleet) -> None:
    folder = fleet.root / "not-a-repo"
    folder.mkdir()
    (folder / "readme.txt").write_text("hello\n")
    a = fleet.machine("a", {"desk": str(folder)})
    result = a.sync()
    assert result.exit_code == ExitCode.PEER_MISCONFIGURED
    (desk,) = result.peers
    assert desk.status == "misconfigured" and "holds no repository" in desk.hint
    # A store's home instead of its memory/ folder: the hint names the right one.
    b = fleet.machine("b")
    added = a.cli("peers", "add", "b", str(b.home))
    assert added.returncode == ExitCode.PEER_MISCONFIGURED and f"did you mean {b.memory}?" in added.stderr, added.stderr


def test_a_hub_owned_by_another_user_is_misconfigured_with_gits_safe_directory_fix(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"shared": str(hub)})
    if os.geteuid() != 0:
        pytest.skip("giving the hub to another user needs root (CI runs this suite as root)")
    subprocess.run(["chown", "-R", "54321:54321", str(hub)], check=True)  # a hub on a disk another user owns
    result = a.sync()
    assert result.exit_code == ExitCode.PEER_MISCONFIGURED
    (shared,) = result.peers
    assert shared.status == "misconfigured" and "dubious ownership" in shared.reason, shared
    assert f"safe.directory {hub}" in shared.hint, shared


def test_a_peer_that_cannot_store_what_is_pushed_is_misconfigured_and_says_why(fleet: Fleet) -> None:
    # The peer's objects belong to another user (or its disk is full): git's porcelain says only
    # "[remote rejected] (unpacker error)", which read as an outage that waiting would fix.
    hub = fleet.hub()
    a = fleet.machine("a", {"desktop": str(hub)})
    create_note(a.store, type="semantic", title="Made on a", body="first\n")
    assert a.cli("sync").returncode == 0
    second = create_note(a.store, type="semantic", title="Second on a", body="second\n")
    undo = _owned_by_another_user(hub / "objects")
    try:
        proc = subprocess.run(
            without_root_powers([*ANAMNESIS, "sync", "--json"]), capture_output=True, text=True, env=a.env(), timeout=120
        )
    finally:
        undo()
    assert proc.returncode == ExitCode.PEER_MISCONFIGURED, (proc.returncode, proc.stdout, proc.stderr)
    (desk,) = as_json(proc)["peers"]
    assert desk["status"] == "misconfigured" and "remote unpack failed" in desk["reason"], desk
    assert "could not store what was sent" in desk["hint"] and "fix it on that machine" in desk["hint"], desk
    assert a.cli("sync").returncode == 0  # fixed there: the push goes through, nothing was lost
    assert subprocess.run(
        ["git", "-C", str(hub), "cat-file", "-e", f"main:{second.path}"], capture_output=True
    ).returncode == 0


def test_a_disk_that_is_not_mounted_is_an_outage(fleet: Fleet) -> None:
    mount_point = fleet.root / "usb"
    mount_point.mkdir()  # an empty mount point: the disk is unplugged
    hub = mount_point / "memory.git"
    a = fleet.machine("a", {"usb": str(hub)})
    result = a.sync()
    assert result.exit_code == ExitCode.UNREACHABLE
    (usb,) = result.peers
    assert usb.status == "unreachable" and "mounted" in usb.hint
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)  # plugged in
    assert a.sync().exit_code == ExitCode.OK


def test_init_repointing_a_peer_to_a_mistyped_path_leaves_the_peer_as_it_was(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": str(hub)})
    assert a.cli("sync").returncode == 0
    before = state_of(a)["hub"]
    refs_before = a.git("for-each-ref", "refs/anamnesis")
    typo = str(hub.with_name("hbu.git"))
    proc = a.cli("init", "--peer", typo, "--peer-name", "hub", "--no-schedule", "--no-claude", "--no-semantic")
    assert proc.returncode == ExitCode.PEER_MISCONFIGURED, proc.stdout + proc.stderr
    assert f"'hub' still syncs with {hub}" in proc.stderr, proc.stderr
    assert state_of(a)["hub"] == before  # its URL, when it last synced, its refs: all as they were
    assert a.git("for-each-ref", "refs/anamnesis") == refs_before
    # A URL that answers re-points it, and init says what it pointed at before.
    moved = hub.with_name("moved.git")
    subprocess.run(["git", "clone", "-q", "--bare", str(hub), str(moved)], check=True)
    proc = a.cli("init", "--peer", str(moved), "--peer-name", "hub", "--no-schedule", "--no-claude", "--no-semantic")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"was {hub}" in " ".join(proc.stdout.split()), proc.stdout
    assert state_of(a)["hub"]["url"] == str(moved)


def test_status_forgets_the_last_error_of_a_peer_once_it_is_removed(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": str(hub)})
    (fleet.root / "usb").mkdir()
    assert a.cli("peers", "add", "usb", str(fleet.root / "usb" / "memory.git")).returncode == 0
    assert a.cli("sync").returncode == ExitCode.UNREACHABLE
    status = json.loads(a.cli("status", "--json").stdout)
    assert "usb:" in status.get("last_error", ""), status
    assert a.cli("peers", "rm", "usb").returncode == 0
    status = json.loads(a.cli("status", "--json").stdout)
    assert "last_error" not in status, status  # the sync that failed for it is history, not a problem


def test_a_sync_that_reached_no_peer_says_so(fleet: Fleet) -> None:
    (fleet.root / "usb").mkdir()  # the only peer's disk is not mounted
    a = fleet.machine("a", {"usb": str(fleet.root / "usb" / "memory.git")})
    result = a.sync()
    assert (result.exit_code, result.outcome) == (ExitCode.UNREACHABLE, "no peer reachable"), result.to_dict()
    hub = fleet.hub()
    fleet.add_peer(a, "hub", str(hub))
    assert a.sync().outcome == "some peers unreachable"  # one of two


def test_status_forgets_an_error_a_clean_sync_came_after_and_gives_fields_for_scripts(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": str(hub)})
    (fleet.root / "usb").mkdir()  # its disk is not mounted
    assert a.cli("peers", "add", "usb", str(fleet.root / "usb" / "memory.git")).returncode == 0
    assert a.cli("sync").returncode == ExitCode.UNREACHABLE
    status = json.loads(a.cli("status", "--json").stdout)
    assert "usb:" in status["last_error"] and status["sync"]["exit_code"] == ExitCode.UNREACHABLE, status
    failed_at = status["sync"]["last_error_at"]
    assert failed_at == status["sync"]["last_at"] and status["sync"]["last_ok_at"] is None, status
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(fleet.root / "usb" / "memory.git")], check=True)
    assert a.cli("sync").returncode == 0  # plugged in: fixed
    status = json.loads(a.cli("status", "--json").stdout)
    assert "last_error" not in status, status
    sync = status["sync"]
    assert (sync["outcome"], sync["exit_code"], sync["last_error_at"]) == ("synced", 0, None), sync
    assert sync["last_ok_at"] == sync["last_at"] >= failed_at, sync


# -- peers add ------------------------------------------------------------------------------------


def test_peers_add_refuses_a_path_with_no_repository_unless_forced(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a")
    settings = (a.home / "settings.json").read_text()
    typo = str(hub.with_name("hbu.git"))
    proc = a.cli("peers", "add", "typo", typo)
    assert proc.returncode == ExitCode.PEER_MISCONFIGURED, proc.stdout + proc.stderr
    assert proc.stderr.startswith("anamnesis: error:") and proc.stderr.count("\n") == 1
    assert "does not exist" in proc.stderr and "--force" in proc.stderr and "nothing was saved" in proc.stderr
    assert (a.home / "settings.json").read_text() == settings  # nothing saved
    forced = a.cli("peers", "add", "typo", typo, "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["will_retry"] is False
    assert "typo" in state_of(a)
    # A peer that cannot be reached now is kept, with a warning: the machine may be off.
    usb = fleet.root / "usb"
    usb.mkdir()
    off = a.cli("peers", "add", "usb", str(usb / "memory.git"))
    assert off.returncode == 0 and "cannot reach it now" in off.stdout, off.stdout
    assert a.cli("peers", "add", "good", str(hub)).returncode == 0


# -- faults of this machine -----------------------------------------------------------------------


def test_a_read_only_memory_folder_is_our_fault_not_the_peers(fleet: Fleet) -> None:
    a = behind_a_hub(fleet)
    create_note(a.store, type="semantic", title="Committed before", body="y\n")
    head = a.git("rev-parse", "HEAD")
    sync = [*ANAMNESIS, "sync"]
    ran = in_mount_namespace(read_only_bind(a.memory), [sync, [*sync, "--json"]], a.env())
    text, as_js = ran
    assert text.returncode == ExitCode.LOCAL_FAULT, (text.returncode, text.stdout, text.stderr)
    line = text.stderr.strip()
    assert line.count("\n") == 0 and line.startswith("anamnesis: error: this machine cannot write its own store")
    assert "read-only" in line and "remount" in line and "nothing was lost" in line
    assert "desktop" not in line and "unreachable" not in text.stdout
    assert as_json(as_js) == {"outcome": "failed", "exit_code": 9, "error": line.removeprefix("anamnesis: error: ")}
    blames_no_peer(a)
    assert last_log(a)["exit_code"] == ExitCode.LOCAL_FAULT
    assert a.git("rev-parse", "HEAD") == head
    # Writable again: it syncs, nothing lost.
    assert a.cli("sync").returncode == 0
    assert "From b" in a.cli("list").stdout and "Committed before" in a.cli("list").stdout


def test_an_edit_waiting_in_a_read_only_memory_folder_is_kept_and_said(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"desktop": str(hub)})
    note = create_note(a.store, type="semantic", title="Edited by hand", body="one\n")
    a.write(note.path, a.read(note.path) + "two\n")
    (ran,) = in_mount_namespace(read_only_bind(a.memory), [[*ANAMNESIS, "sync"]], a.env())
    assert ran.returncode == ExitCode.LOCAL_FAULT, (ran.stdout, ran.stderr)
    assert "not committed yet" in ran.stderr and "nothing was lost" in ran.stderr, ran.stderr
    blames_no_peer(a)
    assert a.read(note.path).endswith("two\n")
    assert a.cli("sync").returncode == 0 and a.git("status", "--porcelain") == ""


def test_store_files_owned_by_another_user_are_our_fault_with_the_chown_fix(fleet: Fleet) -> None:
    a = behind_a_hub(fleet)
    objects = a.memory / ".git" / "objects"
    if os.geteuid() == 0:
        owner = os.stat(objects).st_uid
        subprocess.run(["chown", "-R", "54321:54321", str(objects)], check=True)  # as if written by another user
    else:
        owner = -1
        objects.chmod(0o555)
    try:
        proc = subprocess.run(
            without_root_powers([*ANAMNESIS, "sync"]), capture_output=True, text=True, env=a.env(), timeout=120
        )
    finally:
        if owner >= 0:
            subprocess.run(["chown", "-R", f"{owner}:{owner}", str(objects)], check=True)
        else:
            objects.chmod(0o755)
    assert proc.returncode == ExitCode.LOCAL_FAULT, (proc.returncode, proc.stdout, proc.stderr)
    assert str(objects) in proc.stderr and "desktop" not in proc.stderr
    assert ("chown" if owner >= 0 else "chmod u+w") in proc.stderr, proc.stderr
    blames_no_peer(a)
    assert a.cli("sync").returncode == 0


def _owned_by_another_user(folder: Path) -> Callable[[], None]:
    """Make `folder` (and what is in it) not ours, as a command run with sudo leaves it; returns the undo."""
    if os.geteuid() == 0:
        owner = os.stat(folder).st_uid
        subprocess.run(["chown", "-R", "54321:54321", str(folder)], check=True)
        return lambda: subprocess.run(["chown", "-R", f"{owner}:{owner}", str(folder)], check=True) and None
    folder.chmod(0o555)
    return lambda: folder.chmod(0o755)


def test_a_store_made_read_only_gets_one_fix_for_all_of_it(fleet: Fleet) -> None:
    a = behind_a_hub(fleet)
    create_note(a.store, type="semantic", title="Committed before", body="y\n")
    assert a.cli("sync").returncode == 0
    create_note(fleet.machines["b"].store, type="semantic", title="Later from b", body="z\n")
    fleet.machines["b"].sync()
    subprocess.run(["chmod", "-R", "a-w", str(a.memory)], check=True)
    try:
        proc = subprocess.run(
            without_root_powers([*ANAMNESIS, "sync"]), capture_output=True, text=True, env=a.env(), timeout=120
        )
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(a.memory)], check=True)  # the fix the error gives
    assert proc.returncode == ExitCode.LOCAL_FAULT, (proc.returncode, proc.stdout, proc.stderr)
    assert f"chmod -R u+w {a.memory}," in proc.stderr, proc.stderr  # the whole store at once
    assert "more folders" in proc.stderr and "desktop:" not in proc.stderr, proc.stderr
    blames_no_peer(a)
    ran = subprocess.run(
        without_root_powers([*ANAMNESIS, "sync"]), capture_output=True, text=True, env=a.env(), timeout=120
    )
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    assert "Later from b" in a.cli("list").stdout


def _sync_with_a_folder_not_ours(a: Machine, folder: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """`anamnesis sync` on `a` (with root's powers dropped) while `folder` belongs to another user:
    it must stop with one line saying this machine cannot write its store."""
    undo = _owned_by_another_user(folder)
    try:
        proc = subprocess.run(
            without_root_powers([*ANAMNESIS, "sync"]), capture_output=True, text=True, env=a.env(), timeout=120
        )
    finally:
        undo()
    assert proc.returncode == ExitCode.LOCAL_FAULT, (proc.returncode, proc.stdout, proc.stderr)
    line = proc.stderr.strip()
    assert line.count("\n") == 0 and "this machine cannot write its own store" in line, line
    return proc, line


def test_a_refs_folder_owned_by_another_user_is_our_fault_not_the_peers(fleet: Fleet) -> None:
    a = behind_a_hub(fleet)
    assert a.cli("sync").returncode == 0  # the peer's refs folders now exist
    hub_b = fleet.machines["b"]
    create_note(hub_b.store, type="semantic", title="Second from b", body="z\n")
    hub_b.sync()
    peers_refs = a.memory / ".git" / "refs" / "anamnesis"
    assert peers_refs.is_dir()
    proc, line = _sync_with_a_folder_not_ours(a, peers_refs)
    assert str(peers_refs) in line and "desktop:" not in line and "unreachable" not in proc.stdout, line
    blames_no_peer(a)
    assert a.cli("sync").returncode == 0
    assert "Second from b" in a.cli("list").stdout


def test_a_notes_folder_owned_by_another_user_is_our_fault_and_loses_nothing(fleet: Fleet) -> None:
    hub = fleet.hub()
    b = fleet.machine("b", {"hub": str(hub)})
    first = create_note(b.store, type="semantic", title="Shared fact", body="one\n")
    b.sync()
    a = fleet.machine("a", {"desktop": str(hub)})
    assert a.cli("sync").returncode == 0
    folder = (a.memory / first.path).parent
    b.write(first.path, b.read(first.path) + "two\n")
    create_note(b.store, type="semantic", title="Another fact", body="three\n")
    b.sync()
    mine = create_note(a.store, type="semantic", title="Written on a", body="mine\n")
    _proc, line = _sync_with_a_folder_not_ours(a, folder)
    assert str(folder) in line and "kept changing" not in line, line
    blames_no_peer(a)
    assert a.git("status", "--porcelain") == ""  # nothing half-written left behind
    assert (a.memory / mine.path).read_text().endswith("mine\n")
    assert a.cli("sync").returncode == 0
    assert a.read(first.path).endswith("two\n") and "Another fact" in a.cli("list").stdout
    assert "Written on a" in b.cli("list").stdout or b.cli("sync").returncode == 0


@pytest.mark.e2e
def test_a_full_disk_during_sync_says_so_keeps_everything_and_doctor_says_full_not_reindex(fleet: Fleet) -> None:
    hub = fleet.hub()
    b = fleet.machine("b", {"hub": str(hub)})
    for i in range(3):  # hex of random bytes: git's zlib halves it, no more
        create_note(b.store, type="semantic", title=f"Big {i}", body=os.urandom(400_000).hex() + "\n")
    b.sync()
    a = fleet.machine("a", {"desktop": str(hub)})
    kept = create_note(a.store, type="semantic", title="Written here first", body="mine\n")
    ballast = a.home / "ballast"
    fill = f"head -c $(( $(df --output=avail -B1 {a.home} | tail -1) - 400000 )) /dev/zero > {ballast}"
    sync = [*ANAMNESIS, "sync"]
    ran = in_mount_namespace(
        [*small_disk(a.home, "16m", fleet.root / "keep"), ["sh", "-c", fill]],
        [
            sync,
            [*ANAMNESIS, "peers", "list", "--json"],
            ["tail", "-n", "1", str(a.home / "logs" / "sync.log")],  # status needs the index: exit 8 too
            [*ANAMNESIS, "doctor", "--json"],
            ["rm", str(ballast)],
            [*sync, "--json"],
            [*ANAMNESIS, "list", "--json"],
        ],
        a.env(),
    )
    full, peers, log, doctor, _, again, listed = ran
    assert full.returncode == ExitCode.DISK_FULL, (full.returncode, full.stdout, full.stderr)
    line = full.stderr.strip()
    assert line.count("\n") == 0 and "no space left on the disk of" in line, line
    assert " free " in line and "free some space" in line and "nothing was lost" in line, line
    assert "desktop: unreachable" not in full.stdout
    known = as_json(peers)
    assert [peer["name"] for peer in known] == ["desktop"], known
    for peer in known:
        assert peer["last_error"] is None, peer
    logged = as_json(log)
    assert logged["unreachable"] == [] and logged["exit_code"] == ExitCode.DISK_FULL, logged
    findings = as_json(doctor)["findings"]
    assert not any("anamnesis reindex" in f["fix"] for f in findings), findings
    index = [f for f in findings if f["where"].endswith("index.db")]
    assert all("disk is full" in f["problem"] for f in index), index
    assert any("free some space" in f["fix"] for f in findings)
    # Space again: the same sync finishes, and nothing written here was lost.
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert {h["title"] for h in as_json(listed)} == {"Big 0", "Big 1", "Big 2", kept.title}


# -- doctor: a peer gone for days ---------------------------------------------------------------


def test_doctor_suggests_forgetting_a_peer_gone_for_days(fleet: Fleet) -> None:
    from anamnesis.sync.peers import load_state, save_state

    usb = fleet.root / "usb"
    usb.mkdir()
    a = fleet.machine("a", {"gone": str(usb / "memory.git")})
    assert a.cli("sync").returncode == ExitCode.UNREACHABLE

    def failing_for(days: float) -> list[dict[str, Any]]:
        state = load_state(a.store)
        since = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
        state["gone"]["failing_since"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        save_state(a.store, state)
        return [f for f in json.loads(a.cli("doctor", "--json").stdout)["findings"] if "peer gone" in f["where"]]

    assert failing_for(0.1) == []  # off for a moment: nothing to say
    (one_day,) = failing_for(1.5)
    assert "peers rm" not in one_day["fix"]
    (days,) = failing_for(5)
    assert "`anamnesis peers rm gone`" in days["fix"] and "5 days" in days["fix"], days


def test_a_broken_settings_file_stops_sync_with_one_line_that_says_where_and_what_to_do(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    settings = a.store.settings_path
    settings.write_text(settings.read_text(encoding="utf-8") + "{ a hand edit gone wrong\n", encoding="utf-8")
    ran = a.cli("sync")
    assert ran.returncode == ExitCode.FAILED == 1 and ran.returncode in SYNC_EXIT_CODES
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr  # not a "mirroring skipped" line before it
    assert str(settings) in lines[0] and "line " in lines[0] and "fix it by hand" in lines[0], lines[0]
    assert "unreachable" not in ran.stdout + ran.stderr and "retry" not in ran.stdout + ran.stderr
