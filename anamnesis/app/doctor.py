"""Health checks behind `anamnesis doctor`: each finding says where, what and how to fix it."""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anamnesis.agents import find_old_hooks, queued_notes
from anamnesis.base.errors import AnamnesisError, ExitCode
from anamnesis.base.fsutil import (
    LOW_SPACE,
    folders_under,
    free_bytes,
    human_bytes,
    is_out_of_space,
    unwritable_folders,
    unwritable_text,
    write_problem,
)
from anamnesis.base.git import git_processes_in, lock_files
from anamnesis.base.notes import Problem, ProblemKind, first_fix, is_note_path
from anamnesis.base.paths import Store
from anamnesis.base.settings import load_settings
from anamnesis.base.text import plural
from anamnesis.importers import gone_mirrors
from anamnesis.search import file_problems, open_index
from anamnesis.store import (
    SIMILAR_TYPES,
    Components,
    check_home,
    list_aliases,
    read_links,
    similar_pairs,
    wedged,
)
from anamnesis.sync import (
    ago,
    incoming_machines,
    log_path,
    outdated_watch,
    peer_problems,
    recent,
    schedule_inactive,
    schedule_installed,
    untaken_pushes,
    watch_running,
)

if TYPE_CHECKING:
    from anamnesis.search import Index

_WINDOWS_RESERVED = re.compile(r"^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?$", re.I)
_BAD_CHARS = re.compile(r'[<>:"\\|?*\x00-\x1f]')


_LEFTOVER = re.compile(r"^\..+\.[A-Za-z0-9_]{8}(\.undo)?\.tmp$")  # what fsutil and store write, then rename


def _older_than(path: str, seconds: float) -> bool:
    try:
        return time.time() - os.lstat(path).st_mtime > seconds
    except OSError:
        return False


PROBLEM = "problem"
SUGGESTION = "suggestion"  # worth a look, but nothing is wrong: doctor still exits 0
MAX_SUGGESTIONS = 50


@dataclass
class Finding:
    """One problem doctor found (or, with level SUGGESTION, something worth a look)."""

    where: str
    problem: str
    fix: str = ""
    level: str = PROBLEM

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "problem": self.problem, "fix": self.fix}


def portability_problem(relpath: str) -> str | None:
    """Why a file name would break on another machine's file system or in git, if it would."""
    for part in relpath.split("/"):
        if _BAD_CHARS.search(part):
            return "name has characters Windows and some sync tools refuse (<>:\"\\|?*)"
        if part.endswith((" ", ".")):
            return "name ends with a space or a dot"
        if _WINDOWS_RESERVED.match(part):
            return "name is reserved on Windows"
    return None


def run_checks(store: Store) -> list[Finding]:
    """Every problem with this store that a person should know about, then suggestions.

    An ANAMNESIS_HOME that is a file (or inside one) is an error, not a
    finding: `init` could not fix it.
    """
    check_home(store)
    findings: list[Finding] = []
    if not store.exists():
        return [Finding(str(store.home), "no store here", "run `anamnesis init`")]
    findings.extend(_writable_findings(store))
    mode = stat.S_IMODE(store.settings_path.stat().st_mode)
    if mode & 0o077:
        findings.append(
            Finding(str(store.settings_path), f"mode is {mode:o}; it should be 600", f"chmod 600 {store.settings_path}")
        )

    try:
        load_settings(store)
    except Exception as exc:
        findings.append(Finding(str(store.settings_path), str(exc), "fix the JSON by hand"))

    reason = wedged(store)
    if reason:
        findings.append(Finding(str(store.memory), reason))
    if not git_processes_in(store.memory):
        for lock in lock_files(store.memory):
            findings.append(
                Finding(
                    str(lock),
                    "a git lock file left by a git that was killed (no git process owns it)",
                    "run `anamnesis sync`, which removes it safely",
                )
            )
    findings.extend(_sync_findings(store))
    not_running = schedule_inactive(store)  # asked of systemctl once, for both
    findings.extend(_watch_findings(store, not_running))
    findings.extend(_old_hook_findings())
    findings.extend(_peer_findings(store))
    findings.extend(_relay_findings(store, not_running))
    findings.extend(_queue_findings(store))
    findings.extend(_index_findings(store))
    findings.extend(_mirror_findings(store))
    lower_seen: dict[str, str] = {}
    for root, dirs, files in os.walk(store.memory):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs]:
            full = os.path.join(root, name)
            relpath = os.path.relpath(full, store.memory).replace(os.sep, "/")
            problem = portability_problem(relpath)
            if problem:
                findings.append(Finding(relpath, problem, "rename the file"))
            other = lower_seen.setdefault(relpath.lower(), relpath)
            if other != relpath:
                findings.append(
                    Finding(relpath, f"differs from {other} only by case; they collide on macOS and Windows", "rename one")
                )
            if os.path.islink(full) and not is_note_path(relpath):  # a note's link: the index names it
                findings.append(
                    Finding(
                        relpath,
                        "a symbolic link: sync leaves it out (notes are plain files inside memory/)",
                        f"put the files themselves there, or remove the link: rm {full}",
                    )
                )
            if not os.access(full, os.R_OK):
                findings.append(Finding(relpath, "is not readable by you", f"chmod u+r {full}"))
            if _LEFTOVER.match(name) and _older_than(full, 60):
                findings.append(
                    Finding(
                        relpath,
                        "a temporary file left by a write that was killed (git and the index ignore it)",
                        f"delete it: rm {full}",
                    )
                )
    findings.sort(key=lambda f: f.level == SUGGESTION)  # stable: problems first, each in its order
    return findings


