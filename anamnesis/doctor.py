"""Health checks behind `anamnesis doctor`: each finding says where, what and how to fix it."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import Any

from anamnesis.paths import Store

_WINDOWS_RESERVED = re.compile(r"^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?$", re.I)
_BAD_CHARS = re.compile(r'[<>:"\\|?*\x00-\x1f]')


@dataclass
class Finding:
    """One problem doctor found."""

    where: str
    problem: str
    fix: str = ""

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
    """Every problem with this store that a person should know about."""
    findings: list[Finding] = []
    if not store.exists():
        return [Finding(str(store.home), "no store here", "run `anamnesis init`")]
    mode = stat.S_IMODE(store.settings_path.stat().st_mode)
    if mode & 0o077:
        findings.append(
            Finding(str(store.settings_path), f"mode is {mode:o}; it should be 600", f"chmod 600 {store.settings_path}")
        )
    from anamnesis.settings import load_settings

    try:
        load_settings(store)
    except Exception as exc:
        findings.append(Finding(str(store.settings_path), str(exc), "fix the JSON by hand"))
    from anamnesis.recovery import git_processes_in, lock_files, wedged

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
    findings.extend(_index_findings(store))
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
            if not os.access(full, os.R_OK):
                findings.append(Finding(relpath, "is not readable by you", f"chmod u+r {full}"))
    return findings


def _index_findings(store: Store) -> list[Finding]:
    from anamnesis.index import open_index

    findings: list[Finding] = []
    try:
        index = open_index(store)
    except Exception as exc:  # a broken index is a finding, not a crash
        return [Finding(str(store.index_path), f"cannot open the index: {exc}", "run `anamnesis reindex`")]
    with index:
        report = index.refresh()
        if report.changed and not report.rebuilt:
            findings.append(
                Finding(
                    str(store.index_path),
                    f"index was out of date by {report.changed} notes (now updated)",
                    "nothing: it refreshes itself; if this repeats, check file times",
                )
            )
        twins = index.conn.execute(
            "SELECT id, group_concat(path, ', ') FROM notes GROUP BY id HAVING count(*) > 1 ORDER BY id"
        ).fetchall()
        for note_id, paths in twins:  # a file copied by hand: one id, two notes
            findings.append(
                Finding(paths, f"these notes share the id {note_id}", "delete the `id:` line of the copy")
            )
        for relpath, problem in index.problems():
            fix = ""
            if "no front matter" in problem:
                fix = "add a front matter block (see docs/notes.md)"
            elif "front matter" in problem:
                fix = "fix the front matter between the '---' lines (see docs/notes.md)"
            elif "unknown type" in problem:
                fix = "set `type:` to semantic, procedural, episodic or preference"
            elif "file name is not valid UTF-8" in problem:
                fix = "rename the file (its name, not its text, has the bad bytes)"
            elif "UTF-8" in problem:
                fix = "save the file as UTF-8"
            if "conflict" in problem:
                fix = "resolve the conflict in an editor, or `anamnesis resolve`"
            elif "symlink" in problem or "binary" in problem:
                fix = "move it out of memory/"
            findings.append(Finding(relpath, problem, fix))
    return findings
