"""`anamnesis watch`: real watchdog on real folders, the real sync, real git.

Each test counts the syncs the watcher runs (a wrapper around the real
`anamnesis.sync.engine.sync`) and checks that a burst of changes leads to exactly
one, that editors' temp files lead to none, and that errors are survived.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, RunCli, cli_env

from anamnesis.base.paths import Store
from anamnesis.sync.watch import (
    Watcher,
    WatchOptions,
    WatchRunning,
    is_relevant,
    read_heartbeat,
    watch_summary,
)

pytestmark = pytest.mark.timeout(120)  # each test: a few syncs, bounded waits

QUIET = 0.5
SETTLE = QUIET * 4 + 0.5  # after this long without a new sync, no further one is coming


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=cli_env(repo))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


class CountingSync:
    """The real sync, counted: what the watcher asked for and what came of it."""

    def __init__(self, store: Store, fail_first: int = 0) -> None:
        self.store = store
        self.fail_first = fail_first
        self.reasons: list[str] = []
        self.results: list[Any] = []
        self.after: Callable[[int], None] | None = None  # runs once the real sync returned, before the watcher sees it
        self._lock = threading.Lock()

    def __call__(self, reason: str) -> Any:
        from anamnesis.sync.engine import sync

        with self._lock:
            self.reasons.append(reason)
            if len(self.reasons) <= self.fail_first:
                raise RuntimeError(f"injected failure {len(self.reasons)}")
        result = sync(self.store)
        self.results.append(result)
        if self.after is not None:
            self.after(len(self.reasons))
        return result

    @property
    def count(self) -> int:
        return len(self.reasons)

    def expect(self, total: int, timeout: float = 30.0) -> None:
        """Exactly `total` syncs so far: wait for them, then make sure no extra one follows."""
        wait_for(lambda: self.count >= total, timeout, f"sync #{total} (have {self.reasons})")
        time.sleep(SETTLE)
        assert self.count == total, f"expected {total} syncs, got {self.count}: {self.reasons}"


@pytest.fixture
def start_watch(store: Store) -> Iterator[Callable[..., tuple[Watcher, CountingSync]]]:
    """Start an in-process watcher on `store` with a counting real sync; stopped after the test."""
    started: list[Watcher] = []

    def start(fail_first: int = 0, wait: bool = True, settle: bool = False, **options: Any) -> tuple[Watcher, CountingSync]:
        counter = CountingSync(store, fail_first)
        opts = WatchOptions(quiet=QUIET, max_delay=30.0, interval=3600.0, discovery=False, beat=0.5, retry=0.3)
        for key, value in options.items():
            setattr(opts, key, value)
        watcher = Watcher(store, sync=counter, options=opts)
        watcher.start()
        started.append(watcher)
        if wait:  # until the start-up sync is over and reported; each test's later expect(n) counts it exactly
            wait_for(
                lambda: watcher.last_result != "" and watcher.syncing_since is None,
                what="the start-up sync",
            )
            wait_for(lambda: (read_heartbeat(store) or {}).get("last_result"), 10, "the heartbeat after it")
        if settle:  # and until the watcher's own look at that sync's changes (git status) is over too
            counter.expect(1)
        return watcher, counter

    yield start
    for watcher in started:
        watcher.stop()


def write(store: Store, relpath: str, text: str) -> Path:
    path = store.memory / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def note_text(title: str, body: str = "body") -> str:
    return f"---\ntype: semantic\ntitle: {title}\n---\n{body}\n"


def clean(store: Store) -> bool:
    return git(store.memory, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("path", "relevant"),
    [
        ("global/facts/a.md", True),
        ("projects/x/notes/b.md", True),
        ("a.md", True),
        (".gitignore", True),
        ("global/facts/.a.md.swp", False),
        ("global/facts/.a.md.swo", False),
        ("global/facts/a.md~", False),
        ("global/facts/.#a.md", False),
        ("global/facts/#a.md#", False),
        ("global/facts/4913", False),
        ("global/facts/.a.md.k2j3h4.tmp", False),
        ("x.tmp", False),
        (".DS_Store", False),
        (".git/objects/ab/cdef", False),
        (".git/index", False),
        (".git/index.lock", False),
        (".git/HEAD", True),
        (".git/packed-refs", True),
        (".git/refs/heads/main", True),
        (".git/refs/heads/main.lock", False),
        (".git/refs/anamnesis/incoming/laptop", True),
        (".git/logs/HEAD", False),
        ("sub/.git/HEAD", False),
        (".", False),
    ],
)
def test_which_paths_count_as_changes(path: str, relevant: bool) -> None:
    assert is_relevant(path) is relevant


def test_an_editor_save_is_one_sync_and_its_swap_files_none(store: Store, start_watch: Any) -> None:
    note = write(store, "global/facts/editor.md", note_text("Editor", "first"))
    _, counter = start_watch()  # the start-up sync commits the note
    assert clean(store)
    folder = note.parent
    swap = folder / ".editor.md.swp"
    swap.write_bytes(b"b0VIM 9.0")  # the editor opens the file
    (folder / ".#editor.md").write_text("user@host.1234")
    counter.expect(1)
    # Saving, the way vim does it: probe file, backup, new file, drop the backup.
    (folder / "4913").write_text("")
    (folder / "4913").unlink()
    os.rename(note, folder / "editor.md~")
    note.write_text(note_text("Editor", "second"), encoding="utf-8")
    (folder / "editor.md~").unlink()
    swap.write_bytes(b"b0VIM 9.0 more")
    counter.expect(2)
    assert counter.reasons[1] == "changed: global/facts/editor.md"  # the note, not vim's 4913 or editor.md~
    assert git(store.memory, "show", "HEAD:global/facts/editor.md").endswith("second")
    swap.unlink()
    (folder / ".#editor.md").unlink()
    counter.expect(2)


def test_a_sed_in_place_edit_is_logged_as_the_note_not_seds_temporary_file(store: Store, start_watch: Any) -> None:
    note = write(store, "global/facts/sedded.md", note_text("Sedded", "first"))
    _, counter = start_watch()
    counter.expect(1)
    temporary = note.parent / "sedH1Oghd"  # `sed -i` writes the new text beside the note, then renames it over
    temporary.write_text(note_text("Sedded", "second"), encoding="utf-8")
    os.rename(temporary, note)
    counter.expect(2)
    assert counter.reasons[1] == "changed: global/facts/sedded.md", counter.reasons


def test_a_burst_of_200_writes_is_one_sync(store: Store, start_watch: Any) -> None:
    _, counter = start_watch()
    for i in range(200):
        write(store, f"projects/burst/notes/n{i:03}.md", note_text(f"Note {i}"))
    counter.expect(2)
    assert clean(store)
    assert len(git(store.memory, "ls-files", "projects/burst").splitlines()) == 200


def test_temp_and_swap_files_lead_to_no_sync(store: Store, start_watch: Any) -> None:
    _, counter = start_watch()  # and the start-up sync is one: neither it nor its own commit leads to another
    folder = store.memory / "global" / "facts"
    folder.mkdir(parents=True, exist_ok=True)
    for name in (".a.md.swp", ".a.md.swx", "a.md~", ".#a.md", "#a.md#", "4913", ".a.md.x8f2k1.tmp", "b.tmp"):
        (folder / name).write_text("scratch")
    (folder / "4913").unlink()
    (folder / ".a.md.x8f2k1.tmp").write_text("more scratch")
    counter.expect(1)


def test_a_git_checkout_is_one_sync(store: Store, start_watch: Any) -> None:
    for i in range(150):
        write(store, f"global/facts/c{i:03}.md", note_text(f"Main {i}"))
    git(store.memory, "add", "-A")
    git(store.memory, "commit", "-qm", "many notes")
    git(store.memory, "checkout", "-qb", "topic")
    for i in range(150):
        write(store, f"global/facts/c{i:03}.md", note_text(f"Topic {i}", "changed on the topic branch"))
    git(store.memory, "commit", "-qam", "topic edits")
    git(store.memory, "checkout", "-q", "main")
    watcher, counter = start_watch(settle=True)  # no git of the watcher's own holds index.lock at the checkout

    git(store.memory, "checkout", "-q", "topic")  # 150 files and HEAD change at once
    counter.expect(2)
    beat = read_heartbeat(store)
    assert beat is not None and beat["last_result"] == "failed"
    assert "checkout main" in beat["last_error"]  # sync refuses another branch and says how to get out
    git(store.memory, "checkout", "-q", "main")
    counter.expect(3)
    assert watcher.last_result == "ok"


def test_an_edit_saved_while_a_sync_runs_gets_its_own_sync(store: Store, start_watch: Any) -> None:
    _, counter = start_watch()

    def save_mid_sync(number: int) -> None:
        if number == 2:  # the sync has committed; an editor saves another note before the watcher hears back
            write(store, "global/facts/late.md", note_text("Saved mid-sync"))

    counter.after = save_mid_sync
    write(store, "global/facts/first.md", note_text("First"))
    counter.expect(3)
    assert clean(store)
    assert "global/facts/late.md" in git(store.memory, "ls-files")


def test_a_failing_sync_is_logged_and_retried(store: Store, start_watch: Any) -> None:
    watcher, counter = start_watch(fail_first=2, wait=False)  # the start-up sync fails, then its first retry
    wait_for(lambda: counter.count >= 3 and watcher.last_result == "ok", what="a successful retry")
    assert counter.reasons[1].startswith("retry") and counter.reasons[2].startswith("retry")
    assert watcher.errors == 2 and "injected failure 2" in watcher.last_error
    write(store, "global/facts/after.md", note_text("After the failures"))
    counter.expect(4)
    assert clean(store)
    summary = watch_summary(store)["watch"]
    assert summary.startswith(f"running (pid {os.getpid()}), last sync ")
    # clean syncs came after: the error is history, kept in the heartbeat and the log, not shown as now
    assert "injected failure 2" not in summary and "injected failure 2" in (read_heartbeat(store) or {})["last_error"]


def plug_in(hub: Path, scratch: Path) -> Callable[[], str]:
    """A hub on a disk that is plugged in: its repository appears whole (made beside it and moved
    in), as a mount does — a retry that looked at a half-made `git init` would rightly call the
    path misconfigured. Returns what reads the hub's main."""
    made = scratch / "hub-being-made.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(made)], check=True)
    made.rename(hub)
    return lambda: subprocess.run(
        ["git", "-C", str(hub), "rev-parse", "-q", "--verify", "main"], capture_output=True, text=True
    ).stdout.strip()


