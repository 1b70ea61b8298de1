"""Replay and merge commits without a working tree, so sync is never left mid-rebase.

`git rebase` and `git merge` stop half-way on a conflict and leave the
repository in a state a person has to finish. Sync instead builds every new
commit with plumbing in a private index file: it reads the target tree,
applies the other side's changes path by path, resolves what both sides
changed (`conflicts.merge_texts`: markers in the note, never a stop), writes a
tree and a commit. Nothing outside the object database changes until sync
moves the branch in one step, so a kill at any point loses nothing.

Rules per path, when both sides touched it: edit beats delete, deleted on
both sides stays deleted, added on both sides merges with an empty base. A
file one side moved (git's rename detection) and the other edited ends up at
the new path with both sides' changes merged there. Binary files and
symlinks changed on both sides keep one version in place and the other
beside it (`<path>.<machine>.conflict`). A file both sides moved, to two
different places, ends up at one of them (the first in path order, so every
machine picks the same), with both sides' changes merged there; `Built.notices`
says so. A note is known as moved by git's rename detection or by its id
(deleted at one path, added at another with the same id), so a move that
came with big edits is still one note, and two notes that look alike are
never taken for one. A note both sides added, each at a path of its own,
with the same id (what a criss-cross merge's base that predates the note
shows of a note moved on one or both sides) goes to one place too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from anamnesis.base.git import git_out, read_blobs, run_git, run_git_bytes, tree_entries
from anamnesis.base.notes import stated_id
from anamnesis.base.repo import JOIN_SUBJECT
from anamnesis.store import Side, merge_texts

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
ZERO = "0" * 40
_REGULAR = ("100644", "100755")
_SUBMODULE = "160000"


@dataclass
class Change:
    """One path that differs between two trees (None: absent on that side)."""

    path: str
    old_mode: str | None
    old_oid: str | None
    new_mode: str | None
    new_oid: str | None


@dataclass
class Built:
    """A commit made by the merger, the paths that got conflict markers, and what else the
    merge settled that the user should hear about (a file moved to two places)."""

    commit: str
    conflicts: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


class TreeMerger:
    """Builds commits in a private index file; the working tree and HEAD are untouched."""

    def __init__(self, repo: Path, index_file: Path) -> None:
        self.repo = repo
        self.index_file = index_file
        self._env = {"GIT_INDEX_FILE": str(index_file), "GIT_LITERAL_PATHSPECS": "1"}
        self._labels: dict[tuple[str, str], str] = {}
        self._notices: list[str] = []
        self._base = EMPTY_TREE  # the base of the merge `apply` is making

    def close(self) -> None:
        """Remove the private index file."""
        for path in (self.index_file, Path(f"{self.index_file}.lock")):
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    # -- the two operations -------------------------------------------------------

    def pick(self, onto: str, commit: str, parent: str) -> Built | None:
        """Replay `commit` (whose parent is `parent`) on top of `onto`; None if it adds nothing,
        `onto` itself with what the merge settled when that is all (a deletion an edit undid)."""
        tree, conflicts = self.apply(onto, parent, commit)
        if tree == self.tree_of(onto):
            return Built(onto, [], list(self._notices)) if self._notices else None
        message, author = self._message_and_author(commit)
        notices = list(self._notices)
        message = _with_notices(with_conflicts(message, conflicts) if conflicts else message, notices)
        return Built(self.commit_tree(tree, [onto], message, author), conflicts, notices)

    def join(self, one: str, two: str) -> str:
        """A merge of two commits that hold the same notes (the same tree), made alike on every
        machine: parents in a fixed order, a fixed message and identity, the later parent's time.

        Machines of a mesh that changed the same things (or merged each other's merges) end with
        equal trees but different commits. Each merging the others' as a new commit of its own,
        pushing it, and merging theirs again never ends (a three-machine mesh of watches made a
        merge every few seconds). Joined this way, two machines that join the same two commits
        make the same commit, and their next syncs are fast-forwards."""
        first, second = sorted((one, two))
        times = run_git(self.repo, "log", "--no-walk", "--format=%ct", first, second).stdout.split()
        when = max((int(t) for t in times), default=0)
        stamp = f"{when} +0000"
        who = {
            "GIT_AUTHOR_NAME": "anamnesis", "GIT_AUTHOR_EMAIL": "anamnesis", "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_NAME": "anamnesis", "GIT_COMMITTER_EMAIL": "anamnesis", "GIT_COMMITTER_DATE": stamp,
        }
        return self.commit_tree(self.tree_of(first), [first, second], JOIN_SUBJECT + "\n", who)

    def merge(self, ours: str, theirs: str, message: str) -> Built:
        """A merge commit of `ours` and `theirs` (their common history as the base)."""
        base = self.merge_base(ours, theirs) or EMPTY_TREE
        tree, conflicts = self.apply(ours, base, theirs)
        notices = list(self._notices)
        message = _with_notices(with_conflicts(message, conflicts) if conflicts else message, notices)
        return Built(self.commit_tree(tree, [ours, theirs], message), conflicts, notices)

    # -- the path-level three-way merge -------------------------------------------

    def apply(self, target: str, base: str, side: str) -> tuple[str, list[str]]:
        """Apply the changes base->side onto target's tree; (tree id, conflicted paths)."""
        self._notices = []
        self._base = base
        changes = self.diff(base, side)
        if not changes:
            return self.tree_of(target), []
        current = self.entries(target, [c.path for c in changes])
        updates: list[tuple[str, str, str]] = []  # mode, oid, path (mode "0": remove)
        conflicts: list[str] = []
        moved = self._moves(base, side, changes, current)
        moved_to = {new for new, _mode, _oid in moved.values()}
        target_moves: dict[str, tuple[str, str, str]] | None = None
        twice = self._moved_twice(base, side, target, changes, current)
        placed = {there for _here, there, *_rest in twice.values()}
        for change in changes:
            mode, oid = current.get(change.path, (None, None))
            if change.path in placed:
                continue  # where `side` moved a file `target` moved elsewhere: settled below
            if change.path in twice:
                updates.extend(self._settle_moves(change, twice[change.path], target, side, conflicts))
                continue
            if change.old_oid is None and change.path in moved_to:
                continue  # the new place of a file `side` moved: filled from its old path below
            if change.path in moved and mode is not None and oid is not None:
                # `side` moved the file, `target` edited it: the edit goes to the new place.
                new_path, new_mode, new_oid = moved[change.path]
                updates.append(("0", ZERO, change.path))
                if new_oid == change.old_oid:
                    updates.append((mode, oid, new_path))
                else:
                    there = Change(new_path, change.old_mode, change.old_oid, new_mode, new_oid)
                    updates.extend(self._merge_path(there, mode, oid, target, side, conflicts, ours_at=change.path))
                continue
            if oid is None and change.old_mode in _REGULAR and change.new_mode in _REGULAR:
                # `target` moved (or deleted) a file `side` edited: follow the move.
                if target_moves is None:
                    target_moves = self._renames(base, target)
                place = target_moves.get(change.path)
                if place is not None and place[0] not in current and place[1] in _REGULAR:
                    new_path, new_mode, new_oid = place
                    if new_oid == change.old_oid:
                        updates.append((change.new_mode or "100644", change.new_oid or ZERO, new_path))
                    else:
                        there = Change(new_path, change.old_mode, change.old_oid, change.new_mode, change.new_oid)
                        updates.extend(
                            self._merge_path(there, new_mode, new_oid, target, side, conflicts, theirs_at=change.path)
                        )
                    continue
            if oid == change.old_oid:
                if change.new_oid is None:
                    if oid is not None:
                        updates.append(("0", ZERO, change.path))
                else:
                    updates.append((change.new_mode or "100644", change.new_oid, change.path))
            elif oid == change.new_oid:
                continue  # same result on both sides
            elif change.new_oid is None:
                # Edit (ours) beats delete (theirs), unless the note lives on at another path of theirs.
                followed = self._follow_split_move(change, mode or "", oid or "", target, side, changes, conflicts)
                updates.extend(followed)
                if not followed:
                    self._kept_over_deletion(change.path, mode)
            elif oid is None:
                updates.append((change.new_mode or "100644", change.new_oid, change.path))  # edit beats delete
                self._kept_over_deletion(change.path, change.new_mode)
            elif mode is None or _SUBMODULE in (mode, change.new_mode):
                continue  # a submodule has no bytes of its own here: keep ours
            else:
                updates.extend(self._merge_path(change, mode, oid, target, side, conflicts))
        updates.extend(self._one_place(target, base, side, changes, updates, conflicts))
        self._git("read-tree", target)
        if updates:
            records = "".join(f"{m} {o}\t{p}\0" for m, o, p in updates)
            run_git_bytes(self.repo, "update-index", "-z", "--index-info", input=records.encode(), env=self._env)
        return self._git("write-tree"), conflicts

    def _one_place(
        self,
        target: str,
        base: str,
        side: str,
        changes: list[Change],
        updates: list[tuple[str, str, str]],
        conflicts: list[str],
    ) -> list[tuple[str, str, str]]:
        """One id, one note: a note `side` added at one path and `target` at another (each side
        has only its own) is one note that came to two places by histories the base does not
        tell apart — a base that predates the note, as one of a criss-cross merge's can. It goes
        to one place, both versions merged there on the note as a common ancestor had it: the
        place a side moved it to if the other still has it where it was, else the first in path
        order (as for a note moved to two places). The updates that do it."""
        result = {p: (m, o) for m, o, p in updates}
        added = {c.path for c in changes if c.old_oid is None}
        # What the merge put at paths only `side` had (a note moved to two places is settled already).
        theirs = {p: oid for p, (mode, oid) in result.items() if p in added and _is_note(p, mode)}
        if not theirs:
            return []
        out = run_git_bytes(
            self.repo, "diff-tree", "-r", "-z", "--no-renames", "--diff-filter=A", "--no-commit-id", base, target
        ).stdout.decode("utf-8", "surrogateescape")
        parts = out.split("\0")
        ours: dict[str, str] = {}  # notes only `target` added, as the merge leaves them
        for meta, path in zip(parts[0::2], parts[1::2], strict=False):
            fields = meta[1:].split(" ")
            if len(fields) == 5 and _is_note(path, fields[1]) and path not in theirs:
                mode, oid = result.get(path, (fields[1], fields[3]))
                if mode != "0":
                    ours[path] = oid
        if not ours:
            return []
        blobs = read_blobs(self.repo, [*theirs.values(), *ours.values()])
        by_id: dict[str, str] = {}
        for path, oid in ours.items():
            if note_id := stated_id(_text(blobs.get(oid, b"")), path):
                by_id.setdefault(note_id, path)
        pairs = [
            (here, there)
            for there, oid in theirs.items()
            if (here := by_id.get(stated_id(_text(blobs.get(oid, b"")), there) or "")) and here != there
        ]
        if not pairs:
            return []
        in_side = self.entries(side, [here for here, _there in pairs])
        in_target = self.entries(target, [there for _here, there in pairs])
        fixes: list[tuple[str, str, str]] = []
        for here, there in pairs:
            if here in in_side or there in in_target:
                continue  # a side has both: a copy someone made, not one note in two places
            was = self._before(here, target, side)
            # Where one side still has the note at its earlier path, the other side moved it: the move wins.
            kept = there if was and was[0] == here else here if was and was[0] == there else min(here, there)
            gone = there if kept == here else here
            merged = Change(kept, was and was[1], was and was[2], "100644", theirs[there])
            fixes.append(("0", ZERO, gone))
            fixes.extend(self._merge_path(merged, "100644", ours[here], target, side, conflicts, ours_at=here, theirs_at=there))
            self._notices.append(
                f"{kept} and {gone} were one note (the same id) that came to two places: kept {kept}, "
                "with the changes of both"
            )
        return fixes

    def _merge_path(
        self,
        change: Change,
        mode: str,
        oid: str,
        target: str,
        side: str,
        conflicts: list[str],
        ours_at: str | None = None,
        theirs_at: str | None = None,
    ) -> list[tuple[str, str, str]]:
        """Merge both versions into change.path (`ours_at`/`theirs_at`: where a side had it before a move)."""
        path = change.path
        ours, theirs = self.blob(oid), self.blob(change.new_oid or ZERO)
        base = self.blob(change.old_oid) if change.old_oid else self._common_version(path, target, side)
        one = Side(self.label(target, ours_at or path), _text(ours))
        two = Side(self.label(side, theirs_at or path), _text(theirs))
        binary = b"\0" in ours or b"\0" in theirs or (base is not None and b"\0" in base)
        if binary or mode not in _REGULAR or change.new_mode not in _REGULAR:
            # Binary, or a symlink on either side: keep one version in place and the other beside it.
            first, second = (one, two) if (one.label, ours) <= (two.label, theirs) else (two, one)
            theirs_mode = change.new_mode or "100644"
            kept, other = ((mode, oid), (theirs_mode, change.new_oid)) if first is one else ((theirs_mode, change.new_oid), (mode, oid))
            conflicts.append(path)
            return [
                (kept[0], kept[1] or ZERO, path),
                (other[0], other[1] or ZERO, f"{path}.{_safe_label(second.label)}.conflict"),
            ]
        merged = merge_texts(path, _text(base) if base is not None else None, one, two)
        if merged.conflicted:
            conflicts.append(path)
        new_oid = self.write_blob(merged.text.encode("utf-8", errors="surrogateescape"))
        return [(mode if mode == change.new_mode else "100644", new_oid, path)]

    def _common_version(self, path: str, target: str, side: str) -> bytes | None:
        """For a file both sides added (the base has none): the latest version of it both sides'
        histories had, as the base of their merge. A commit replayed on one machine after another
        machine had taken it (a mesh, where each fetches the others' main) adds the same file in
        both histories; merged with an empty base, whatever either added to it since became a
        conflict with an empty side, a machine against itself. None when they share no version."""
        start = self._base if self._base != EMPTY_TREE else None

        def versions(tip: str) -> list[str]:
            span = f"{start}..{tip}" if start else tip
            out = run_git(
                self.repo, "log", "--no-renames", "--raw", "--no-abbrev", "--format=", span, "--", path, check=False
            ).stdout
            return [fields[3] for line in out.splitlines() if len(fields := line.split()) >= 5 and fields[3] != ZERO]

        theirs = set(versions(side))
        shared = next((oid for oid in versions(target) if oid in theirs), None)
        return self.blob(shared) if shared else None

    def _kept_over_deletion(self, path: str, mode: str | None) -> None:
        """Say that a note deleted on one side and edited on the other is kept: it comes back on
        the machine that deleted it, which should hear why."""
        if _is_note(path, mode or ""):
            self._notices.append(
                f"{path} was deleted on one machine and edited on another: the edited note is kept"
                " (delete it again to drop it)"
            )

    def _follow_split_move(
        self, change: Change, mode: str, oid: str, target: str, side: str, changes: list[Change], conflicts: list[str]
    ) -> list[tuple[str, str, str]]:
        """`target` edited a note `side` deleted: the edit stays (an edit beats a delete), unless
        `side` still has the note at another path both sides have — a move made in two commits
        (the new path committed by a writer, the old one's removal by the next sync), which
        git sees as a copy, then a deletion. The edit then follows the note there."""
        if not _is_note(change.path, mode) or change.old_oid is None:
            return []
        note_id = stated_id(_text(self.blob(change.old_oid)), change.path)
        if not note_id:
            return []
        out = run_git_bytes(self.repo, "ls-tree", "-r", "-z", "--name-only", side).stdout.decode("utf-8", "surrogateescape")
        touched = {c.path for c in changes}
        named = [p for p in out.split("\0") if p.endswith(f"-{note_id}.md") and p != change.path and p not in touched]
        there = self.entries(target, named)
        found = [p for p, (m, o) in there.items() if _is_note(p, m) and stated_id(_text(self.blob(o)), p) == note_id]
        if len(found) != 1:
            return []
        q_mode, q_oid = there[found[0]]
        moved = Change(found[0], change.old_mode, change.old_oid, q_mode, q_oid)
        return [("0", ZERO, change.path), *self._merge_path(moved, mode, oid, target, side, conflicts, ours_at=change.path)]

    def _before(self, here: str, target: str, side: str) -> tuple[str, str, str] | None:
        """(path, mode, oid) of the note at `here` in `target` as it was in a common ancestor of
        both sides, at whatever path it had there; None if none has it."""
        proc = run_git(self.repo, "merge-base", "--all", target, side, check=False)
        for ancestor in sorted(proc.stdout.split()):
            old: str | None = here
            if here not in self.entries(ancestor, [here]):
                old = next((p for p, (new, *_rest) in self._renames(ancestor, target).items() if new == here), None)
            found = self.entries(ancestor, [old]).get(old) if old else None
            if old and found is not None:
                return old, *found
        return None

    def _moved_twice(
        self, base: str, side: str, target: str, changes: list[Change], current: dict[str, tuple[str, str]]
    ) -> dict[str, tuple[str, str, str, str, str]]:
        """Files both sides moved, to different places:
        {old path: (target's path, side's path, side's mode, target's mode, target's oid)}."""
        gone = [
            c.path for c in changes
            if c.new_oid is None and c.old_mode in _REGULAR and c.path not in current
        ]
        if not gone:
            return {}
        theirs = self._renames(base, side)
        if not any(path in theirs for path in gone):
            return {}
        ours = self._renames(base, target)
        found: dict[str, tuple[str, str, str, str, str]] = {}
        for path in gone:
            if path not in theirs or path not in ours:
                continue
            there, there_mode, _oid = theirs[path]
            here, here_mode, here_oid = ours[path]
            if here != there and there not in current and _both_regular(here_mode, there_mode):
                found[path] = (here, there, there_mode, here_mode, here_oid)
        return found

    def _settle_moves(
        self, change: Change, places: tuple[str, str, str, str, str], target: str, side: str, conflicts: list[str]
    ) -> list[tuple[str, str, str]]:
        """A file `target` moved to one place and `side` to another: one place (the first in path
        order, the same on every machine), holding both sides' changes."""
        here, there, there_mode, here_mode, here_oid = places
        there_oid = self.entries(side, [there])[there][1]
        kept = min(here, there)
        updates: list[tuple[str, str, str]] = []
        if kept != here:
            updates.append(("0", ZERO, here))
        if here_oid == there_oid or there_oid == change.old_oid:
            updates.append((here_mode, here_oid, kept))
        elif here_oid == change.old_oid:
            updates.append((there_mode, there_oid, kept))
        else:
            merged = Change(kept, change.old_mode, change.old_oid, there_mode, there_oid)
            updates.extend(self._merge_path(merged, here_mode, here_oid, target, side, conflicts, ours_at=here, theirs_at=there))
        self._notices.append(
            f"{change.path} was moved to two places, {min(here, there)} and {max(here, there)}: "
            f"kept {kept}, with the changes of both"
        )
        return updates

    def _moves(
        self, base: str, side: str, changes: list[Change], current: dict[str, tuple[str, str]]
    ) -> dict[str, tuple[str, str, str]]:
        """Files `side` moved that the target edited meanwhile: {old path: (new path, mode, oid)}."""
        edited = [
            c.path for c in changes
            if c.new_oid is None and c.old_mode in _REGULAR
            and current.get(c.path, ("", c.old_oid))[1] != c.old_oid and current[c.path][0] in _REGULAR
        ]
        if not edited:
            return {}
        renames = self._renames(base, side)
        return {
            path: renames[path] for path in edited
            if path in renames and renames[path][0] not in current and renames[path][1] in _REGULAR
        }

    def _renames(self, base: str, side: str) -> dict[str, tuple[str, str, str]]:
        """Notes and files moved from base to side: {old path: (new path, mode, oid)}.

        Git's rename detection goes by likeness of content, which is wrong
        both ways for notes: two different notes written from one template
        look alike, and a note moved with big edits does not. A note's id
        (`notes.stated_id`) settles it: a pair git saw whose ids differ is
        two notes, and a note deleted at one path and added at another with
        the same id is one note moved.
        """
        out = run_git_bytes(
            self.repo, "diff-tree", "-r", "-z", "-M", "--diff-filter=ADR", "--no-commit-id", base, side
        ).stdout.decode("utf-8", "surrogateescape")
        parts = out.split("\0")
        seen: dict[str, tuple[str, str, str, str, str]] = {}  # old path: (new path, mode, oid, old mode, old oid)
        gone: dict[str, tuple[str, str]] = {}  # path: (mode, oid), deleted
        added: dict[str, tuple[str, str]] = {}
        i = 0
        while i + 1 < len(parts) and parts[i].startswith(":"):
            old_mode, new_mode, old_oid, new_oid, status = parts[i][1:].split(" ")
            if status.startswith("R") and i + 2 < len(parts):
                seen[parts[i + 1]] = (parts[i + 2], new_mode, new_oid, old_mode, old_oid)
                i += 3
                continue
            if status == "D":
                gone[parts[i + 1]] = (old_mode, old_oid)
            elif status == "A":
                added[parts[i + 1]] = (new_mode, new_oid)
            i += 2
        notes = {old: row for old, row in seen.items() if _is_note(old, row[3]) and _is_note(row[0], row[1])}
        gone = {p: e for p, e in gone.items() if _is_note(p, e[0])}
        added = {p: e for p, e in added.items() if _is_note(p, e[0])}
        if not notes and not (gone and added):
            return {old: row[:3] for old, row in seen.items()}
        blobs = read_blobs(self.repo, [oid for _m, oid in (*gone.values(), *added.values())]
                           + [oid for row in notes.values() for oid in (row[2], row[4])])

        def note_id(path: str, oid: str) -> str | None:
            return stated_id(_text(blobs.get(oid, b"")), path)

        for old, (new, mode, oid, old_mode, old_oid) in notes.items():
            before, after = note_id(old, old_oid), note_id(new, oid)
            if before and after and before != after:  # alike, but two notes: a deletion and a new note
                del seen[old]
                gone[old], added[new] = (old_mode, old_oid), (mode, oid)
        found = {old: row[:3] for old, row in seen.items()}
        by_id: dict[str, tuple[list[str], list[str]]] = {}
        for files, n in ((gone, 0), (added, 1)):
            for path, (_mode, oid) in files.items():
                key = note_id(path, oid)
                if key:
                    by_id.setdefault(key, ([], []))[n].append(path)
        for old_paths, new_paths in by_id.values():
            if len(old_paths) == 1 and len(new_paths) == 1:  # anything else is not a plain move
                found[old_paths[0]] = (new_paths[0], *added[new_paths[0]])
        return found

    # -- plumbing -----------------------------------------------------------------

    def _git(self, *args: str, input: str | None = None) -> str:
        return run_git(self.repo, *args, input=input, env=self._env).stdout.strip()

    def diff(self, base: str, side: str) -> list[Change]:
        """Paths that differ between two trees or commits, without rename detection."""
        out = run_git_bytes(
            self.repo, "diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", base, side
        ).stdout.decode("utf-8", "surrogateescape")
        parts = out.split("\0")
        changes: list[Change] = []
        i = 0
        while i + 1 < len(parts) and parts[i].startswith(":"):
            old_mode, new_mode, old_oid, new_oid, _status = parts[i][1:].split(" ")
            changes.append(
                Change(
                    parts[i + 1],
                    None if old_mode == "000000" else old_mode,
                    None if old_oid == ZERO else old_oid,
                    None if new_mode == "000000" else new_mode,
                    None if new_oid == ZERO else new_oid,
                )
            )
            i += 2
        return changes

    def entries(self, treeish: str, paths: list[str]) -> dict[str, tuple[str, str]]:
        """{path: (mode, oid)} of those paths in a tree (absent paths are left out)."""
        return tree_entries(self.repo, treeish, paths, env=self._env)

    def blob(self, oid: str) -> bytes:
        """The bytes of a blob."""
        return run_git_bytes(self.repo, "cat-file", "blob", oid).stdout

    def write_blob(self, data: bytes) -> str:
        """Store bytes as a blob; its id."""
        out = run_git_bytes(self.repo, "hash-object", "-w", "--stdin", input=data).stdout
        return out.decode().strip()

    def tree_of(self, commit: str) -> str:
        """The tree id of a commit."""
        return git_out(self.repo, "rev-parse", f"{commit}^{{tree}}")

    def merge_base(self, one: str, two: str, depth: int = 0) -> str | None:
        """Their best common ancestor, or None. Where history criss-crossed (machines of a mesh
        that merged each other's merges) there are several: then, as git itself does, one commit
        that merges them (a virtual base: an object no ref points at). Any one of them alone
        would make what both sides already share look like a change of one side: a line both
        had, written into a conflict block again, in every version."""
        proc = run_git(self.repo, "merge-base", "--all", one, two, check=False)
        bases = sorted(proc.stdout.split())
        if len(bases) < 2 or depth >= _VIRTUAL_DEPTH:
            return bases[0] if bases else None
        virtual = bases[0]
        for other in bases[1:]:
            base = self.merge_base(virtual, other, depth + 1) or EMPTY_TREE
            tree, _conflicts = self.apply(virtual, base, other)
            virtual = self.commit_tree(tree, [virtual, other], "anamnesis: virtual merge base")
        return virtual

    def commit_tree(
        self, tree: str, parents: list[str], message: str, author: dict[str, str] | None = None
    ) -> str:
        """Write a commit object (committer: this repo's identity)."""
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return run_git(self.repo, *args, input=message, env={**self._env, **(author or {})}).stdout.strip()

    def _message_and_author(self, commit: str) -> tuple[str, dict[str, str]]:
        out = run_git(self.repo, "log", "-1", "--format=%an%x00%ae%x00%ad%x00%B", "--date=raw", commit).stdout
        name, email, date, message = out.split("\0", 3)
        return message.rstrip("\n") + "\n", {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": date,
        }

    def label(self, commit: str, path: str) -> str:
        """Who last changed `path` as of `commit`: the machine name from the commit author."""
        key = (commit, path)
        if key not in self._labels:
            name = git_out(self.repo, "log", "-1", "--format=%an", commit, "--", path) or "unknown"
            self._labels[key] = name.removeprefix("anamnesis@")
        return self._labels[key]


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")


def _safe_label(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in label) or "other"


def _is_note(path: str, mode: str) -> bool:
    return path.lower().endswith(".md") and mode in _REGULAR


def _both_regular(one: str, two: str) -> bool:
    return one in _REGULAR and two in _REGULAR


def _with_notices(message: str, notices: list[str]) -> str:
    if not notices:
        return message
    return f"{message.rstrip()}\n\n" + "".join(f"{line}\n" for line in notices)


CONFLICTS_HEADING = "Conflicts (every version kept, with markers):"


def with_conflicts(message: str, conflicts: list[str]) -> str:
    """`message` naming the paths its commit recorded conflict blocks in (read by `recorded_in`)."""
    lines = "".join(f"\t{path}\n" for path in conflicts)
    return f"{message.rstrip()}\n\n{CONFLICTS_HEADING}\n{lines}"


def recorded_in(message: str) -> list[str]:
    """The paths a commit message says its commit recorded conflicts in: how a machine tells a
    conflict it brings in from a note that only quotes conflict markers (earlier versions wrote
    'Conflicts (both sides kept, with markers):')."""
    found: list[str] = []
    inside = False
    for line in message.splitlines():
        if line.startswith("Conflicts (") and line.endswith("):"):
            inside = True
        elif inside and line.startswith("\t"):
            found.append(line[1:])
        else:
            inside = False
    return found


_VIRTUAL_DEPTH = 4  # criss-crosses within criss-crosses: past this, the smallest id stands in


def private_index(state_dir: Path) -> Path:
    """A per-process index file path under the store's state folder."""
    state_dir.mkdir(parents=True, exist_ok=True)
    return state_dir / f"merge-index-{os.getpid()}"