def _writable_findings(store: Store) -> list[Finding]:
    """Folders of the store that cannot be written (memory/ or any folder in it, git's included,
    the home, the state folder), in one finding with one fix; and a disk about to be full."""
    findings: list[Finding] = []
    problems = [
        (f, p) for f in (store.home, store.state_dir, store.memory) if f.is_dir() and (p := write_problem(f))
    ]
    if store.memory.is_dir():
        problems += unwritable_folders(f for f in folders_under(store.memory) if f != store.memory)
    if problems:
        what, fix = unwritable_text(problems, store.home)
        folder = problems[0][0]
        findings.append(Finding(str(folder), what.removeprefix(f"{folder} "), f"{fix}; notes cannot be saved or synced"))
    free = free_bytes(store.home)
    if free is not None and free < LOW_SPACE:
        findings.append(
            Finding(
                str(store.home),
                f"only {human_bytes(free)} free on its disk: new notes and syncs will fail (exit 8)",
                "free some space",
            )
        )
    return findings


def _sync_findings(store: Store) -> list[Finding]:
    """The last sync failed (conflicts and unreachable peers are normal outcomes, not failures)."""
    entries = recent(store, limit=1)
    if not entries:
        return []
    last = entries[-1]
    code = last.get("exit_code")
    normal = (ExitCode.OK, ExitCode.CONFLICT, ExitCode.UNREACHABLE, ExitCode.PEER_MISCONFIGURED, None)
    if not last.get("error") and code in normal:
        return []  # a misconfigured peer is reported with the peers, with its fix
    fixes: dict[int, str] = {
        ExitCode.NO_STORE: "run `anamnesis init`",
        ExitCode.BUSY: "another writer held the store; run `anamnesis sync` again",
        ExitCode.DISK_FULL: "free some space on that disk, then run `anamnesis sync`",
        ExitCode.LOCAL_FAULT: "as the error says (no peer is at fault), then run `anamnesis sync`",
        ExitCode.REFUSED: "follow the instructions in the error, then run `anamnesis sync`",
    }
    what = last.get("error") or last.get("outcome")
    fix = fixes.get(code, "") if isinstance(code, int) else ""
    return [
        Finding(
            str(log_path(store)),
            f"the last sync ({last.get('at', '?')}) failed with exit {code}: {what}",
            fix or "run `anamnesis sync` to see whether it still fails",
        )
    ]


def _watch_findings(store: Store, why: str | None) -> list[Finding]:
    """A running watch that still runs the code from before an upgrade; a sync timer whose files
    are there but that does not run (`why`: `schedule_inactive`), never enabled or with no user
    session to run it in."""
    findings = []
    if why and not watch_running(store):
        findings.append(
            Finding(
                "the sync timer",
                f"is installed but not running ({why}): nothing syncs this machine by itself",
                "`anamnesis schedule install` starts it; on a machine you log out of, "
                "`loginctl enable-linger $USER` keeps user timers running; or keep `anamnesis watch` running",
            )
        )
    pid = outdated_watch(store)
    if pid is None:
        return findings
    return [
        *findings,
        Finding(
            f"anamnesis watch (pid {pid})",
            "runs the code from before an upgrade: what the new version fixes does not reach its syncs",
            "restart it: `anamnesis schedule install --watch` restarts the service; a watch started by "
            f"hand: `kill {pid}`, then `anamnesis watch` again",
        )
    ]


