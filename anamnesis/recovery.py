"""Getting memory/ back to a state sync can work on, or refusing with instructions.

A sync killed at any point (SIGKILL, power cut of the process, a closed
laptop) may leave: git lock files (`index.lock`, `refs/.../main.lock`), a git
child still running after its parent died, or a working tree half moved to a
new commit. The next sync repairs those before doing anything, because it
can tell them apart from a person's own work:

- lock files are removed only when no git process is working in the repo
  (an orphaned git child is waited for instead);
- a half-done checkout is finished from the marker sync wrote before it
  started (state/sync-checkout.json), keeping any edit made meanwhile;
- a rebase, merge, cherry-pick, revert or bisect in progress is never ours
  (sync never starts one), so sync refuses and says how to get out of it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from anamnesis.errors import AnamnesisError, LockTimeout
from anamnesis.fsutil import atomic_write_bytes, atomic_write_text
from anamnesis.git import git_out, run_git, run_git_bytes
from anamnesis.paths import Store

CHECKOUT_MARKER = "sync-checkout.json"
RUNNING_MARKER = "sync-running.json"
_LOCK_NAMES = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock")


class SyncRefused(AnamnesisError):
    """The repo is in a state a person started (mid-rebase, detached HEAD...): sync will not touch it."""

    exit_code = 12


def wedged(store: Store) -> str | None:
    """Why sync must not touch memory/ right now, with how to get out of it; None if fine."""
    repo = store.memory
    git_dir = repo / ".git"
    where = f"git -C {repo}"
    checks = (
        (("rebase-merge", "rebase-apply"), "a rebase", f"finish it with `{where} rebase --continue` or undo it with `{where} rebase --abort`"),
        (("MERGE_HEAD",), "a merge", f"finish it with `{where} commit` or undo it with `{where} merge --abort`"),
        (("CHERRY_PICK_HEAD",), "a cherry-pick", f"finish it with `{where} cherry-pick --continue` or undo it with `{where} cherry-pick --abort`"),
        (("REVERT_HEAD",), "a revert", f"finish it with `{where} revert --continue` or undo it with `{where} revert --abort`"),
        (("BISECT_LOG",), "a bisect", f"end it with `{where} bisect reset`"),
    )
    for names, what, how in checks:
        if any((git_dir / name).exists() for name in names):
            return (
                f"{repo} is in the middle of {what} started outside anamnesis; "
                f"{how}, then run `anamnesis sync` again (nothing was changed)"
            )
    branch = run_git(repo, "symbolic-ref", "-q", "HEAD", check=False).stdout.strip()
    if branch != "refs/heads/main":
        now = branch.removeprefix("refs/heads/") or "a detached HEAD"
        return (
            f"{repo} has {now} checked out, but notes live on branch main; "
            f"run `{where} checkout main` (commit or stash your work first), then `anamnesis sync` again"
        )
    return None


# -- git processes and stale lock files ---------------------------------------------


def lock_files(repo: Path) -> list[Path]:
    """Git lock files present in `repo` (index.lock, HEAD.lock, ref locks...)."""
    git_dir = repo / ".git"
    found = [git_dir / name for name in _LOCK_NAMES if (git_dir / name).exists()]
    refs = git_dir / "refs"
    if refs.is_dir():
        found.extend(refs.rglob("*.lock"))
    return found


def git_processes_in(repo: Path) -> list[int]:
    """Pids of git processes (other than us) working in `repo`, found via /proc or ps/lsof."""
    target = str(repo.resolve())
    if Path("/proc/self").is_dir():
        return _proc_git_processes(target)
    return _ps_git_processes(target)


def _inside(path: str, target: str) -> bool:
    return path == target or path.startswith(target + "/")


def _proc_git_processes(target: str) -> list[int]:
    found: list[int] = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        base = f"/proc/{entry.name}"
        try:
            with open(f"{base}/stat", "rb") as handle:
                stat = handle.read()
            comm = stat[stat.index(b"(") + 1 : stat.rindex(b")")]
            state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
            if not comm.startswith(b"git") or state in (b"Z", b"X"):
                continue
            cwd = os.readlink(f"{base}/cwd")
            with open(f"{base}/cmdline", "rb") as handle:
                cmdline = handle.read().decode("utf-8", "replace").split("\0")
        except (OSError, ValueError):
            continue
        if _inside(cwd, target) or any(_inside(arg, target) for arg in cmdline):
            found.append(int(entry.name))
    return found


def _ps_git_processes(target: str) -> list[int]:
    try:
        out = subprocess.run(["ps", "-Ao", "pid=,comm="], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    pids = [int(p) for p, _, comm in (line.strip().partition(" ") for line in out.splitlines())
            if p.isdigit() and Path(comm.strip()).name.startswith("git") and int(p) != os.getpid()]
    if not pids or shutil.which("lsof") is None:
        return pids  # cannot tell where they work: assume they may be ours
    found: list[int] = []
    for pid in pids:
        try:
            out = subprocess.run(
                ["lsof", "-a", "-p", str(pid), "-d", "cwd", "-Fn"], capture_output=True, text=True, timeout=10
            ).stdout
        except (OSError, subprocess.SubprocessError):
            found.append(pid)
            continue
        if any(_inside(line[1:], target) for line in out.splitlines() if line.startswith("n")):
            found.append(pid)
    return found


def settle_git(store: Store, timeout: float = 30.0) -> list[str]:
    """Wait for git processes left in memory/, then remove lock files nobody owns; what was removed."""
    repo = store.memory
    deadline = time.monotonic() + timeout
    while True:
        busy = git_processes_in(repo)
        if not busy:
            break
        if time.monotonic() >= deadline:
            raise LockTimeout(
                f"git process {', '.join(map(str, busy))} is still working in {repo}; try again when it is done"
            )
        time.sleep(0.05)
    removed: list[str] = []
    for lock in lock_files(repo):
        try:
            lock.unlink()
            removed.append(str(lock.relative_to(repo)))
        except FileNotFoundError:
            pass
    return removed


# -- markers: a sync in progress, a checkout in progress ------------------------------


def _marker(store: Store, name: str) -> Path:
    return store.state_dir / name


def read_marker(store: Store, name: str) -> dict[str, str] | None:
    """A marker's content, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads(_marker(store, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None if not _marker(store, name).exists() else {}
    return data if isinstance(data, dict) else {}


