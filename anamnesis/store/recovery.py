"""Getting memory/ back to a state sync can work on, or refusing with instructions.

A sync killed at any point (SIGKILL, power cut of the process, a closed
laptop) may leave: git lock files (`index.lock`, `refs/.../main.lock`), a git
child still running after its parent died, or a working tree half moved to a
new commit. The next sync repairs those before doing anything, because it
can tell them apart from a person's own work:

- lock files are removed only when no git process is working in the repo
  (an orphaned git child is waited for instead);
- a half-done checkout is finished from the marker sync wrote before it
  started (state/sync-checkout.json) and the two commits it names: a file
  holding the old version, the new one, nothing, or an empty or cut-short
  new version (git died writing it) is what git left, and is finished; only
  content git's checkout cannot produce is an edit made here, and is kept
  (text typed after what git cut short goes after the whole new version);
  Writers do the same before they write (`repair_or_refuse`, through
  `store.require_writable`), so a half-moved tree is never committed as
  edits;
- a rebase, merge, cherry-pick, revert or bisect in progress is never ours
  (sync never starts one), so sync refuses and says how to get out of it.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from anamnesis.base import refs
from anamnesis.base.errors import AnamnesisError, ExitCode
from anamnesis.base.fsutil import atomic_write_bytes, atomic_write_text
from anamnesis.base.git import (
    head_ref,
    lock_files,
    read_blobs,
    run_git,
    run_git_bytes,
    settle_git,
    tree_entries,
)
from anamnesis.base.notes import stated_id
from anamnesis.base.paths import Store
from anamnesis.base.repo import changed_paths
from anamnesis.base.text import plural
from anamnesis.search import open_index
from anamnesis.store.merge import Side, merge_texts

CHECKOUT_MARKER = "sync-checkout.json"
RUNNING_MARKER = "sync-running.json"


class SyncRefused(AnamnesisError):
    """The repo is in a state a person started (mid-rebase, detached HEAD...): sync will not touch it."""

    exit_code = ExitCode.REFUSED


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
    branch = head_ref(repo)
    if branch != refs.MAIN:
        now = branch.removeprefix("refs/heads/") or "a detached HEAD"
        return (
            f"{repo} has {now} checked out, but notes live on branch main; "
            f"run `{where} checkout main` (commit or stash your work first), then `anamnesis sync` again"
        )
    return None


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


def start_checkout(store: Store, orig: str, target: str) -> None:
    """Record, before git starts moving the working tree, where from and where to (and when)."""
    write_marker(store, CHECKOUT_MARKER, {"orig": orig, "target": target, "at": str(time.time_ns())})


def finish_checkout(
    store: Store, conflicts: list[str] | None = None, rewritten: list[str] | None = None
) -> str | None:
    """Complete a working-tree move a killed sync left half done; a description, or None.

    Notes that got conflict markers (an edit made here meanwhile that
    changed the same lines as the incoming version) are added to `conflicts`,
    and every file whose content this changed to `rewritten` (what anyone
    looked at before was a half-moved file: see `store.require_writable`).

    Works from the marker alone (the commits it names and the files on
    disk), never from git's index, which the killed git did not write. What
    each file the move had to write is taken for is decided by `survey`:
    what git's checkout can leave behind is finished, anything else is an
    edit made here and is kept (merged with the incoming version when it was
    made on the old one). With HEAD still where the move started, the files
    are brought to the target and the branch follows; with HEAD moved on
    since (a commit made by a program that did not finish the move first),
    the move is undone instead, so the half-moved files are not committed as
    edits, and the next integration brings the changes in again.
    """
    marker = read_marker(store, CHECKOUT_MARKER)
    if marker is None:
        return None
    repo = store.memory
    orig, target = marker.get("orig", ""), marker.get("target", "")
    head = run_git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).stdout.strip()
    note = None
    if orig and target and head and _exists(repo, orig) and _exists(repo, target):
        moving = head == orig
        goal = target if moving else head
        paths, changed, conflicted = _settle_files(repo, orig, target, goal, _since(marker))
        fixed = len(changed)
        if conflicts is not None:
            conflicts.extend(p for p in conflicted if p not in conflicts)
        if rewritten is not None:
            rewritten.extend(p for p in changed if p not in rewritten)
        if moving:
            # Files first, then the branch: killed in between, the marker makes the next run redo it.
            run_git(repo, "update-ref", "-m", "anamnesis sync: finish interrupted checkout", refs.MAIN, target, orig)
            if run_git(repo, "read-tree", "-m", orig, target, check=False).returncode != 0:
                run_git(repo, "read-tree", target)
            note = f"finished an interrupted sync: moved to {target[:10]} ({plural(fixed, 'file')} brought up to date)"
        elif fixed and goal == target:
            note = f"finished an interrupted sync: {plural(fixed, 'file')} its checkout left unfinished brought up to date"
        elif fixed:
            note = (
                f"finished an interrupted sync: {plural(fixed, 'file')} its checkout had half moved put back as in "
                f"{head[:10]} (committed on top of it meanwhile); this sync brings the changes in again"
            )
        _reindex(store, paths)
    clear_marker(store, CHECKOUT_MARKER)
    return note


def checkout_started(store: Store) -> bool:
    """Whether the checkout the marker describes had begun writing files (a failed git may have stopped half-way)."""
    marker = read_marker(store, CHECKOUT_MARKER) or {}
    orig, target = marker.get("orig", ""), marker.get("target", "")
    if not (orig and target):
        return False
    return any(f.state in ("new", "cut", "typed") for f in survey(store.memory, orig, target, _since(marker)))


def _exists(repo: Path, commit: str) -> bool:
    return run_git(repo, "cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode == 0


def _since(marker: dict[str, str]) -> int | None:
    """When the checkout started (ns), less a margin for coarse file-system clocks; None if unrecorded."""
    at = marker.get("at", "")
    return int(at) - CLOCK_SLACK_NS if at.isdigit() else None


def _reindex(store: Store, paths: list[str]) -> None:
    """The moved notes' index rows, now: writers do not run sync's index update."""
    if not paths:
        return

    with open_index(store) as index:
        index.refresh(paths)


# -- what a file a killed checkout had to write is now ---------------------------------


CLOCK_SLACK_NS = 2_000_000_000
_LINK, _FILE, _SUBMODULE = "120000", "100644", "160000"


FileKind = Literal["", "new", "old", "missing", "cut", "typed", "edited"]  # "": not surveyed yet


@dataclass
class FileState:
    """One path a checkout from `orig` to `target` had to write, and what is on disk there.

    `was` and `want` are (mode, blob id) in orig and target (None: absent);
    `disk` is (kind, blob id) of what is there now (None: nothing, or a
    folder); `state` is one of:

    - "new": as in target (git wrote it, or removed it, or the move is done);
    - "old": as in orig (git had not got there);
    - "missing": not there, though orig has it (git had removed it to write
      it again, or someone deleted it);
    - "cut": an empty file, or one that holds only the beginning of the
      target version, written after the checkout started: git died while
      writing it (git writes each file in one go, from the start);
    - "typed": a "cut" file someone then typed into, after what git wrote
      (`typed` holds what they added): the beginning of the target version
      explains the file with fewer changed lines than the orig or the whole
      target version does;
    - "edited": anything else, which git's checkout cannot leave: an edit.
    """

    path: str
    was: tuple[str, str] | None
    want: tuple[str, str] | None
    disk: tuple[str, str] | None
    state: FileKind = ""
    order: int = -1  # the position in which git's checkout writes it (-1: it only removes it)
    typed: bytes = b""  # "typed": what was added after the part git wrote


def _git_order(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def _kind(mode: str) -> str:
    return _LINK if mode == _LINK else _FILE


def survey(repo: Path, orig: str, target: str, since: int | None) -> list[FileState]:
    """What each path the checkout from `orig` to `target` had to write is now (see FileState)."""
    paths = changed_paths(repo, orig, target)
    if not paths:
        return []
    old, new = tree_entries(repo, orig, paths), tree_entries(repo, target, paths)
    disk, stats = _disk(repo, paths)
    files = [
        FileState(p, old.get(p), new.get(p), disk.get(p)) for p in paths
        if _SUBMODULE not in (old.get(p, ("", ""))[0], new.get(p, ("", ""))[0])  # git writes no bytes for those
    ]
    # git removes what target lacks first, then writes the rest one by one in index (byte) order.
    for position, f in enumerate(sorted((f for f in files if f.want), key=lambda f: _git_order(f.path))):
        f.order = position
    maybe_cut = {
        f.path: f.want[1] for f in files
        if f.disk and f.want and f.disk[0] == _FILE == _kind(f.want[0])
        and f.disk[1] not in (f.want[1], (f.was or ("", ""))[1])
        and (since is None or stats[f.path].st_mtime_ns >= since)  # an edit from before the checkout is no cut
    }
    blobs = read_blobs(repo, [*maybe_cut.values(), *(f.was[1] for f in files if f.path in maybe_cut and f.was)])
    written = {path: _bytes_of(repo / path) for path in maybe_cut}  # each read once, for both looks below
    for f in files:
        if f.disk is not None and f.want is not None and f.disk == (_kind(f.want[0]), f.want[1]):
            f.state = "new"
        elif f.disk is not None and f.was is not None and f.disk == (_kind(f.was[0]), f.was[1]):
            f.state = "old"
        elif f.disk is None and f.want is None:
            f.state = "new"  # removed, as target has it: git removes first, so a kill can come right after
        elif f.disk is None:
            f.state = "missing" if f.was is not None else "old"
        elif (data := written.get(f.path)) is not None and _is_beginning(data, blobs.get(maybe_cut[f.path], b"")):
            f.state = "cut"
        elif data is not None and (typed := _typed_after_cut(data, blobs, f)) is not None:
            f.state, f.typed = "typed", typed
        else:
            f.state = "edited"
    return files


def _typed_after_cut(data: bytes, blobs: dict[str, bytes], f: FileState) -> bytes | None:
    """What was typed after the beginning of the target version git wrote before it died, when
    that explains the file better than an edit of the orig or of the whole target version; else None.

    Merged with the orig version as base, such a file reads as the person deleting every line
    git never wrote (lines both commits have), so they would be lost."""
    whole = blobs.get(f.want[1], b"") if f.want else b""
    same = next((i for i, (x, y) in enumerate(zip(data, whole, strict=False)) if x != y), min(len(data), len(whole)))
    if same >= len(whole):
        return None  # the whole new version is there: an edit of it, merged as one
    was = blobs.get(f.was[1], b"") if f.was else b""
    if _lines_changed(whole[:same], data) >= min(_lines_changed(was, data), _lines_changed(whole, data)):
        return None  # an edit of the old or the whole new version explains it as well
    return data[same:]


def _lines_changed(before: bytes, after: bytes) -> int:
    """How many lines an edit from `before` to `after` removes and adds (a line cut short counts as its whole)."""
    old, new = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return sum((i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")


def _after(whole: bytes, typed: bytes) -> bytes:
    """`typed` as lines after the whole version: one line break between them."""
    if whole.endswith(b"\n") and typed.startswith(b"\n"):
        return whole + typed[1:]
    if whole and not whole.endswith(b"\n") and not typed.startswith(b"\n"):
        return whole + b"\n" + typed
    return whole + typed


def _is_beginning(data: bytes, whole: bytes) -> bool:
    return len(data) < len(whole) and whole.startswith(data)


def _bytes_of(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _disk(repo: Path, paths: list[str]) -> tuple[dict[str, tuple[str, str]], dict[str, os.stat_result]]:
    """(kind, blob id as `git add` would store it) of what is at each path, and its lstat; folders and absent paths left out."""
    stats: dict[str, os.stat_result] = {}
    for path in paths:
        try:
            st = os.lstat(repo / path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            stats[path] = st
    found: dict[str, tuple[str, str]] = {}
    regular = [p for p, st in stats.items() if stat.S_ISREG(st.st_mode) and "\n" not in p]
    if regular:
        out = run_git_bytes(repo, "hash-object", "--stdin-paths", input="\n".join(regular).encode("utf-8", "surrogateescape"))
        found.update((p, (_FILE, oid)) for p, oid in zip(regular, out.stdout.decode().split(), strict=True))
    for path, st in stats.items():
        if stat.S_ISLNK(st.st_mode):
            target = os.fsencode(os.readlink(repo / path))
            oid = run_git_bytes(repo, "hash-object", "--stdin", input=target).stdout.decode().strip()
            found[path] = (_LINK, oid)
        elif path not in found:  # a name with a newline: hash its bytes as they are
            data = (repo / path).read_bytes()
            found[path] = (_FILE, run_git_bytes(repo, "hash-object", "--stdin", input=data).stdout.decode().strip())
    return found, stats


def _settle_files(
    repo: Path, orig: str, target: str, goal: str, since: int | None
) -> tuple[list[str], list[str], list[str]]:
    """Bring the files a killed checkout had to write to `goal`, keeping edits.

    Returns the paths, those whose file was changed, and those merged with markers.

    `goal` is target when the move is being finished, or HEAD when it is
    being undone. Per path (see FileState): "new", "old", "missing" and
    "cut" are what git's checkout leaves, so they become the goal's version;
    a "typed" file becomes the whole target version with what was typed
    after it (kept as it is when the move is undone). An "edited" file is an
    edit made here and stays. When the move is finished it is merged with
    the incoming version on the old one as base; where that merge would need
    conflict markers and git had already written the file (a file after it
    in git's order is new), the edit was made on the new version, which it
    already holds, and it is kept as it is; otherwise both sides are kept
    with markers. An edit of a note the
    target deletes, or any edit while the move is undone, is kept as it is.
    """
    files = survey(repo, orig, target, since)
    if not files:
        return [], [], []
    finishing = goal == target
    wanted = {f.path: f.want for f in files} if finishing else tree_entries(repo, goal, [f.path for f in files])
    reached = max((f.order for f in files if f.state == "new"), default=-1)
    needed = [e[1] for f in files if f.state != "edited" and (e := wanted.get(f.path)) and f.disk != (_kind(e[0]), e[1])]
    needed += [e[1] for f in files if f.state == "edited" for e in (f.was, f.want) if e]
    blobs = read_blobs(repo, needed)
    moved = _moved_by_hand(repo, orig, target, files, wanted)
    follows = _moved_by_target(files, blobs, repo) if finishing else {}
    done: set[str] = set()
    changed: list[str] = []
    failed: list[str] = []
    conflicted: list[str] = []

    def merge_into(there: str, mine: str, base_oid: str, incoming_oid: str) -> None:
        """Write at `there` the edit made here (`mine`) merged with the incoming version."""
        base_text = read_blobs(repo, [base_oid]).get(base_oid, b"").decode("utf-8", "surrogateescape")
        merged = merge_texts(
            there, base_text, Side("edited here", mine), Side("incoming", blobs[incoming_oid].decode("utf-8", "surrogateescape"))
        )
        if not (repo / there).is_file() or merged.text != mine:
            atomic_write_bytes(repo / there, merged.text.encode("utf-8", "surrogateescape"))
            changed.append(there)
        if merged.conflicted:
            conflicted.append(there)

    # Removals first, as git does: a folder may have to make room for a file, or the other way round.
    for f in sorted(files, key=lambda f: (wanted.get(f.path) is not None, _git_order(f.path))):
        try:
            if f.path in done:
                continue
            if f.path in moved:
                # Moved by hand meanwhile: the goal's version goes where the note is now, never back here.
                there, base_oid = moved[f.path]
                want = wanted[f.path]
                if base_oid is not None and want is not None and base_oid != want[1]:
                    merge_into(there, (repo / there).read_bytes().decode("utf-8", "surrogateescape"), base_oid, want[1])
                continue
            if f.path in follows and f.was is not None:
                # Edited here, moved by the incoming commit: the edit follows the note to its new place.
                there = follows[f.path]
                want = wanted[there]
                if want is not None:
                    merge_into(there, (repo / f.path).read_bytes().decode("utf-8", "surrogateescape"), f.was[1], want[1])
                    (repo / f.path).unlink()
                    _prune(repo, (repo / f.path).parent)
                    changed.append(f.path)
                    done.add(there)
                continue
            if f.state == "typed":
                if finishing and f.want is not None:
                    atomic_write_bytes(repo / f.path, _after(blobs[f.want[1]], f.typed))
                    changed.append(f.path)
                continue  # undoing the move: kept as it is, like any edit
            if f.state != "edited":
                if _put(repo, f, wanted.get(f.path), blobs):
                    changed.append(f.path)
                continue
            if not finishing or f.want is None or f.disk is None or f.disk[0] != _FILE or _kind(f.want[0]) != _FILE:
                continue  # kept as it is: committed as an edit by the next sync (an edit beats a delete)
            mine = (repo / f.path).read_bytes().decode("utf-8", "surrogateescape")
            base = blobs[f.was[1]].decode("utf-8", "surrogateescape") if f.was else None
            incoming = blobs[f.want[1]].decode("utf-8", "surrogateescape")
            mine = _front_matter_back(mine, incoming)
            merged = merge_texts(f.path, base, Side("edited here", mine), Side("incoming", incoming))
            if merged.conflicted and f.order < reached:
                continue  # git had written the new version there (a later file is new): the edit was made on it
            atomic_write_bytes(repo / f.path, merged.text.encode("utf-8", "surrogateescape"))
            changed.append(f.path)
            if merged.conflicted:
                conflicted.append(f.path)
        except OSError as exc:
            failed.append(f"{f.path} ({exc.strerror or exc})")
    if failed:
        # The branch stays where it was and the marker stays: nothing commits a half-moved tree.
        raise AnamnesisError(
            f"cannot finish an interrupted sync: could not write {', '.join(failed[:3])}"
            f"{' and more' if len(failed) > 3 else ''}; make room there, then run `anamnesis sync` again"
        )
    return [f.path for f in files] + sorted({there for there, _base in moved.values()}), changed, conflicted


def _moved_by_target(files: list[FileState], blobs: dict[str, bytes], repo: Path) -> dict[str, str]:
    """{note edited here that the incoming commit moves: its new path}: the same id (`notes.stated_id`)
    at a path the incoming commit adds. Kept where it was, the edit would leave the note at two paths."""
    arriving: dict[str, list[str]] = {}
    for f in files:
        new = f.was is None and f.want is not None and f.path.lower().endswith(".md")
        if new and f.want and (name := stated_id(blobs.get(f.want[1], b"").decode("utf-8", "surrogateescape"), f.path)):
            arriving.setdefault(name, []).append(f.path)
    if not arriving:
        return {}
    found: dict[str, str] = {}
    for f in files:
        if f.state == "edited" and f.want is None and f.was is not None and f.disk and f.disk[0] == _FILE:
            try:
                mine = (repo / f.path).read_bytes().decode("utf-8", "surrogateescape")
            except OSError:
                continue
            name = stated_id(mine, f.path) or stated_id(blobs.get(f.was[1], b"").decode("utf-8", "surrogateescape"), f.path)
            places = arriving.get(name or "", [])
            if len(places) == 1 and f.path.lower().endswith(".md"):
                found[f.path] = places[0]
    return found


def _moved_by_hand(
    repo: Path, orig: str, target: str, files: list[FileState], wanted: Mapping[str, tuple[str, str] | None]
) -> dict[str, tuple[str, str | None]]:
    """{path the checkout had to write: (where a person moved that note meanwhile, the blob the
    person's version grew from: what the note was before the move started)}.

    A note git had not reached yet (or had removed to write it again) is not
    on disk, and is written again by the finish, unless a person moved it
    meanwhile: a new file elsewhere (in neither commit) with the same id
    (`notes.stated_id`) is that note, and writing the old path again would
    leave one note at two paths. The note may have come to this path with
    the move (another machine moved it): what the person moved was then the
    file the note had before, at the path the move removes.
    """
    missing = [f for f in files if f.disk is None and f.path.lower().endswith(".md") and wanted.get(f.path)]
    if not missing:
        return {}
    out = run_git_bytes(repo, "ls-files", "-z", "--others", "--exclude-standard").stdout
    others = [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p.lower().endswith(".md")]
    known = {f.path for f in files} | set(tree_entries(repo, orig, others)) | set(tree_entries(repo, target, others))
    ids: dict[str, list[str]] = {}
    for path in others:
        if path in known:
            continue
        try:
            text = (repo / path).read_bytes().decode("utf-8", "surrogateescape")
        except OSError:
            continue
        if name := stated_id(text, path):
            ids.setdefault(name, []).append(path)
    if not ids:
        return {}
    leaving = [f for f in files if f.was and not wanted.get(f.path) and f.path.lower().endswith(".md")]
    blobs = read_blobs(repo, [e[1] for f in [*missing, *leaving] for e in (f.was, wanted.get(f.path)) if e])

    def id_of(entry: tuple[str, str], path: str) -> str | None:
        return stated_id(blobs.get(entry[1], b"").decode("utf-8", "surrogateescape"), path)

    left = {id_of(f.was, f.path): f.was[1] for f in leaving if f.was}  # id: its blob before the move
    found: dict[str, tuple[str, str | None]] = {}
    for f in missing:
        names = {id_of(e, f.path) for e in (f.was, wanted[f.path]) if e} - {None}
        places = sorted({p for name in names for p in ids.get(name or "", [])})
        if len(places) == 1:
            base = f.was[1] if f.was else next((left[n] for n in names if n in left), None)
            found[f.path] = (places[0], base)
    return found


def _front_matter_back(mine: str, incoming: str) -> str:
    """Text typed into a note the killed checkout had emptied has no front matter: give it the
    incoming note's, so the merge keeps the note's identity and only its body can conflict."""
    if mine.lstrip().startswith("---") or not incoming.startswith("---"):
        return mine
    end = re.search(r"^---[ \t]*\r?$", incoming[3:], re.M)
    if end is None:
        return mine
    head_end = 3 + end.end()
    newline = incoming.find("\n", head_end)
    head = incoming[: newline + 1] if newline >= 0 else incoming + "\n"
    return head + mine


def _put(repo: Path, f: FileState, entry: tuple[str, str] | None, blobs: dict[str, bytes]) -> bool:
    """Make the path hold `entry` (None: nothing); whether anything changed. OSError if it cannot."""
    full = repo / f.path
    if entry is None:
        if f.disk is None:
            return False
        full.unlink(missing_ok=True)
        _prune(repo, full.parent)
        return True
    if f.disk == (_kind(entry[0]), entry[1]):
        if entry[0] != _LINK and os.access(full, os.X_OK) != (entry[0] == "100755"):
            os.chmod(full, 0o755 if entry[0] == "100755" else 0o644)
            return True
        return False
    if full.is_dir() and not full.is_symlink():
        full.rmdir()  # an empty folder in the way; one with files in it is a person's (OSError)
    if entry[0] == _LINK:
        full.parent.mkdir(parents=True, exist_ok=True)
        temp = full.with_name(f".{full.name}.{os.getpid()}.tmp")
        temp.unlink(missing_ok=True)
        os.symlink(os.fsdecode(blobs[entry[1]]), temp)
        os.replace(temp, full)
    else:
        atomic_write_bytes(full, blobs[entry[1]], mode=_file_mode(full, entry[0] == "100755"))
    return True


def _file_mode(path: Path, executable: bool) -> int:
    """The permissions a file written at `path` gets: its current ones (or 0644), with the tree's exec bit."""
    try:
        st = os.lstat(path)
        current = st.st_mode & 0o777 if stat.S_ISREG(st.st_mode) else 0o644
    except OSError:
        current = 0o644
    return current | 0o111 if executable else current & ~0o111


def _prune(repo: Path, folder: Path) -> None:
    """Remove folders a removal left empty, up to memory/ itself (as git's checkout does)."""
    while folder != repo and repo in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def repair_or_refuse(store: Store, conflicts: list[str] | None = None, rewritten: list[str] | None = None) -> list[str]:
    """Everything sync does before it starts: repair what a killed sync left, or refuse.

    Returns notes on what was repaired (notes finishing a checkout had to
    merge with markers are added to `conflicts`, files it changed to
    `rewritten`); raises SyncRefused for a repo a person left mid-operation.
    """
    notes: list[str] = []
    previous = read_marker(store, RUNNING_MARKER)
    moving = read_marker(store, CHECKOUT_MARKER)
    if previous is not None or moving is not None or lock_files(store.memory):
        # A git the killed sync started may still be at work (it survives its parent): wait for it first.
        removed = settle_git(store.memory)
        if removed:
            notes.append(f"removed stale git lock files: {', '.join(removed)}")
    for stale in store.state_dir.glob("merge-index-*"):
        stale.unlink(missing_ok=True)
    done = finish_checkout(store, conflicts, rewritten)
    if done:
        notes.append(done)
    reason = wedged(store)
    if reason:
        raise SyncRefused(reason)
    return notes