def _old_hook_findings() -> list[Finding]:
    """Hooks anamnesis-memory 0.1.3 left in Claude Code's settings: that program runs in every
    session and writes into this store (its `capture` commits, makes `local/`, adds tables)."""
    path, events = find_old_hooks()
    if not events:
        return []
    return [
        Finding(
            str(path),
            f"hooks of anamnesis-memory 0.1.3 ({', '.join(events)}) run that program in every Claude Code"
            " session, against this store",
            "run `anamnesis init --remove-old-hooks` (it removes them, with a backup of the file)",
        )
    ]


def _peer_findings(store: Store) -> list[Finding]:
    """Peers no sync has reached for a day or more (a laptop asleep for a night is normal)."""
    try:
        return [Finding(p.where, p.problem, p.fix) for p in peer_problems(store)]
    except AnamnesisError:
        return []  # a broken settings.json is reported on its own


def _relay_findings(store: Store, not_running: str | None) -> list[Finding]:
    """A machine's store integrates what others push into it only when it syncs: work pushed here
    that waits while nothing here syncs by itself (a timer that does not run, `not_running`, is
    none); a peer that never took in what we pushed there."""
    try:
        untaken = untaken_pushes(store)
    except AnamnesisError:
        return []  # a broken settings.json is reported on its own
    findings = [
        Finding(
            f"peer {item.peer.name} ({item.peer.url})",
            f"what this machine pushed there {ago(item.pushed_at)} is still not in its notes, although its "
            f"main was fetched since ({item.peer.last_ok}): it integrates what others push only when it syncs, "
            "and nothing there seems to (no timer, no `anamnesis watch`)",
            f"on {item.peer.name}: `anamnesis schedule install` (or `--watch`), or `anamnesis sync` once",
        )
        for item in untaken
    ]
    waiting = [m for m in incoming_machines(store) if m.waiting]
    if not waiting or (schedule_installed(store) and not not_running) or watch_running(store):
        return findings
    who = ", ".join(f"{m.machine} ({m.waiting})" for m in waiting)
    return [
        *findings,
        Finding(
            str(store.memory),
            f"commits pushed here by {who} wait to be integrated, and no sync timer or `anamnesis watch` "
            "runs here: they reach this machine's notes, and the machines that sync with it, only "
            "when someone runs `anamnesis sync` here",
            "`anamnesis sync` now; `anamnesis schedule install` (or `--watch`) to do it by itself",
        )
    ]


def _mirror_findings(store: Store) -> list[Finding]:
    """A mirrored project folder that is gone: its mirror imports nothing, and says nothing."""
    return [
        Finding(
            f"mirror of {source}",
            f"{folder} is gone (moved or deleted): nothing Claude Code remembers in that project "
            "reaches your notes any more",
            f"in the project's new folder, `anamnesis import {source} --mirror`; then "
            f"`anamnesis import {source} --no-mirror {folder}` to forget the old one",
        )
        for source, folder in gone_mirrors(store)
    ]


def _queue_findings(store: Store) -> list[Finding]:
    """Session notes captured while memory/ could not be written, still waiting."""
    waiting = queued_notes(store)
    if not waiting:
        return []
    return [
        Finding(
            str(waiting[0].parent),
            f"{plural(len(waiting), 'session note')} captured while memory/ was mid-rebase or on another branch"
            f" {'is' if len(waiting) == 1 else 'are'} waiting to be written",
            "once memory/ is back on main, the next sync or session capture writes them",
        )
    ]


def _index_findings(store: Store) -> list[Finding]:
    findings: list[Finding] = []
    try:
        index = open_index(store)
    except Exception as exc:  # a broken index is a finding, not a crash
        return [_index_failure(store, "cannot open the index", exc)]
    with index:
        try:
            report = index.refresh()
        except Exception as exc:
            return [_index_failure(store, "cannot bring the index up to date", exc)]
        if report.changed and not report.rebuilt:
            findings.append(
                Finding(
                    str(store.index_path),
                    f"index was out of date by {plural(report.changed, 'note')} (now updated)",
                    "nothing: it refreshes itself before every search; if this repeats, check file times",
                    level=SUGGESTION,  # notes saved by hand a moment ago: nothing is wrong
                )
            )
        for note_id, paths in index.shared_ids():  # a file copied by hand: one id, two notes
            findings.append(
                Finding(paths, f"these notes share the id {note_id}", "delete the `id:` line of the copy")
            )
        for relpath, problems in note_problems(store, index):
            findings.append(Finding(relpath, "; ".join(problems), first_fix(problems)))
        findings.extend(supersession_findings(store, index))
        findings.extend(alias_findings(store, index))
    return findings


