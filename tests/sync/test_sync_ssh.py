"""Sync over real ssh: an sshd on 127.0.0.1 with throw-away keys, peers given as `host:path`."""

from __future__ import annotations

import json
import subprocess

from fleet import Fleet, SshServer, ssh_fleet, sshd  # noqa: F401

from anamnesis.base.notes import parse_note
from anamnesis.search.engine import search as search_notes
from anamnesis.search.index import open_index
from anamnesis.store.operations import create_note, update_note


def test_round_trip_through_a_hub_over_ssh(ssh_fleet: Fleet) -> None:
    hub = ssh_fleet.hub()
    url = ssh_fleet.url(hub, via="ssh")
    assert url.startswith("fleet-ssh:/")  # the scp-like form a Tailscale peer uses
    a = ssh_fleet.machine("a", {"hub": url})
    b = ssh_fleet.machine("b", {"hub": url})
    note = create_note(a.store, type="semantic", title="Over ssh", body="carried by sshd\n")
    assert a.sync().exit_code == 0
    result = b.sync()
    assert result.exit_code == 0 and note.path in result.changed
    with open_index(b.store) as index:
        assert [h.path for h in search_notes(index, "sshd")] == [note.path]
    # The same, through the real command in its own process.
    update_note(b.store, note.id, body="carried by sshd, edited on b\n")
    proc = b.cli("sync", "--json", real_process=True)
    assert proc.returncode == 0, proc.stderr
    proc = a.cli("sync", real_process=True)
    assert proc.returncode == 0, proc.stderr
    assert "edited on b" in a.read(note.path)


def test_mesh_with_ssh_and_path_peers_converges(ssh_fleet: Fleet) -> None:
    a = ssh_fleet.machine("a")
    b = ssh_fleet.machine("b")
    c = ssh_fleet.machine("c")
    ssh_fleet.add_peer(a, "b", ssh_fleet.url(b, via="ssh"))
    ssh_fleet.add_peer(a, "c", ssh_fleet.url(c))
    ssh_fleet.add_peer(b, "a", ssh_fleet.url(a, via="ssh"))
    ssh_fleet.add_peer(b, "c", ssh_fleet.url(c, via="ssh"))
    ssh_fleet.add_peer(c, "a", ssh_fleet.url(a))
    ssh_fleet.add_peer(c, "b", ssh_fleet.url(b))
    notes = [create_note(m.store, type="semantic", title=f"mesh {m.name}", body=f"from {m.name}\n") for m in (a, b, c)]
    for m in (a, b, c, a, b):
        assert m.sync().exit_code == 0
    assert a.tree() == b.tree() == c.tree()
    for m in (a, b, c):
        for note in notes:
            assert (m.memory / note.path).exists()


def test_unreachable_ssh_peer_is_skipped_with_exit_11(ssh_fleet: Fleet, sshd: SshServer) -> None:
    hub = ssh_fleet.hub()
    a = ssh_fleet.machine("a", {"hub": ssh_fleet.url(hub)})
    config = sshd.client_config.read_text().replace(f"Port {sshd.port}", "Port 1")
    closed = sshd.folder / "closed_config"
    closed.write_text(config)
    ssh_fleet.add_peer(a, "laptop", f"fleet-ssh:{hub}")
    a.ssh_command = f"ssh -F {closed}"
    create_note(a.store, type="semantic", title="Kept", body="x\n")
    result = a.sync()
    assert result.exit_code == 11
    laptop = next(p for p in result.peers if p.name == "laptop")
    assert laptop.status == "unreachable" and laptop.detail
    hub_files = subprocess.run(["git", "-C", str(hub), "ls-tree", "-r", "--name-only", "main"], capture_output=True, text=True)
    assert "kept" in hub_files.stdout  # the reachable peer still got everything


def test_init_peer_twice_on_one_host_keeps_both_peers_under_names_of_their_own(ssh_fleet: Fleet) -> None:
    # Two machines reached through one host name (three machines on one host here; two Tailscale
    # addresses 100.x alike): the second `init --peer` took the first peer's name and silently
    # pointed it at the second machine, so the first was never synced again.
    a, b, c = (ssh_fleet.machine(name) for name in "abc")
    create_note(a.store, type="semantic", title="From a", body="written on a\n")
    create_note(b.store, type="semantic", title="From b", body="written on b\n")
    for target in (a, b):
        proc = c.cli("init", "--peer", ssh_fleet.url(target, via="ssh"), "--no-claude", "--no-schedule")
        assert proc.returncode == 0, proc.stderr
        assert "no longer synced" not in proc.stdout, proc.stdout
    peers = {p["name"]: p["url"] for p in json.loads(c.cli("peers", "list", "--json").stdout)}
    assert sorted(peers.values()) == sorted(ssh_fleet.url(m, via="ssh") for m in (a, b)), peers
    assert c.sync().exit_code == 0
    titles = {parse_note(c.read(path), path).title for path in c.files()}
    assert {"From a", "From b"} <= titles
