"""What the published anamnesis-memory 0.1.3 package leaves behind: its store at ANAMNESIS_HOME
(every command refuses it, writing nothing; `init --move-old-store` moves it aside and imports
it) and its hooks in Claude Code's settings.json (init and doctor find them, init removes them).

The old store and hooks are made by the real 0.1.3 package (see test_import_e2e.old_cli).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import RunCli
from test_import_e2e import old_cli

from anamnesis.base.paths import open_store
from anamnesis.store.operations import read_note

pytestmark = pytest.mark.e2e

TRANSCRIPT = [
    {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "Fix the cache eviction bug"}},
    {"type": "assistant", "sessionId": "s1", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "The TTL was read in seconds; fixed in cache.py."}]}},
    {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "Document it too."}},
    {"type": "assistant", "sessionId": "s1", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Documented the TTL units in docs/cache.md."}]}},
]


def old_home(user: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(user), "GIT_CONFIG_NOSYSTEM": "1", "ANAMNESIS_MACHINE_ID": "desk-old"}


def make_old_install(user: Path) -> tuple[Path, str]:
    """What a person who used 0.1.3 has: its `init` run (store config, Claude Code hooks) and one
    note captured from a session. Returns (its store, the note's id)."""
    command = str(old_cli())
    user.mkdir(parents=True, exist_ok=True)
    env = old_home(user)
    proc = subprocess.run(
        [command, "init", "--local-only", "--yes", "--no-sync"], env=env, cwd=user,
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    transcript = user / "session.jsonl"
    transcript.write_text("".join(json.dumps(line) + "\n" for line in TRANSCRIPT))
    proc = subprocess.run(
        [command, "capture", "--transcript", str(transcript), "--project", "github.com/acme/api", "--no-sync"],
        env=env, cwd=user, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return user / ".anamnesis", proc.stdout.split("wrote episodic note ", 1)[1].split()[0]


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None, int]]:
    """Every path under `root`: its mode, its bytes (files), its modification time."""
    out: dict[str, tuple[int, bytes | None, int]] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        out[str(path.relative_to(root))] = (info.st_mode, data, info.st_mtime_ns)
    return out


def test_every_command_refuses_a_0_1_3_store_and_writes_nothing_into_it(
    tmp_path: Path, run_cli: RunCli
) -> None:
    old, _ = make_old_install(tmp_path / "user")
    before = snapshot(old)
    (tmp_path / "vault").mkdir()
    for args in (
        ("init",), ("init", "--print"), ("init", "--json"), ("init", "--local-only"), ("doctor",), ("reindex",),
        ("status",), ("search", "cache"), ("sync",), ("list",), ("new", "x", "-t", "semantic", "-b", "y"),
        ("import", "markdown", str(tmp_path / "vault")), ("conflicts",), ("uninstall",),
    ):
        proc = run_cli(*args, home_dir=old)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 3, (args, proc.stdout, proc.stderr)
        assert len(lines) == 1 and "holds a store of anamnesis-memory 0.1.3" in lines[0], (args, proc.stderr)
        assert ("--move-old-store" if args[0] == "init" else "run `anamnesis init`") in lines[0], args
        assert snapshot(old) == before, args  # no settings.json, state/, logs/, no chmod, nothing


def test_init_moves_the_0_1_3_store_aside_and_imports_it(tmp_path: Path, run_cli: RunCli) -> None:
    old, note_id = make_old_install(tmp_path / "user")
    before = snapshot(old)
    planned = run_cli("init", "--move-old-store", "--print", "--local-only", home_dir=old)
    assert planned.returncode == 0, planned.stderr
    assert f"move the anamnesis-memory 0.1.3 store at {old} to {old}-0.1.3" in planned.stdout
    assert "import its notes" in planned.stdout and snapshot(old) == before  # --print: nothing moved

    done = run_cli("init", "--move-old-store", "--local-only", home_dir=old)
    assert done.returncode == 0, done.stderr
    aside = old.with_name(".anamnesis-0.1.3")
    assert snapshot(aside) == {k: v for k, v in before.items()}  # moved as it was
    assert "anamnesis-memory: imported 1 new" in done.stdout
    store = open_store(old)
    assert store.exists() and read_note(store, note_id).extra["prov_session"] == "s1"
    assert run_cli("doctor", home_dir=old).returncode == 0
    again = run_cli("init", "--local-only", home_dir=old)  # a store of ours now: nothing to move
    assert again.returncode == 0 and "0.1.3" not in again.stdout


def test_hooks_the_0_1_3_package_left_are_found_and_removed(tmp_path: Path, run_cli: RunCli, home: Path) -> None:
    user = tmp_path / "user"
    make_old_install(user)
    config = user / ".claude"
    settings = config / "settings.json"
    data = json.loads(settings.read_text())
    old_commands = [h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]]
    assert len(old_commands) == 4 and all(" anamnesis " in c or c.endswith((" inject", " sync", " capture")) or "capture" in c for c in old_commands)
    mine = {"type": "command", "command": "notify-send 'session over'"}
    data["hooks"]["SessionEnd"].append({"hooks": [mine]})
    settings.write_text(json.dumps(data, indent=2) + "\n")
    env = {"CLAUDE_CONFIG_DIR": str(config)}

    kept = run_cli("init", "--agent", "claude", "--no-schedule", env=env)
    assert kept.returncode == 0, kept.stderr
    assert "still holds hooks of anamnesis-memory 0.1.3 (SessionStart, SessionEnd, PreCompact)" in kept.stdout
    assert "--remove-old-hooks" in kept.stdout
    doctor = run_cli("doctor", "--json", env=env)
    assert doctor.returncode == 1
    (finding,) = [f for f in json.loads(doctor.stdout)["findings"] if f["where"] == str(settings)]
    assert "anamnesis-memory 0.1.3" in finding["problem"] and "--remove-old-hooks" in finding["fix"]

    removed = run_cli("init", "--agent", "claude", "--no-schedule", "--remove-old-hooks", env=env)
    assert removed.returncode == 0, removed.stderr
    assert "removed the hooks of anamnesis-memory 0.1.3" in removed.stdout
    after = json.loads(settings.read_text())
    commands = [h["command"] for groups in after["hooks"].values() for g in groups for h in g["hooks"]]
    assert not set(old_commands) & set(commands)
    assert mine["command"] in commands and sum("-m anamnesis.hooks" in c for c in commands) == 4
    assert run_cli("doctor", env=env).returncode == 0
    assert os.path.exists(settings)