def alias_findings(store: Store, index: Index) -> list[Finding]:
    """Notes filed under a key that is now an alias: written on a machine that had not synced the
    rename yet. A checkout finds the project the alias names, so it never sees them."""
    aliases = {alias: target for alias, target in list_aliases(store)}
    stranded: dict[str, list[str]] = {}
    for path, _id, _title, project in index.keys_with_project():
        if project and project.lower() in aliases:
            stranded.setdefault(project, []).append(path)
    return [
        Finding(
            ", ".join(sorted(paths)[:3]) + (", …" if len(paths) > 3 else ""),
            f"{plural(len(paths), 'note')} filed under {key}, which is now an alias of {aliases[key.lower()]}:"
            " its checkouts do not see them",
            f"anamnesis project merge {key} {aliases[key.lower()]}",
        )
        for key, paths in sorted(stranded.items())
    ]


def note_problems(store: Store, index: Index) -> list[tuple[str, list[Problem]]]:
    """The files under memory/ with something wrong that a person should fix, and what: what the
    index found, less what is no problem (docs/notes.md: a file with no front matter is a note
    like any other). `doctor` lists them; `status` counts them."""
    found: list[tuple[str, list[Problem]]] = []
    for relpath, _words in index.problems():
        problems = [p for p in file_problems(store, relpath) if p.kind is not ProblemKind.NO_FRONT_MATTER]
        if problems:
            found.append((relpath, problems))
    return found


def _index_failure(store: Store, what: str, exc: Exception) -> Finding:
    """The index failed: on a full disk SQLite says "disk I/O error", which no reindex mends."""
    if is_out_of_space(exc, store.home):
        free = free_bytes(store.home)
        room = f" ({human_bytes(free)} free)" if free is not None else ""
        return Finding(
            str(store.index_path),
            f"{what}: {exc}, because the disk is full{room}; the index itself is not damaged by it",
            "free some space; the index catches up by itself (no reindex needed)",
        )
    return Finding(str(store.index_path), f"{what}: {exc}", "run `anamnesis reindex`")


def supersession_findings(store: Store, index: Index) -> list[Finding]:
    """`supersedes` links to no note (problems), and unlinked notes that look like one (suggestions).

    Two notes look like one when they are of one project (or both global)
    and one type, semantic or procedural, are not linked by `supersedes`
    (directly or through other notes), and their titles share most of their
    words. Likely the newer one corrects the older.
    """
    hits = [h for h in index.list_notes(limit=None) if h.path]
    ids = {h.id for h in hits}
    links = read_links(store, [h.path for h in hits])
    findings: list[Finding] = []
    joined = Components()
    by_path = {h.path: h for h in hits}
    for relpath, targets in sorted(links.items()):
        for target in targets:
            joined.join(by_path[relpath].id, target)
            if target not in ids:
                findings.append(
                    Finding(
                        relpath,
                        f"supersedes {target}, which is no note's id",
                        "correct the id in `supersedes:`, or if the old note was deleted on purpose "
                        f"drop the link: `anamnesis edit {by_path[relpath].id} --no-supersedes`",
                    )
                )
    kept = [h for h in hits if h.type in SIMILAR_TYPES and not h.conflicted]
    pairs = similar_pairs(
        [((h.project, h.type), h.title) for h in kept],
        skip=lambda i, j: kept[i].id == kept[j].id or joined.find(kept[i].id) == joined.find(kept[j].id),
        limit=MAX_SUGGESTIONS + 1,
    )
    for i, j, _score in pairs[:MAX_SUGGESTIONS]:
        newer, older = sorted((kept[i], kept[j]), key=lambda h: (h.updated, h.path), reverse=True)
        findings.append(
            Finding(
                f"{newer.path}, {older.path}",
                f"these may say the same thing differently: {newer.title!r} ({newer.updated[:10]})"
                f" and {older.title!r} ({older.updated[:10]})",
                f"if the newer replaces the older, link them: `anamnesis edit {newer.id} --supersedes {older.id}`",
                level=SUGGESTION,
            )
        )
    if len(pairs) > MAX_SUGGESTIONS:
        findings.append(
            Finding(
                str(store.memory),
                f"more notes look alike; only the first {MAX_SUGGESTIONS} pairs are listed",
                "link or reword those first, then run doctor again",
                level=SUGGESTION,
            )
        )
    return findings