def test_an_unreachable_peer_is_tried_again_and_gets_what_was_written_meanwhile(
    store: Store, start_watch: Any, tmp_path: Path
) -> None:
    # The peer comes back with nothing new written here: the watch's own retries, with a back-off,
    # bring it what was written while it was away (they waited for the safety-net sync, 5 minutes).
    from anamnesis.sync.peers import add_peer

    hub = tmp_path / "usb" / "hub.git"
    hub.parent.mkdir()
    add_peer(store, "hub", str(hub))  # not there yet: the disk it lives on is not mounted
    watcher, counter = start_watch(retry=0.5, interval=8.0)  # the back-off stops doubling at 8 s
    assert "hub" in watcher.last_error
    write(store, "global/facts/offline.md", note_text("Written while the hub is down"))
    wait_for(lambda: clean(store), what="the note committed locally although the peer is down")
    wait_for(lambda: any(r.startswith("retry: hub out of reach") for r in counter.reasons), what="a retry")
    assert counter.results[-1].exit_code == 11
    assert "hub" in watch_summary(store)["watch"].partition("last error")[2]  # said while it lasts
    hub_main = plug_in(hub, tmp_path)
    wait_for(lambda: hub_main() == git(store.memory, "rev-parse", "HEAD"), 30, "the hub caught up")
    wait_for(lambda: counter.results[-1].exit_code == 0, 10, "that sync's result (it pushes, then returns)")
    tried = counter.count
    time.sleep(SETTLE + 1.0)
    assert counter.count == tried, counter.reasons[tried:]  # reached: no more retries
    wait_for(lambda: "last error" not in watch_summary(store)["watch"], 10, "the error no longer shown as now")


