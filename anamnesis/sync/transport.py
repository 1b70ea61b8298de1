"""How sync reaches a peer: the `Transport` interface, and `GitTransport`, its git implementation.

Sync (`sync.py`) decides what to integrate and when to push again; a
transport only moves commits: `fetch` brings a peer's branches into
refs/anamnesis/peers/<peer>/* of memory/, `push` offers our main to the peer.
A transport of another kind (a hub over HTTPS, a bundle on a USB stick) is
one new module with these two methods, chosen in `transport_for`.

`GitTransport` covers every URL git understands (local paths, ssh, file://):
a bare hub takes our main; another machine's store, whose main is checked
out, takes refs/anamnesis/incoming/<our machine> instead, which it
integrates on its own next sync.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from anamnesis.base import refs
from anamnesis.base.errors import GitError, LockTimeout
from anamnesis.base.git import Failure, GitTimeout, explain, run_git, user_ssh_command
from anamnesis.base.lock import file_lock
from anamnesis.sync.peers import Peer, PeerKind, lock_hint, push_lock_path, reach_failure, remove_left_lock

FETCH_TIMEOUT = 120.0

PushStatus = Literal["ok", "checked-out", "rejected", "locked", "refused", "failed"]
"""ok: the peer took it; checked-out: its main is checked out (a machine's store: push to an incoming
ref instead); rejected: it moved on since we fetched (fetch, integrate, push again); locked: a ref
there is locked (the reason names the lock file); refused: it said no for another reason; failed: not
reached."""


class FetchFailed(GitError):
    """A peer could not be fetched from; `failure` says why (ssh's or git's own words) and what to do,
    `said` is all git said (where a fault of this machine shows: a fetch writes only here)."""

    def __init__(self, failure: Failure, said: str = "") -> None:
        self.failure = failure
        self.said = said
        super().__init__(f"git fetch failed: {failure.text}", command="git fetch", reason=failure.reason, stderr=said)


@dataclass(frozen=True)
class Pushed:
    """What one push did: its status, why (the peer's or git's words), and the ref written there."""

    status: PushStatus
    failure: Failure
    target: str = ""  # the ref the peer now has our main in (with status "ok")
    cleared: str = ""  # a lock file a killed git had left in the peer, removed before this push

    @property
    def to_main(self) -> bool:
        """Whether the peer took our main as its own main (a hub)."""
        return self.target == refs.MAIN


@runtime_checkable
class Transport(Protocol):
    """Moves commits between memory/ and one kind of peer."""

    def fetch(self, peer: Peer) -> str | None:
        """Bring the peer's branches into refs/anamnesis/peers/<peer>/*; its main, or None (empty peer).

        Raises FetchFailed when the peer cannot be reached.
        """
        ...

    def push(self, peer: Peer, kind: PeerKind, machine: str, head: str) -> Pushed:
        """Offer `head` (our main) to the peer, never forced; `kind` is what sync knows of the peer."""
        ...

    def lock_hint(self, peer: Peer, lock: str) -> str:
        """What to do about `lock`, a lock file at the peer that made a push fail."""
        ...


class GitTransport:
    """`Transport` over git itself: local paths, ssh and file:// URLs, hubs and machines' stores."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    def fetch(self, peer: Peer) -> str | None:
        """`git fetch`, bounded in time (git.network_timeout) and stopped with its ssh when the bound passes."""
        try:
            proc = run_git(
                self.repo,
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-auto-gc",
                peer.url,
                refs.peer_fetch_spec(peer.name),
                timeout=FETCH_TIMEOUT,
                check=False,
            )
        except GitTimeout as exc:
            raise FetchFailed(reach_failure("", peer.url, user_ssh_command(self.repo), stopped=str(exc))) from None
        if proc.returncode != 0:
            said = proc.stderr or proc.stdout
            raise FetchFailed(reach_failure(said, peer.url, user_ssh_command(self.repo)), said)
        found = run_git(self.repo, "rev-parse", "--verify", "-q", f"{refs.peer_main(peer.name)}^{{commit}}", check=False)
        return found.stdout.strip() or None

    def push(self, peer: Peer, kind: PeerKind, machine: str, head: str) -> Pushed:
        """A hub gets our main; a machine's store our incoming ref there, or, when that ref cannot move
        forward (history rewritten by hand), a new one named after `head`."""
        if kind != "machine":
            return self._push_ref(peer, refs.MAIN)  # "checked-out": it is a machine's store after all
        pushed = self._push_ref(peer, refs.incoming(machine))
        if pushed.status == "rejected":
            pushed = self._push_ref(peer, refs.incoming(machine, head[:12]))
            if pushed.status in ("ok", "rejected", "refused"):
                return pushed
            return Pushed("failed", pushed.failure)
        if pushed.status == "checked-out":  # an incoming ref is never checked out: not a store we know
            return Pushed("failed", pushed.failure)
        return pushed

    def lock_hint(self, peer: Peer, lock: str) -> str:
        """See `peers.lock_hint`."""
        return lock_hint(peer.url, lock)

    def _push_ref(self, peer: Peer, target: str) -> Pushed:
        """One push, holding the peer's push lock when it is on a local path; a lock file a killed
        git left there is removed and the push tried again (see `peers.remove_left_lock`)."""
        lock_path = push_lock_path(peer.url)
        with ExitStack() as held:
            if lock_path is not None:
                try:
                    held.enter_context(
                        file_lock(lock_path, f"push to {target}", FETCH_TIMEOUT, busy=f"peer {peer.name} is busy")
                    )
                except LockTimeout as exc:
                    return Pushed("failed", Failure(str(exc)))
                except OSError:  # not ours to write in: the push says why, in git's words
                    lock_path = None
            pushed = self._push_once(peer, target)
            if pushed.status == "locked" and lock_path is not None and remove_left_lock(peer.url, pushed.failure.lock):
                return replace(self._push_once(peer, target), cleared=pushed.failure.lock)
            return pushed

    def _push_once(self, peer: Peer, target: str) -> Pushed:
        """`git push --porcelain` of our main to `target` on the peer, its answer read line by line.

        "locked": a ref there is locked (git's "cannot lock ref ... File
        exists"); the reason names the lock file.
        """
        try:
            proc = run_git(
                self.repo, "push", "--porcelain", "--no-verify", peer.url, f"{refs.MAIN}:{target}", check=False,
                timeout=FETCH_TIMEOUT,
            )
        except GitTimeout as exc:
            return Pushed("failed", reach_failure("", peer.url, user_ssh_command(self.repo), stopped=str(exc)))
        said = (proc.stderr or "") + "\n" + (proc.stdout or "")
        # The porcelain lines' summaries are git's own words, the only account it gives of a refused
        # ref: read by necessity here, and passed on as a status, never as text to match again.
        for line in proc.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and parts[1].endswith(f":{target}"):
                flag, summary = parts[0], parts[2]
                if flag in (" ", "*", "=", "+"):
                    return Pushed("ok", Failure(summary), target)
                if "checked out" in summary or "current branch" in summary:
                    return Pushed("checked-out", Failure(summary))
                failure = explain(said, peer.url)
                if failure.lock:
                    return Pushed("locked", failure)
                if summary.startswith("[rejected]") or "cannot lock ref" in summary or "failed to update ref" in summary:
                    return Pushed("rejected", Failure(summary))
                if failure.kind == "misconfigured":  # it says why (it cannot store what was sent): pass that on
                    return Pushed("refused", failure)
                return Pushed("refused", Failure(summary))
        failure = reach_failure(said, peer.url, user_ssh_command(self.repo))
        if failure.lock:
            return Pushed("locked", failure)
        return Pushed("failed", failure if failure.reason else Failure(f"git push exited {proc.returncode}"))


def transport_for(repo: Path, peer: Peer) -> Transport:
    """The transport that reaches `peer` from memory/ at `repo` (git, for every URL today)."""
    return GitTransport(repo)
