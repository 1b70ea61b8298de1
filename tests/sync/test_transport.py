"""GitTransport, the first implementation of sync's `Transport`: fetch and push against real git repos.

A bare hub takes our main; another machine's store (its main checked out)
refuses it, and takes our incoming ref instead; a peer that moved on rejects
the push; a path that is no repository fails to fetch with git's reason.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from anamnesis.base import refs
from anamnesis.base.git import git_out
from anamnesis.base.paths import Store
from anamnesis.store.operations import create_note
from anamnesis.sync.peers import Peer
from anamnesis.sync.transport import FetchFailed, GitTransport, Transport, transport_for


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _bare(tmp_path: Path, name: str = "hub.git") -> Path:
    hub = tmp_path / name
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)
    return hub


def _machine(tmp_path: Path) -> Path:
    """Another machine's store: a repo with main checked out and a commit of its own."""
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", "-b", "main", str(other)], check=True)
    (other / "note.md").write_text("theirs\n", encoding="utf-8")
    _git(other, "add", "-A")
    _git(other, "-c", "user.name=o", "-c", "user.email=o@o.invalid", "commit", "-q", "-m", "theirs")
    return other


def test_git_is_the_transport_for_paths_and_ssh(store: Store) -> None:
    for url in ("/srv/memory.git", "host.example:memory", "ssh://host:2222/memory.git", "file:///srv/m.git"):
        chosen = transport_for(store.memory, Peer("p", url))
        assert isinstance(chosen, GitTransport)
        assert isinstance(chosen, Transport)  # the protocol's methods, all there


def test_a_bare_hub_takes_our_main_and_gives_it_back(store: Store, tmp_path: Path) -> None:
    create_note(store, type="semantic", title="Shared", body="body")
    hub = Peer("hub", str(_bare(tmp_path)))
    transport = GitTransport(store.memory)
    assert transport.fetch(hub) is None  # an empty hub: nothing to integrate
    head = git_out(store.memory, "rev-parse", "HEAD")
    pushed = transport.push(hub, "", "laptop", head)
    assert (pushed.status, pushed.target, pushed.to_main) == ("ok", refs.MAIN, True)
    assert _git(Path(hub.url), "rev-parse", "main") == head
    assert transport.fetch(hub) == head
    assert git_out(store.memory, "rev-parse", refs.peer_main("hub")) == head


def test_a_hub_that_moved_on_rejects_the_push(store: Store, tmp_path: Path) -> None:
    hub = Peer("hub", str(_bare(tmp_path)))
    transport = GitTransport(store.memory)
    first = git_out(store.memory, "rev-parse", "HEAD")
    assert transport.push(hub, "", "laptop", first).status == "ok"
    elsewhere = tmp_path / "elsewhere"
    subprocess.run(["git", "clone", "-q", hub.url, str(elsewhere)], check=True)
    (elsewhere / "x.md").write_text("x\n", encoding="utf-8")
    _git(elsewhere, "add", "-A")
    _git(elsewhere, "-c", "user.name=e", "-c", "user.email=e@e.invalid", "commit", "-q", "-m", "x")
    _git(elsewhere, "push", "-q", "origin", "main")
    create_note(store, type="semantic", title="Mine", body="body")
    pushed = transport.push(hub, "hub", "laptop", git_out(store.memory, "rev-parse", "HEAD"))
    assert pushed.status == "rejected", pushed
    assert pushed.target == ""


def test_a_machines_store_refuses_main_and_takes_an_incoming_ref(store: Store, tmp_path: Path) -> None:
    clone = tmp_path / "clone"  # another machine that joined this memory: main checked out
    subprocess.run(["git", "clone", "-q", str(store.memory), str(clone)], check=True)
    other = Peer("other", str(clone))
    create_note(store, type="semantic", title="New here", body="body")
    transport = GitTransport(store.memory)
    head = git_out(store.memory, "rev-parse", "HEAD")
    assert transport.push(other, "", "my laptop", head).status == "checked-out"
    pushed = transport.push(other, "machine", "my laptop", head)
    assert (pushed.status, pushed.target, pushed.to_main) == ("ok", "refs/anamnesis/incoming/my-laptop", False)
    assert _git(clone, "rev-parse", "refs/anamnesis/incoming/my-laptop") == head
    assert _git(clone, "rev-parse", "main") != head  # its main is its own to move


def test_an_incoming_ref_that_cannot_move_forward_gets_a_new_name(store: Store, tmp_path: Path) -> None:
    other_repo = _machine(tmp_path)
    other = Peer("other", str(other_repo))
    transport = GitTransport(store.memory)
    theirs = _git(other_repo, "rev-parse", "main")
    _git(other_repo, "update-ref", refs.incoming("laptop"), theirs)  # unrelated to ours: not a fast-forward
    head = git_out(store.memory, "rev-parse", "HEAD")
    pushed = transport.push(other, "machine", "laptop", head)
    assert (pushed.status, pushed.target) == ("ok", refs.incoming("laptop", head[:12]))
    assert _git(other_repo, "rev-parse", refs.incoming("laptop")) == theirs  # never forced


def test_a_path_that_is_no_repository_fails_to_fetch_with_gits_reason(store: Store, tmp_path: Path) -> None:
    missing = Peer("gone", str(tmp_path / "nothing-here"))
    with pytest.raises(FetchFailed) as caught:
        GitTransport(store.memory).fetch(missing)
    reason = caught.value.failure.reason
    assert "nothing-here" in reason and "does not appear to be a git repository" in reason, reason  # git's words
    assert str(caught.value).startswith("git fetch failed: ")