def test_a_peer_back_after_a_long_outage_gets_what_was_written_within_the_short_retry(
    store: Store, start_watch: Any, tmp_path: Path
) -> None:
    # Out of reach for a while, the retries of a peer stop doubling at a short bound (30 s; 1 s
    # here), not at --interval: it gets the notes soon after it is back, however long it was away.
    from anamnesis.sync.peers import add_peer

    hub = tmp_path / "usb" / "hub.git"
    hub.parent.mkdir()
    add_peer(store, "hub", str(hub))
    start_watch(retry=0.25, interval=300.0, retry_unreached_max=1.0)
    write(store, "global/facts/offline.md", note_text("Written while the hub is down"))
    wait_for(lambda: clean(store), what="the note committed locally although the peer is down")
    time.sleep(9.0)  # unbounded, the back-off would have reached 8 s, then 16 s
    hub_main = plug_in(hub, tmp_path)
    wait_for(lambda: hub_main() == git(store.memory, "rev-parse", "HEAD"), 3.0, "the hub caught up within the bound")


def test_memory_removed_and_recreated(store: Store, start_watch: Any, tmp_path: Path) -> None:
    watcher, counter = start_watch(settle=True)  # no git of the watcher's own holds index.lock at the move
    saved = tmp_path / "saved-memory"
    shutil.move(store.memory, saved)  # memory/ disappears (deleted, or moved away by hand)
    wait_for(lambda: "memory/ was removed" in watcher.last_error, 10, "the removal to be noticed")
    shutil.copytree(saved, store.memory, symlinks=True)  # and comes back (a restore): a new folder
    wait_for(lambda: counter.count >= 2 and "memory/ is back" in counter.reasons[-1], 15, "the re-armed watch")
    time.sleep(SETTLE)  # let the syncs the restore itself caused finish
    before = counter.count
    write(store, "global/facts/restored.md", note_text("Written after the restore"))
    wait_for(lambda: any("restored.md" in r for r in counter.reasons[before:]), 15, "the re-armed watch to see an edit")
    wait_for(lambda: clean(store) and watcher.syncing_since is None, 15, "the edit to be committed")
    assert "global/facts/restored.md" in git(store.memory, "ls-files")
    assert watcher.last_result == "ok"


