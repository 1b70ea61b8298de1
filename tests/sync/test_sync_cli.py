"""The sync commands as a user runs them: peers, exit codes, conflicts, resolve, schedule, demo."""

from __future__ import annotations

import json
import plistlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fleet import Fleet, fleet  # noqa: F401
from procs import run_anamnesis

from anamnesis.store.operations import create_note, update_note


def test_peers_add_list_rm_live_in_machine_settings(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a")
    proc = a.cli("peers", "add", "hub", str(hub))
    assert proc.returncode == 0, proc.stderr
    assert "added peer hub" in proc.stdout
    proc = a.cli("peers", "add", "laptop", "me@laptop.tail1234.ts.net:.anamnesis/memory", "--no-check", "--json")
    assert json.loads(proc.stdout)["url"] == "me@laptop.tail1234.ts.net:.anamnesis/memory"
    proc = a.cli("peers", "add", "laptop", "me@laptop2.tail1234.ts.net:.anamnesis/memory", "--no-check")
    assert proc.returncode == 0 and "changed peer laptop" in proc.stdout  # a re-point says so, with the old URL
    assert "was me@laptop.tail1234.ts.net:.anamnesis/memory" in proc.stdout
    proc = a.cli("peers", "add", "bad name", str(hub))
    assert proc.returncode == 2 and "peer name" in proc.stderr
    proc = a.cli("peers", "add", "self", str(a.memory))
    assert proc.returncode == 2 and "own peer" in proc.stderr
    listed = json.loads(a.cli("peers", "list", "--json").stdout)
    assert [p["name"] for p in listed] == ["hub", "laptop"]
    assert listed[1]["url"] == "me@laptop2.tail1234.ts.net:.anamnesis/memory"
    settings = json.loads((a.home / "settings.json").read_text())
    assert set(settings["peers"]) == {"hub", "laptop"}
    assert (a.home / "settings.json").stat().st_mode & 0o077 == 0
    assert "laptop" not in a.git("ls-files")
    assert a.cli("peers", "rm", "laptop").returncode == 0
    assert a.cli("peers", "rm", "laptop").returncode == 4
    assert [p["name"] for p in json.loads(a.cli("peers", "list", "--json").stdout)] == ["hub"]
    (fleet.root / "usb").mkdir()  # a disk not mounted now: kept, with a warning
    proc = a.cli("peers", "add", "later", str(fleet.root / "usb" / "missing.git"))
    assert proc.returncode == 0 and "cannot reach" in proc.stdout
    assert "does not appear to be a git repository" in proc.stdout  # the reason, not the boilerplate


def test_peers_list_at_80_columns_keeps_every_url_time_and_state_whole(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    long_url = "ssh://someone@desktop.tail1234.ts.net:2222/home/someone/.anamnesis/memory"
    fleet.add_peer(a, "desktop", long_url)
    (fleet.root / "usb").mkdir()  # the disk it lives on is not mounted: an outage
    fleet.add_peer(a, "gone", str(fleet.root / "usb" / "gone.git"))
    assert a.cli("sync").returncode == 11
    peers = {p["name"]: p for p in json.loads(a.cli("peers", "list", "--json").stdout)}
    assert set(peers) == {"hub", "desktop", "gone"}, peers
    for columns in ("80", "200"):
        proc = run_anamnesis(["peers", "list"], a.env(COLUMNS=columns))
        assert proc.returncode == 0, proc.stderr
        assert "…" not in proc.stdout, proc.stdout
        for name, peer in peers.items():
            assert peer["url"] in proc.stdout, proc.stdout
            assert (peer["last_ok"] or "never") in proc.stdout
            if name != "hub":
                assert f"failing since {peer['failing_since']}" in proc.stdout, proc.stdout
    assert long_url in proc.stdout and "kind" in proc.stdout.splitlines()[0]  # wide enough: the table


def test_sync_exit_codes_and_json(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    note = create_note(a.store, type="semantic", title="Shared", body="one\ntwo\nthree\n")
    proc = a.cli("sync", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["outcome"] == "synced" and report["sent"] >= 1
    assert b.cli("sync").returncode == 0
    update_note(a.store, note.id, body="one\ntwo from a\nthree\n")
    update_note(b.store, note.id, body="one\ntwo from b\nthree\n")
    assert a.cli("sync", "--quiet").stdout == ""
    proc = b.cli("sync", real_process=True)  # the exit codes as a shell sees them
    assert proc.returncode == 10
    assert "conflict" in proc.stdout and note.path in proc.stdout
    (fleet.root / "usb").mkdir()  # the disk it lives on is not mounted: an outage
    fleet.add_peer(b, "gone", str(fleet.root / "usb" / "gone.git"))
    proc = b.cli("sync", "--json", real_process=True)
    assert proc.returncode == 11
    assert json.loads(proc.stdout)["peers"][0]["status"] == "unreachable"
    assert b.cli("sync", "--peer", "hub").returncode == 0
    proc = b.cli("sync", "--peer", "nope", "--json")  # a failure is JSON too, for scripts
    assert proc.returncode == 4
    assert json.loads(proc.stdout) == {"outcome": "failed", "exit_code": 4, "error": proc.stderr.split("error: ", 1)[1].strip()}


def test_sync_says_what_came_in_and_quiet_says_only_problems(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    note = create_note(a.store, type="semantic", title="Shared", body="one\ntwo\nthree\n")
    a.sync()
    b.sync()
    # a hand edit committed, nothing received: no "changed here" (that is what came in)
    a.write(note.path, a.read(note.path) + "four\n")
    out = a.cli("sync").stdout
    assert "committed 1 local change" in out and "changed here" not in out, out
    assert "1 note changed here" in b.cli("sync").stdout
    # --quiet: a conflict is a problem, the local change it committed is not
    update_note(a.store, note.id, body="one\ntwo from a\nthree\nfour\n")
    assert a.cli("sync", "--quiet").stdout == ""
    b.write(note.path, b.read(note.path).replace("two\n", "two from b\n"))
    proc = b.cli("sync", "--quiet")
    assert proc.returncode == 10 and "conflict" in proc.stdout, proc.stdout
    assert "committed" not in proc.stdout and "changed here" not in proc.stdout, proc.stdout


def test_conflicts_and_resolve_commands(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    first = create_note(a.store, type="semantic", title="First", body="x\nline\ny\n")
    second = create_note(a.store, type="semantic", title="Second", body="x\nline\ny\n")
    a.sync()
    b.sync()
    for n in (first, second):
        update_note(a.store, n.id, body="x\nline from a\ny\n")
        update_note(b.store, n.id, body="x\nline from b\ny\n")
    a.sync()
    assert b.sync().exit_code == 10
    listed = json.loads(b.cli("conflicts", "--json").stdout)
    assert [c["path"] for c in listed] == sorted([first.path, second.path])
    assert listed[0]["blocks"] == [["a", "b"]]
    proc = b.cli("resolve", first.id, "--ours")  # b's own version, although it is the lower one
    assert proc.returncode == 0, proc.stderr
    text = b.read(first.path)
    assert "line from b" in text and "line from a" not in text and "<<<<<<<" not in text
    assert b.cli("resolve", first.id, "--ours").returncode == 2  # nothing left to resolve
    proc = b.cli("resolve", first.id)  # resolved and committed already: not "resolved" again
    assert proc.returncode == 2 and "nothing to resolve" in proc.stderr and "resolved" not in proc.stdout
    proc = b.cli("resolve", second.id)
    assert proc.returncode == 2 and "still has conflict markers" in proc.stderr
    proc = b.cli("resolve", second.id, "--ours", "--theirs")
    assert proc.returncode == 2
    # --edit with an "editor" that keeps the upper side.
    editor = fleet.root / "editor.py"
    editor.write_text(
        "import sys, re\np = sys.argv[1]\nt = open(p).read()\n"
        "t = re.sub(r'<<<<<<< .*?\\n(.*?)=======\\n.*?>>>>>>> .*?\\n', r'\\1', t, flags=re.S)\nopen(p, 'w').write(t)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "anamnesis", "resolve", second.id, "--edit"],
        capture_output=True, text=True, env=b.env(EDITOR=f"{sys.executable} {editor}"), cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert "line from a" in b.read(second.path) and "<<<<<<<" not in b.read(second.path)
    assert json.loads(b.cli("conflicts", "--json").stdout) == []
    assert b.git("status", "--porcelain") == ""  # resolutions are committed
    b.sync()
    a.sync()
    assert "line from b" in a.read(first.path) and "line from a" in a.read(second.path)


def test_three_machines_on_one_line_resolve_in_one_go(fleet: Fleet) -> None:
    machines, note = fleet.one_line_edited_everywhere(("a", "b", "c"))
    for m in machines:
        m.sync()
    c = machines[2]
    assert c.read(note.path).count("<<<<<<<") == 1  # the third edit joins the first conflict's block
    proc = c.cli("resolve", note.id, "--both")
    assert proc.returncode == 0, proc.stderr
    text = c.read(note.path)
    assert "<<<<<<<" not in text and all(f"middle from {n}\n" in text for n in ("a", "b", "c"))
    assert json.loads(c.cli("conflicts", "--json").stdout) == []


def test_resolve_keep_takes_the_start_of_a_machine_id_when_only_one_machine_has_it(fleet: Fleet) -> None:
    machines, note = fleet.one_line_edited_everywhere(("server-61ef", "server-7c3d", "laptop-1a2b"))
    for m in machines:
        m.sync()
    laptop = machines[2]
    proc = laptop.cli("resolve", note.id, "--keep", "server")  # two machines' ids start so
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "server-61ef, server-7c3d" in proc.stderr, proc.stderr
    assert "<<<<<<<" in laptop.read(note.path)  # nothing changed
    proc = laptop.cli("resolve", note.id, "--keep", "nobody")
    assert proc.returncode == 2 and "laptop-1a2b" in proc.stderr, proc.stderr  # the machines it has
    proc = laptop.cli("resolve", note.id, "--keep", "server-7")
    assert proc.returncode == 0, proc.stderr
    text = laptop.read(note.path)
    assert "middle from server-7c3d\n" in text and "from server-61ef" not in text and "<<<<<<<" not in text


def test_a_sync_with_many_conflicts_prints_a_bounded_report(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    for i in range(25):
        a.write(f"many/n{i:02d}.md", "---\ntitle: Many\n---\n\nline\n")
    a.sync()
    b.sync()
    for i in range(25):
        a.write(f"many/n{i:02d}.md", "---\ntitle: Many\n---\n\nline from a\n")
        b.write(f"many/n{i:02d}.md", "---\ntitle: Many\n---\n\nline from b\n")
    a.sync()
    proc = b.cli("sync")
    assert proc.returncode == 10
    assert proc.stdout.count("conflict in many/") == 9 and "16 more notes in conflict" in proc.stdout
    assert len(json.loads(b.cli("conflicts", "--json").stdout)) == 25


def test_memory_deleted_by_hand_is_explained_and_init_brings_the_notes_back(fleet: Fleet) -> None:
    import shutil

    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    note = create_note(a.store, type="semantic", title="Kept on the hub", body="safe\n")
    a.sync()
    shutil.rmtree(a.memory)
    proc = a.cli("sync")
    assert proc.returncode == 3 and "memory is missing" in proc.stderr and "anamnesis init" in proc.stderr
    proc = a.cli("init", "--no-claude", "--no-schedule")
    assert proc.returncode == 0, proc.stderr
    assert "safe" in a.read(note.path)
    assert a.cli("sync").returncode == 0


def test_resolve_takes_a_conflicted_text_file_that_is_not_a_note(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    config = '{\n  "theme": "dark",\n  "font": 12\n}\n'
    a.write(".obsidian/app.json", config)
    a.sync()
    b.sync()
    a.write(".obsidian/app.json", config.replace("dark", "light"))
    b.write(".obsidian/app.json", config.replace("dark", "solar"))
    a.sync()
    assert b.sync().conflicts == [".obsidian/app.json"]
    assert [c["path"] for c in json.loads(b.cli("conflicts", "--json").stdout)] == [".obsidian/app.json"]
    proc = b.cli("resolve", ".obsidian/app.json", "--ours")  # the path `conflicts` printed
    assert proc.returncode == 0, proc.stderr
    assert json.loads(b.read(".obsidian/app.json")) == {"theme": "solar", "font": 12}  # this machine's: b
    assert b.git("status", "--porcelain") == ""
    assert json.loads(b.cli("conflicts", "--json").stdout) == []


def test_conflicts_lists_a_binary_file_changed_on_both_sides(fleet: Fleet) -> None:
    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    picture = a.memory / "img" / "pic.png"
    picture.parent.mkdir()
    picture.write_bytes(b"\x89PNG\0base")
    a.sync()
    b.sync()
    picture.write_bytes(b"\x89PNG\0from a")
    (b.memory / "img" / "pic.png").write_bytes(b"\x89PNG\0from b")
    a.sync()
    assert b.sync().conflicts == ["img/pic.png"]
    listed = json.loads(b.cli("conflicts", "--json").stdout)
    assert listed == [{"path": "img/pic.png", "title": "img/pic.png", "blocks": [], "other_version": "img/pic.png.b.conflict"}]
    kept = {(b.memory / "img" / "pic.png").read_bytes(), (b.memory / "img" / "pic.png.b.conflict").read_bytes()}
    assert kept == {b"\x89PNG\0from a", b"\x89PNG\0from b"}  # both versions, nothing lost
    proc = b.cli("conflicts")
    assert "img/pic.png.b.conflict" in proc.stdout
    (b.memory / "img" / "pic.png.b.conflict").unlink()
    b.sync()
    assert json.loads(b.cli("conflicts", "--json").stdout) == []


def _rendered_units(fleet: Fleet, kind: str) -> dict[str, str]:
    a = fleet.machines.get("a") or fleet.machine("a")
    proc = subprocess.run(
        [sys.executable, "-c",
         "import json,sys; from anamnesis.base.paths import open_store; from anamnesis.sync.schedule import schedule_plan as plan;"
         f"p = plan(open_store(sys.argv[1]), '7m', kind='{kind}');"
         "print(json.dumps({str(k): v for k, v in p.files.items()}))", str(a.home)],
        capture_output=True, text=True, env=a.env(), cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_systemd_units_pass_systemd_analyze_verify(fleet: Fleet, tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here (CI has it)")
    units = _rendered_units(fleet, "systemd")
    folder = tmp_path / "units"
    folder.mkdir()
    paths = []
    for path, text in units.items():
        target = folder / Path(path).name
        target.write_text(text)
        paths.append(str(target))
    assert any(p.endswith(".timer") for p in paths) and any(p.endswith(".service") for p in paths)
    proc = subprocess.run(["systemd-analyze", "verify", *paths], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Unknown" not in proc.stderr and "bad" not in proc.stderr.lower(), proc.stderr
    timer = next(t for p, t in units.items() if p.endswith(".timer"))
    assert "OnUnitActiveSec=420s" in timer


def test_launchd_plist_parses_with_plistlib(fleet: Fleet) -> None:
    units = _rendered_units(fleet, "launchd")
    (path, text), = units.items()
    assert path.endswith(".plist") and "/Library/LaunchAgents/" in path
    data = plistlib.loads(text.encode())
    assert data["StartInterval"] == 420
    assert data["ProgramArguments"][1:] == ["-P", "-m", "anamnesis", "sync", "--quiet", "--fail-after", "24h"]
    assert data["EnvironmentVariables"]["ANAMNESIS_HOME"] == str(fleet.machines["a"].home)
    assert re.fullmatch(r"anamnesis\.sync(\.[0-9a-f]{8})?", data["Label"])


def test_schedule_install_status_remove(fleet: Fleet) -> None:
    a = fleet.machine("a")
    proc = a.cli("schedule", "install", "--every", "10m", "--print")
    assert proc.returncode == 0 and "OnUnitActiveSec=600s" in proc.stdout
    config = Path(a.env()["XDG_CONFIG_HOME"])
    assert not config.exists()  # --print writes nothing
    proc = a.cli("schedule", "install", "--every", "10m", "--no-enable", "--json")
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)["written"]
    assert all(Path(p).is_relative_to(config / "systemd" / "user") for p in written) and len(written) == 2
    info = json.loads(a.cli("schedule", "status", "--json").stdout)
    assert info["installed"] is True and info["every"] == "10m"
    for key in ("enabled", "active"):  # systemctl's answer as a whole line, wherever systemctl exists
        assert key not in info or len(info[key]) > 1, info
    assert a.cli("schedule", "install", "--every", "5s").returncode == 2
    proc = a.cli("schedule", "remove", "--no-enable", "--json")
    assert sorted(json.loads(proc.stdout)["removed"]) == sorted(written)
    assert json.loads(a.cli("schedule", "status", "--json").stdout)["installed"] is False
    assert not config.exists()  # the folders installing made (empty now) went with the files
    # A folder that was there before installing stays, and so does one holding something else.
    (config / "systemd" / "user").mkdir(parents=True)
    (config / "other.conf").write_text("mine\n")
    assert a.cli("schedule", "install", "--no-enable").returncode == 0
    assert a.cli("schedule", "remove", "--no-enable").returncode == 0
    assert (config / "systemd" / "user").is_dir() and (config / "other.conf").read_text() == "mine\n"


@pytest.mark.e2e
def test_demo_runs_and_cleans_up(tmp_path: Path) -> None:
    import os

    env = dict(os.environ, TMPDIR=str(tmp_path), ANAMNESIS_HOME=str(tmp_path / "untouched"), COLUMNS="100")
    proc = subprocess.run(
        [sys.executable, "-m", "anamnesis", "demo"], capture_output=True, text=True, env=env, timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for expected in ("laptop", "desktop", "server", "conflict recorded", "<<<<<<<", "resolve", "done in"):
        assert expected in out, expected
    assert list(tmp_path.iterdir()) == []  # the temporary machines are gone, the user's store never made


def test_peers_add_warns_of_a_second_name_for_a_peer_already_there(fleet: Fleet) -> None:
    a = fleet.machine("a")
    hub = fleet.hub()
    assert a.cli("peers", "add", "hub", str(hub)).returncode == 0
    again = a.cli("peers", "add", "hub2", f"file://{hub}/")
    flat = " ".join(again.stdout.split())
    assert again.returncode == 0 and "peer hub is that same store already" in flat, flat
    other = a.cli("peers", "add", "other", str(fleet.hub("other")))
    assert "same store" not in other.stdout, other.stdout