def _answer_in_a_terminal(args: list[str], env: dict[str, str], answers: list[tuple[str, str]]) -> tuple[int, str]:
    """Run `anamnesis ARGS` on a pseudo-terminal, answering each question in turn as it is asked;
    (exit status, output)."""
    import select
    import sys
    import time

    from conftest import ROOT

    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "anamnesis", *args], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
        close_fds=True,
    )
    os.close(slave)
    seen = b""
    waiting = list(answers)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the other end closed: the command is done
                break
            if not chunk:
                break
            seen += chunk
            if waiting and waiting[0][0].encode() in b" ".join(seen.split()):
                os.write(master, waiting.pop(0)[1].encode() + b"\r")
                seen = b""  # the next question is asked after this
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), seen.decode("utf-8", "replace")


def test_init_in_a_terminal_asks_before_moving_the_store_and_removing_the_hooks(tmp_path: Path, home: Path) -> None:
    from conftest import cli_env

    user = tmp_path / "user"
    old, note_id = make_old_install(user)
    env = cli_env(old, CLAUDE_CONFIG_DIR=str(user / ".claude"), PATH="/usr/bin:/bin", TERM="dumb", COLUMNS="400")
    store_question = "import its notes into a new store here?"
    declined, out = _answer_in_a_terminal(["init", "--no-schedule", "--no-semantic"], env, [(store_question, "n")])
    assert declined == 3 and "--move-old-store" in out and not old.with_name(".anamnesis-0.1.3").exists()
    code, out = _answer_in_a_terminal(
        ["init", "--no-schedule", "--no-semantic"], env, [(store_question, "y"), ("which run that program against this store. Remove them?", "n")]
    )
    assert code == 0, out
    assert old.with_name(".anamnesis-0.1.3").is_dir() and read_note(open_store(old), note_id).id == note_id
    assert "still holds hooks of anamnesis-memory 0.1.3" in " ".join(out.split())  # declined: said at the end
    code, out = _answer_in_a_terminal(["init", "--no-schedule", "--no-semantic"], env, [("Remove them?", "y")])
    assert code == 0, out
    assert "removed the hooks of anamnesis-memory 0.1.3" in " ".join(out.split())
    assert "anamnesis capture" not in (user / ".claude" / "settings.json").read_text()