def test_only_one_watch_per_store(store: Store, start_watch: Any) -> None:
    start_watch()
    with pytest.raises(WatchRunning):
        Watcher(store, sync=lambda reason: None, options=WatchOptions(discovery=False)).start()


def test_status_reports_the_heartbeat(store: Store, start_watch: Any, run_cli: RunCli) -> None:
    assert watch_summary(store) == {}
    watcher, _ = start_watch()
    info = json.loads(run_cli("status", "--json").stdout)
    assert info["watch"].startswith(f"running (pid {os.getpid()}), last sync ")
    watcher.stop()
    info = json.loads(run_cli("status", "--json").stdout)
    assert info["watch"].startswith("not running (stopped ")


def test_resolve_says_who_sends_the_resolution(store: Store, start_watch: Any, run_cli: RunCli) -> None:
    conflicted = "---\ntype: semantic\ntitle: Both\n---\n<<<<<<< laptop\none\n=======\ntwo\n>>>>>>> desk\n"
    write(store, "global/facts/both.md", conflicted)
    git(store.memory, "add", "-A")
    git(store.memory, "commit", "-qm", "laptop: sync: conflict")
    done = run_cli("resolve", "global/facts/both.md", "--both")
    assert done.returncode == 0 and "run `anamnesis sync` to send it" in done.stdout, done.stdout
    write(store, "global/facts/both.md", conflicted)
    start_watch(settle=True)
    done = run_cli("resolve", "global/facts/both.md", "--both")
    assert done.returncode == 0 and "the running `anamnesis watch` sends it" in done.stdout, done.stdout


