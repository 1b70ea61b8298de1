"""`anamnesis doctor` as a person meets it: real stores, real syncs, a real read-only mount."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli, cli_env
from mounts import without_root_powers


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    ).stdout


def init(run_cli: RunCli) -> None:
    result = run_cli("init", "--local-only")
    assert result.returncode == 0, result.stderr


def doctor(run_cli: RunCli) -> tuple[int, list[dict[str, Any]]]:
    result = run_cli("doctor", "--json")
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)["findings"]


def test_notes_without_front_matter_are_notes_not_problems(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    memory = home / "memory"
    (memory / "global" / "facts").mkdir(parents=True)
    (memory / "global" / "facts" / "plain.md").write_text(
        "# Plain note\n\nJust markdown, as docs/notes.md allows.\n"
    )
    (memory / "projects" / "acme" / "howto").mkdir(parents=True)
    (memory / "projects" / "acme" / "howto" / "deploy.md").write_text("Deploy with `make deploy`.\n")
    code, findings = doctor(run_cli)
    assert (code, findings) == (0, [])
    assert json.loads(run_cli("search", "plain markdown", "--json").stdout)[0]["title"] == "Plain note"
    (memory / "global" / "facts" / "broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n")
    code, findings = doctor(run_cli)
    assert code == 1 and [f["where"] for f in findings] == ["global/facts/broken.md"]


def test_a_failing_last_sync_is_reported_until_a_sync_succeeds(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    memory = home / "memory"
    git(memory, "checkout", "-q", "-b", "experiment")
    assert run_cli("sync").returncode == 12
    git(memory, "checkout", "-q", "main")  # the repo is fine again, but the last sync failed
    code, findings = doctor(run_cli)
    assert code == 1
    (finding,) = findings
    assert finding["where"] == str(home / "logs" / "sync.log")
    assert finding["problem"].startswith("the last sync (") and "failed with exit 12" in finding["problem"]
    assert "experiment checked out" in finding["problem"] and "anamnesis sync" in finding["fix"]
    assert run_cli("sync").returncode == 0
    assert doctor(run_cli) == (0, [])


def test_a_peer_unreachable_for_a_day_is_reported(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    init(run_cli)
    hub = tmp_path / "usb" / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)
    assert run_cli("peers", "add", "hub", str(hub)).returncode == 0
    assert run_cli("sync").returncode == 0
    hub.rename(tmp_path / "unplugged.git")  # the disk the hub lives on is unplugged: usb/ is left empty
    assert run_cli("sync").returncode == 11
    assert doctor(run_cli) == (0, [])  # off for a moment: normal, nothing to say
    # A day later, still unreachable: the per-peer state says since when.
    state_path = home / "state" / "peers.json"
    state = json.loads(state_path.read_text())
    two_days_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for key in ("failing_since", "last_ok"):
        if key in state["hub"]:
            state["hub"][key] = two_days_ago
    state_path.write_text(json.dumps(state))
    assert run_cli("sync").returncode == 11
    code, findings = doctor(run_cli)
    assert code == 1
    (finding,) = findings
    assert finding["where"].startswith("peer hub") and str(hub) in finding["where"]
    assert "since" in finding["problem"] and finding["fix"]


@contextmanager
def read_only(memory: Path) -> Iterator[None]:
    """memory/ bind-mounted read-only over itself (root only), unmounted afterwards whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    done = subprocess.run(["mount", "--bind", str(memory), str(memory)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(memory)], check=True, capture_output=True)
        yield
    finally:
        if subprocess.run(["umount", str(memory)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(memory)], capture_output=True)


def test_a_read_only_memory_folder_is_reported(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    assert run_cli("new", "Before", "-G", "--body", "words").returncode == 0
    memory = home / "memory"
    with read_only(memory):
        code, findings = doctor(run_cli)
        assert code == 1
        assert findings[0]["where"] == str(memory)
        assert "read-only" in findings[0]["problem"] and "remount" in findings[0]["fix"]
        refused = run_cli("new", "After", "-G", "--body", "words")
        assert refused.returncode != 0 and refused.stderr.count("\n") == 1
    assert doctor(run_cli) == (0, [])


def test_folders_inside_memory_that_cannot_be_written_are_reported_with_one_fix(
    run_cli: RunCli, home: Path
) -> None:
    init(run_cli)
    assert run_cli("new", "A fact", "-G", "--body", "words").returncode == 0
    memory = home / "memory"
    facts = memory / "global" / "facts"
    refs = memory / ".git" / "refs" / "heads"
    for folder in (facts, refs):
        folder.chmod(0o555)
    try:
        ran = subprocess.run(
            without_root_powers([sys.executable, "-m", "anamnesis", "doctor", "--json"]),
            capture_output=True, text=True, env=cli_env(home), timeout=60,
        )
    finally:
        for folder in (facts, refs):
            folder.chmod(0o755)
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    findings = json.loads(ran.stdout)["findings"]
    assert len(findings) == 1, findings  # one finding for both folders, one fix for both
    assert findings[0]["where"] in (str(facts), str(refs)) and "1 more folder" in findings[0]["problem"]
    assert f"chmod -R u+w {memory}" in findings[0]["fix"], findings[0]
    assert doctor(run_cli) == (0, [])


def test_a_home_that_is_a_file_is_one_clear_error_for_doctor_and_init(
    run_cli: RunCli, tmp_path: Path
) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("")
    for home in (a_file, a_file / "inside"):
        for args in (("doctor",), ("init", "--local-only"), ("init", "--print"), ("init", "--no-schedule")):
            result = run_cli(*args, home_dir=home)
            assert result.returncode == 1, (args, result.stderr)
            assert result.stderr.startswith("anamnesis: error:") and result.stderr.count("\n") == 1
            assert f"{a_file} is a file, not a folder" in result.stderr, result.stderr
            assert "run `anamnesis init`" not in result.stdout + result.stderr
    assert a_file.read_text() == ""


def test_a_temporary_file_left_by_a_killed_write_is_reported(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    made = json.loads(run_cli("new", "Complete", "-G", "--body", "words", "--json").stdout)
    folder = (home / "memory" / made["path"]).parent
    fresh = folder / f".{Path(made['path']).name}.1a2b3c4d.undo.tmp"  # a write in progress right now
    fresh.write_text("old version")
    assert doctor(run_cli) == (0, [])
    old = folder / ".complete-x.q9z_k2m1.tmp"  # what a write killed a while ago left
    old.write_text("half")
    os.utime(old, (1_000_000_000, 1_000_000_000))
    code, findings = doctor(run_cli)
    assert code == 1 and [f["where"] for f in findings] == [str(old.relative_to(home / "memory"))]
    assert findings[0]["fix"] == f"delete it: rm {old}"


def test_a_symbolic_link_to_a_folder_in_memory_is_listed(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    init(run_cli)
    outside = tmp_path / "outdir"
    outside.mkdir()
    (outside / "x.md").write_text("# Outside\n")
    link = home / "memory" / "global" / "linkdir"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    code, findings = doctor(run_cli)
    assert code == 1 and [f["where"] for f in findings] == ["global/linkdir"], findings
    assert "symbolic link" in findings[0]["problem"] and "sync leaves it out" in findings[0]["problem"]
