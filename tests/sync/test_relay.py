"""The first machine is a relay: the others push into it, and it integrates what arrives by itself.

Machines that have this one as their peer push to refs/anamnesis/incoming/<machine>
here. A sync with no peers of its own still integrates that work; `status`,
`peers list`, `doctor` and the dashboard's fleet page show those machines and
the work that waits; `watch` integrates a push within seconds; `init` on the
first machine offers the timer and prints the command for the others.
"""

from __future__ import annotations

import getpass
import html
import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from fleet import ROOT, Fleet, Machine, fleet  # noqa: F401
from procs import run_anamnesis
from web_support import dashboard

from anamnesis.search.engine import search as search_notes
from anamnesis.search.index import open_index
from anamnesis.store.operations import create_note
from anamnesis.sync.engine import join
from anamnesis.sync.watch import Watcher, WatchOptions

pytestmark = pytest.mark.timeout(120)


def relay(fleet: Fleet) -> tuple[Machine, Machine, str]:
    """desktop (no peers) and laptop (peer: desktop's store); laptop's note pushed into desktop."""
    desktop = fleet.machine("desktop")
    laptop = fleet.machine("laptop", {"desktop": fleet.url(desktop)})
    note = create_note(laptop.store, type="semantic", title="Relayed", body="written on the laptop: quokka\n")
    result = laptop.sync()
    assert result.exit_code == 0 and result.sent >= 1, result.to_dict()
    assert desktop.git("for-each-ref", "--format=%(refname)", "refs/anamnesis/incoming/") == (
        "refs/anamnesis/incoming/laptop"
    )
    assert not (desktop.memory / note.path).exists()  # waiting, not integrated yet
    return desktop, laptop, note.path


def found(machine: Machine, word: str) -> list[str]:
    with open_index(machine.store) as index:
        return [hit.path for hit in search_notes(index, word)]


def test_sync_with_no_peers_integrates_what_was_pushed_here(fleet: Fleet) -> None:
    desktop, _laptop, path = relay(fleet)
    proc = desktop.cli("sync")
    assert proc.returncode == 0, proc.stderr
    assert "no peers yet" not in proc.stdout
    waiting = desktop.git("rev-list", "--count", "refs/anamnesis/incoming/laptop", "^HEAD@{1}")
    assert f"laptop (pushes here): integrated {waiting} commits" in proc.stdout, proc.stdout
    assert (desktop.memory / path).exists() and found(desktop, "quokka") == [path]
    again = desktop.cli("sync", "--json")
    assert json.loads(again.stdout)["incoming"] == [{"machine": "laptop", "ref": "incoming/laptop", "received": 0}]
    quiet = desktop.cli("sync")
    assert "no peers yet" not in quiet.stdout and "pushed here by laptop: nothing new" in quiet.stdout, quiet.stdout


def test_status_peers_list_and_doctor_show_the_machines_that_push_here(fleet: Fleet) -> None:
    desktop, _laptop, _path = relay(fleet)
    waiting = int(desktop.git("rev-list", "--count", "refs/anamnesis/incoming/laptop", "^HEAD"))
    assert waiting >= 2  # the laptop's note and its merge with desktop's history
    status = json.loads(desktop.cli("status", "--json").stdout)
    assert [(m["machine"], m["refs"], m["waiting"]) for m in status["pushes_here"]] == [
        ("laptop", ["incoming/laptop"], waiting)
    ]
    text = " ".join(desktop.cli("status").stdout.split())  # as one line: the table wraps at 80 columns
    assert "none (local only)" not in text
    assert "pushes here" in text and "laptop" in text and f"{waiting} commits waiting to be integrated" in text, text
    listed = json.loads(desktop.cli("peers", "list", "--json").stdout)
    assert [(p["name"], p["kind"], p["configured"], p["waiting"]) for p in listed] == [
        ("laptop", "incoming", False, waiting)
    ]
    plain = " ".join(desktop.cli("peers", "list").stdout.split())
    assert "machines that push here" in plain and "laptop" in plain and "no peers yet" not in plain, plain
    doctor = desktop.cli("doctor", "--json")
    assert doctor.returncode == 1
    (finding,) = [f for f in json.loads(doctor.stdout)["findings"] if "pushed here" in f["problem"]]
    assert f"laptop ({waiting})" in finding["problem"] and "schedule install" in finding["fix"]
    # A timer that runs integrates it by itself: nothing to warn about. Its files alone (never
    # enabled, no user session to run it in) sync nothing: doctor and status say so.
    assert desktop.cli("schedule", "install", "--no-enable").returncode == 0
    for state, running in (("active", True), ("inactive", False)):
        path = fake_systemctl(fleet.root / f"systemctl-{state}", state)
        findings = json.loads(cli_with(desktop, "doctor", "--json", PATH=path).stdout)["findings"]
        assert bool([f for f in findings if "pushed here" in f["problem"]]) is not running, (state, findings)
        timer = [f for f in findings if f["where"] == "the sync timer"]
        assert bool(timer) is not running and (running or "enable-linger" in timer[0]["fix"]), findings
        status = json.loads(cli_with(desktop, "status", "--json", PATH=path).stdout)
        assert status["schedule"] == ("installed" if running else "not running"), status
    assert desktop.cli("schedule", "remove", "--no-enable").returncode == 0
    # Integrated: shown, with nothing waiting, and no finding.
    assert desktop.cli("sync").returncode == 0
    listed = json.loads(desktop.cli("peers", "list", "--json").stdout)
    assert [(p["name"], p["waiting"]) for p in listed] == [("laptop", 0)]
    assert not [f for f in json.loads(desktop.cli("doctor", "--json").stdout)["findings"] if "pushed here" in f["problem"]]