def write_marker(store: Store, name: str, data: dict[str, str]) -> None:
    """Record that an operation started (removed when it ends)."""
    atomic_write_text(_marker(store, name), json.dumps({**data, "pid": str(os.getpid())}) + "\n", mode=0o600)


def clear_marker(store: Store, name: str) -> None:
    """The operation ended: forget its marker."""
    try:
        _marker(store, name).unlink()
    except FileNotFoundError:
        pass


def finish_checkout(store: Store) -> str | None:
    """Complete a working-tree move a killed sync left half done; a description, or None."""
    marker = read_marker(store, CHECKOUT_MARKER)
    if marker is None:
        return None
    repo = store.memory
    orig, target = marker.get("orig", ""), marker.get("target", "")
    current = git_out(repo, "rev-parse", "--verify", "-q", "HEAD")
    note = None
    if orig and target and current == orig and _exists(repo, target):
        # Files first, then the branch: killed in between, the marker makes the next run redo it.
        fixed = _move_files(repo, orig, target)
        run_git(repo, "update-ref", "-m", "anamnesis sync: finish interrupted checkout", "refs/heads/main", target, orig)
        run_git(repo, "read-tree", target)
        note = f"finished an interrupted sync: moved to {target[:10]} ({fixed} files brought up to date)"
    clear_marker(store, CHECKOUT_MARKER)
    return note


def _exists(repo: Path, commit: str) -> bool:
    return run_git(repo, "cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode == 0


def _move_files(repo: Path, orig: str, target: str) -> int:
    """Bring files still as in `orig` to `target`; merge files edited meanwhile (nothing is lost)."""
    from anamnesis.conflicts import Side, merge_texts
    from anamnesis.repo import changed_paths
    from anamnesis.treemerge import TreeMerger

    paths = changed_paths(repo, orig, target)
    if not paths:
        return 0
    merger = TreeMerger(repo, repo / ".git" / "anamnesis-unused-index")
    old, new = merger.entries(orig, paths), merger.entries(target, paths)
    present = [p for p in paths if (repo / p).is_file() and not (repo / p).is_symlink()]
    hashes: dict[str, str] = {}
    if present:
        out = run_git_bytes(repo, "hash-object", "--stdin-paths", input="\n".join(present).encode())
        hashes = dict(zip(present, out.stdout.decode().split(), strict=True))
    fixed = 0
    for path in paths:
        now = hashes.get(path)
        want = new.get(path, ("", None))[1]
        was = old.get(path, ("", None))[1]
        full = repo / path
        if now == want:
            continue
        if now == was:
            if want is None:
                full.unlink(missing_ok=True)
            else:
                atomic_write_bytes(full, merger.blob(want))
        elif now is not None and want is not None:
            # Edited here while the killed sync ran: merge the edit with the incoming version.
            mine = full.read_bytes().decode("utf-8", "surrogateescape")
            base = merger.blob(was).decode("utf-8", "surrogateescape") if was else None
            incoming = merger.blob(want).decode("utf-8", "surrogateescape")
            merged = merge_texts(path, base, Side("edited here", mine), Side("incoming", incoming))
            atomic_write_bytes(full, merged.text.encode("utf-8", "surrogateescape"))
        elif now is None and want is not None:
            atomic_write_bytes(full, merger.blob(want))  # deleted here, edited there: the edit wins
        else:
            continue  # edited here, deleted there: the edit wins
        fixed += 1
    return fixed


def prepare(store: Store) -> list[str]:
    """Everything sync does before it starts: repair what a killed sync left, or refuse.

    Returns notes on what was repaired; raises SyncRefused for a repo a person
    left mid-operation.
    """
    notes: list[str] = []
    previous = read_marker(store, RUNNING_MARKER)
    if previous is not None or lock_files(store.memory):
        removed = settle_git(store)
        if removed:
            notes.append(f"removed stale git lock files: {', '.join(removed)}")
    for stale in store.state_dir.glob("merge-index-*"):
        stale.unlink(missing_ok=True)
    done = finish_checkout(store)
    if done:
        notes.append(done)
    reason = wedged(store)
    if reason:
        raise SyncRefused(reason)
    return notes