def test_status_and_doctor_say_when_a_watch_runs_the_code_from_before_an_upgrade(
    store: Store, start_watch: Any, run_cli: RunCli
) -> None:
    """A watch keeps the code it started with; after `git pull` and `./scripts/install` (or a new
    package) its syncs miss what the new code fixes until it is restarted."""
    from anamnesis.base.running import code_stamp

    watcher, _ = start_watch()
    assert "upgrade" not in json.loads(run_cli("status", "--json").stdout)["watch"]
    assert "before an upgrade" not in run_cli("doctor", "--json").stdout
    watcher.code = "0.1.9@1"  # what a watch started before the upgrade recorded
    wait_for(lambda: (read_heartbeat(store) or {}).get("code") == "0.1.9@1", 10, "the next heartbeat")
    said = json.loads(run_cli("status", "--json").stdout)["watch"]
    assert said.endswith("started before an upgrade: restart it to run the new code"), said
    found = json.loads(run_cli("doctor", "--json").stdout)
    (finding,) = [f for f in found["findings"] if "before an upgrade" in f["problem"]]
    assert finding["where"] == f"anamnesis watch (pid {os.getpid()})" and "restart it" in finding["fix"]
    watcher.code = code_stamp()
    wait_for(lambda: (read_heartbeat(store) or {}).get("code") == code_stamp(), 10, "the next heartbeat")
    assert "upgrade" not in json.loads(run_cli("status", "--json").stdout)["watch"]


def test_schedule_status_names_a_watch_started_by_hand(store: Store, start_watch: Any, run_cli: RunCli) -> None:
    """No timer, but a watch syncing this store: `schedule status` says so rather than leave the
    impression that nothing syncs."""
    assert json.loads(run_cli("schedule", "status", "--json", real_process=True).stdout)["watch_by_hand"] is None
    start_watch()
    info = json.loads(run_cli("schedule", "status", "--json", real_process=True).stdout)
    assert info["installed"] is False and info["watch_by_hand"] == os.getpid()
    said = run_cli("schedule", "status", real_process=True).stdout
    assert f"started by hand: running (pid {os.getpid()})" in said and "as a safety net" in said, said


@pytest.mark.e2e
def test_watch_command_syncs_and_stops_on_sigterm(store: Store, tmp_path: Path) -> None:
    from anamnesis.base.settings import load_settings, save_settings

    settings = load_settings(store)
    settings["discovery"] = False  # no announcing on this network
    save_settings(store, settings)
    log = open(tmp_path / "watch.out", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "anamnesis", "watch", "--debounce", "0.3", "--interval", "600"],
        cwd=ROOT,
        env=cli_env(store.home),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: (read_heartbeat(store) or {}).get("last_result") == "ok", 20, "the start-up sync")
        head = git(store.memory, "rev-parse", "HEAD")
        write(store, "global/facts/cli.md", note_text("From the watch command"))
        wait_for(lambda: git(store.memory, "rev-parse", "HEAD") != head and clean(store), 20, "the commit")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
    output = (tmp_path / "watch.out").read_text()
    assert "cli.md" in output and "watch stopped" in output
    assert "cli.md" in (store.log_dir / "watch.log").read_text()
    beat = read_heartbeat(store)
    assert beat is not None and beat["stopped"] is True
    assert beat["options"]["discovery"] is False and beat["announcing"] is False


@pytest.mark.e2e
def test_uninstall_stops_a_watch_started_by_hand(store: Store, tmp_path: Path, run_cli: RunCli) -> None:
    from anamnesis.base.settings import load_settings, save_settings

    settings = load_settings(store)
    settings["discovery"] = False  # no announcing on this network
    save_settings(store, settings)
    proc = subprocess.Popen(
        [sys.executable, "-m", "anamnesis", "watch", "--debounce", "0.3", "--interval", "600"],
        cwd=ROOT,
        env=cli_env(store.home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (read_heartbeat(store) or {}).get("last_result") == "ok", 20, "the start-up sync")
        planned = run_cli("uninstall", "--print")
        assert f"stop `anamnesis watch` (pid {proc.pid})" in planned.stdout, planned.stdout
        assert proc.poll() is None  # --print changes nothing
        done = run_cli("uninstall")
        assert done.returncode == 0, done.stderr
        assert f"stopped `anamnesis watch` (pid {proc.pid})" in done.stdout, done.stdout
        assert proc.wait(timeout=5) == 0  # gone by the time uninstall returned, and cleanly
        again = run_cli("uninstall", "--print")
        assert "anamnesis watch" not in again.stdout, again.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