def test_a_machine_with_peers_lists_them_and_the_machines_that_push_here(fleet: Fleet) -> None:
    desktop, laptop, _path = relay(fleet)
    hub = fleet.hub()
    fleet.add_peer(desktop, "hub", fleet.url(hub))
    assert desktop.sync().exit_code == 0
    listed = json.loads(desktop.cli("peers", "list", "--json").stdout)
    assert [(p["name"], p["configured"]) for p in listed] == [("hub", True), ("laptop", False)]
    assert json.loads(laptop.cli("peers", "list", "--json").stdout)[0]["configured"] is True


def test_watch_integrates_a_push_within_seconds(fleet: Fleet) -> None:
    desktop = fleet.machine("desktop")
    laptop = fleet.machine("laptop", {"desktop": fleet.url(desktop)})
    options = WatchOptions(quiet=0.3, max_delay=2.0, interval=3600.0, discovery=False, beat=0.5)
    watcher = Watcher(desktop.store, options=options)
    watcher.start()
    try:
        first = watcher.syncs
        note = create_note(laptop.store, type="semantic", title="Pushed", body="arrives by itself: wombat\n")
        assert laptop.sync().exit_code == 0
        pushed = time.monotonic()
        deadline = pushed + 20
        while not (desktop.memory / note.path).exists():
            assert time.monotonic() < deadline, f"not integrated after 20 s ({watcher.last_result}, {watcher.last_error})"
            time.sleep(0.05)
        took = time.monotonic() - pushed
    finally:
        watcher.stop()
    assert watcher.syncs > first and "refs/anamnesis/incoming" in watcher.last_reason, watcher.last_reason
    assert took < 10, took
    print(f"a push integrated by watch {took:.2f} s after it arrived")
    assert found(desktop, "wombat") == [note.path]


def cli_with(machine: Machine, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `anamnesis ARGS` as `machine`, with `env` on top of its environment."""
    return run_anamnesis(args, machine.env(**env), cwd=ROOT)


def fake_systemctl(folder: Path, state: str) -> str:
    """A `systemctl` on PATH that says every user unit is `state` (no service manager is touched)."""
    folder.mkdir()
    script = folder / "systemctl"
    script.write_text(f"#!/bin/sh\necho {state}\n[ {state} = active ]\n")
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def fake_tailscale(folder: Path, dns_name: str) -> str:
    """A `tailscale` on PATH answering `status --json` as a running tailnet would (the CLI is not installed here)."""
    folder.mkdir()
    script = folder / "tailscale"
    status = {"BackendState": "Running", "Self": {"DNSName": dns_name + ".", "HostName": "desk"}, "Peer": {}}
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(status)}\nEOF\n")
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


@pytest.mark.parametrize("tailnet", [False, True])
def test_init_on_the_first_machine_offers_the_timer_and_says_what_the_others_run(
    fleet: Fleet, tmp_path: Path, tailnet: bool
) -> None:
    user = tmp_path / "user"
    home = user / ".anamnesis"
    desktop = Machine("desktop", home)
    env = {"HOME": str(user)}
    if tailnet:
        env["PATH"] = fake_tailscale(tmp_path / "bin", "desktop.tail1234.ts.net")
    proc = cli_with(desktop, "init", "--no-claude", "--json", **env)
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)["done"]
    assert any("anamnesis schedule install" in line for line in done), done  # offered, not installed: no terminal
    host = "desktop.tail1234.ts.net" if tailnet else socket.gethostname()
    user = getpass.getuser()  # named: the other machine's user may be another
    assert any(f"on your other machines, run: anamnesis init --peer {user}@{host}:.anamnesis/memory" in line for line in done), done
    # Asked for the timer: installed (written here, not activated: no service manager is touched).
    again = cli_with(desktop, "init", "--no-claude", "--schedule", "--no-enable", "--json", **env)
    assert again.returncode == 0, again.stderr
    units = Path(desktop.env()["XDG_CONFIG_HOME"]) / "systemd" / "user"
    assert sorted(p.suffix for p in units.iterdir()) == [".service", ".timer"]


def test_a_joining_machine_is_not_told_to_be_joined(fleet: Fleet) -> None:
    desktop = fleet.machine("desktop")
    laptop = Machine("laptop", fleet.root / "laptop")
    proc = laptop.cli("init", "--no-claude", "--no-schedule", "--peer", fleet.url(desktop), "--json")
    assert proc.returncode == 0, proc.stderr
    assert not any("on your other machines" in line for line in json.loads(proc.stdout)["done"])


def fleet_rows(page: str) -> dict[str, str]:
    """The fleet table's rows by machine: the row's HTML."""
    rows = re.findall(r'<tr><td><span class="machine-dot"></span><code>([^<]+)</code>(.*?)</tr>', page, re.S)
    return {machine: row for machine, row in rows}


def chips(row: str) -> list[str]:
    return [html.unescape(chip) for chip in re.findall(r'<code class="chip"[^>]*>([^<]+)</code>', row)]


def test_the_fleet_page_shows_who_pushes_where(fleet: Fleet) -> None:
    desktop, laptop, _path = relay(fleet)
    server = fleet.machine("server")
    join(server.store, fleet.url(desktop), "desktop")  # takes desktop's history: no merge of its own
    create_note(server.store, type="semantic", title="From the server", body="x\n")
    assert server.sync().exit_code == 0
    with dashboard(desktop.home) as running, httpx.Client(
        base_url=running.base, cookies={f"anamnesis_{running.port}": running.token}, timeout=30
    ) as http:
        page = http.get("/fleet").text
        assert "No peers configured (<code>anamnesis peers add" not in page
        assert "No peers configured: this machine syncs only with the machines that push here" in page
        pushers = page.split('id="pushers"', 1)[1].split("</table>", 1)[0]
        assert "<code>laptop</code>" in pushers and "<code>server</code>" in pushers
        assert pushers.count("waiting</span>") == 2
        assert desktop.sync().exit_code == 0  # merges incoming/server: the history now names it
        page = http.get("/fleet").text
        rows = fleet_rows(page)
        assert chips(rows["desktop"]) == ["← laptop", "← server"]  # never "server" as if it were a peer
        assert chips(rows["laptop"]) == ["desktop"]  # its merge of desktop's history names it
        assert chips(rows["server"]) == ["→ desktop"]  # no merge of its own: known by what it pushes here
        assert "all integrated" in page and "waiting</span>" not in page
    # The laptop's view of the server: from desktop's merge of what the server pushed there.
    assert laptop.sync().exit_code == 0
    with dashboard(laptop.home) as running, httpx.Client(
        base_url=running.base, cookies={f"anamnesis_{running.port}": running.token}, timeout=30
    ) as http:
        rows = fleet_rows(http.get("/fleet").text)
    assert chips(rows["laptop"]) == ["desktop"]
    # desktop merged what the server pushed there: the laptop learns who pushes where from that merge.
    assert chips(rows["server"]) == ["→ desktop"] and chips(rows["desktop"]) == ["← server"], rows


def test_doctor_on_the_pushing_machine_says_when_its_peer_never_takes_in_what_it_pushed(fleet: Fleet) -> None:
    desktop, laptop, _path = relay(fleet)
    state_file = laptop.home / "state" / "peers.json"
    state = json.loads(state_file.read_text())
    assert state["desktop"]["kind"] == "machine" and state["desktop"]["last_push"]
    assert laptop.sync().exit_code == 0  # desktop's main fetched again: an hour later, say
    assert not [f for f in json.loads(laptop.cli("doctor", "--json").stdout)["findings"] if "pushed there" in f["problem"]]
    state = json.loads(state_file.read_text())
    state["desktop"]["last_push"] = "2020-01-01T00:00:00Z"  # the push was long before that fetch
    state_file.write_text(json.dumps(state))
    doctor = laptop.cli("doctor", "--json")
    (finding,) = [f for f in json.loads(doctor.stdout)["findings"] if "pushed there" in f["problem"]]
    assert finding["where"].startswith("peer desktop") and "on desktop: `anamnesis schedule install`" in finding["fix"]
    assert doctor.returncode == 1
    assert desktop.sync().exit_code == 0 and laptop.sync().exit_code == 0  # desktop took it in; the laptop sees it
    assert not [f for f in json.loads(laptop.cli("doctor", "--json").stdout)["findings"] if "pushed there" in f["problem"]]


def test_removing_a_timer_that_never_ran_says_so_and_warns_of_nothing(fleet: Fleet) -> None:
    desk = fleet.machine("desk")
    assert desk.cli("schedule", "install", "--no-enable").returncode == 0
    path = fake_systemctl(fleet.root / "systemctl-inactive", "inactive")
    removed = cli_with(desk, "schedule", "remove", PATH=path)
    assert removed.returncode == 0 and "it was not running" in removed.stdout, removed.stdout
    assert "could not deactivate" not in removed.stdout, removed.stdout
