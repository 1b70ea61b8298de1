"""Repository-level git operations on memory/: create, commit, inspect.

Everything goes through `git.run_git`; callers hold the store lock.
"""

from __future__ import annotations

import os
from pathlib import Path

from anamnesis.base.errors import GitError
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.git import (
    OBJECT_ID,
    git_out,
    head_ref,
    lock_files,
    read_blobs,
    run_git,
    settle_git,
    tree_entries,
)
from anamnesis.base.paths import Store

BRANCH = "main"
# The subject of a merge of two histories that hold the same notes (`sync.treemerge.TreeMerger.join`):
# made by no machine in particular (every machine makes the very same commit), so none is named.
JOIN_SUBJECT = "anamnesis: join two histories of the same notes"
GITATTRIBUTES = "*.md text eol=lf\n"
GITIGNORE = (
    "# machine-local and half-written files never belong in memory/\n"
    ".DS_Store\n*.swp\n*.swx\n*~\n.#*\n4913\n*.tmp\n.obsidian/workspace*.json\n"
)


def init_repo(store: Store, machine: str) -> bool:
    """Create memory/ as a git repo on branch main with a first commit; False if it existed."""
    repo = store.memory
    if (repo / ".git").exists():
        return False
    repo.mkdir(parents=True, exist_ok=True)
    run_git(repo, "init", "-q", "-b", BRANCH)
    configure_repo(store, machine)
    atomic_write_text(repo / ".gitattributes", GITATTRIBUTES)
    atomic_write_text(repo / ".gitignore", GITIGNORE)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", f"{machine}: create memory store")
    return True


def configure_repo(store: Store, machine: str) -> None:
    """Local identity and settings so commits work on a machine with no git config."""
    repo = store.memory
    for key, value in (
        ("user.name", f"anamnesis@{machine}"),
        ("user.email", f"{machine}@anamnesis.invalid"),
        ("core.autocrlf", "false"),
        ("commit.gpgsign", "false"),
        ("pull.rebase", "true"),
    ):
        run_git(repo, "config", key, value)


def head(repo: Path) -> str | None:
    """The commit id of HEAD, or None in an empty repo.

    Read from the branch's own ref file when git keeps it as one (it does
    after every commit; every write asks twice); a packed or reftable ref, or
    anything unexpected, asks git.
    """
    ref = head_ref(repo)
    if ref.startswith("refs/heads/") and ".." not in ref:
        try:
            text = (repo / ".git" / ref).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            text = ""
        if OBJECT_ID.fullmatch(text):
            return text
    return run_git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).stdout.strip() or None


LITERAL = "--literal-pathspecs"  # a note named "[draft].md" is that file, not a glob matching d.md


def commit_paths(store: Store, paths: list[str], message: str) -> str | None:
    """Stage exactly `paths` (added, changed or deleted) and commit; None if nothing changed.

    The caller holds the store lock and began with `store.require_writable`,
    which finished any working-tree move a killed sync left half done, so the
    half-moved files are never committed as edits made here.
    """
    repo = store.memory
    gone = [p for p in paths if not os.path.lexists(repo / p)]
    if gone:  # drop paths neither on disk nor known to git (a note deleted before it was ever committed)
        known = set(git_out(repo, LITERAL, "ls-files", "-z", "--", *gone).split("\0"))
        paths = [p for p in paths if p not in gone or p in known]
    if not paths:
        return None
    try:
        run_git(repo, LITERAL, "add", "-A", "--", *paths)
    except GitError:
        # A git killed mid-write (a sync hit by SIGKILL) may have left its lock file
        # behind: clear it if no git process owns it, then try once more.
        if not lock_files(repo):
            raise
        settle_git(repo)
        run_git(repo, LITERAL, "add", "-A", "--", *paths)
    staged = git_out(repo, LITERAL, "diff", "--cached", "--no-renames", "--name-status", "-z", "--", *paths).split("\0")
    if not any(staged):
        return None
    added = [path for status, path in zip(staged[0::2], staged[1::2], strict=False) if status == "A"]
    moved_from = _moved_by_hand_from(repo, added)
    if moved_from:
        run_git(repo, LITERAL, "add", "-A", "--", *moved_from)
    run_git(repo, LITERAL, "commit", "-q", "--no-verify", "-m", message, "--", *paths, *moved_from)
    return head(repo)


def _moved_by_hand_from(repo: Path, added: list[str]) -> list[str]:
    """Paths a note this commit adds was moved from by hand (`mv` in a shell, a file manager): gone
    from the working tree, in HEAD with the same id (`notes.stated_id`). Committed with the note,
    the move is one change; left out, the commit would hold the note at both paths, and a peer that
    took that commit kept both (its edit of the old path beats the deletion that came later)."""
    notes = [path for path in added if path.lower().endswith(".md")]
    if not notes:
        return []
    gone = [p for p in git_out(repo, LITERAL, "ls-files", "--deleted", "-z").split("\0") if p.lower().endswith(".md")]
    if not gone:
        return []
    # lazy: notes (front matter) only when a note was moved by hand, which is rare
    from anamnesis.base.notes import stated_id

    oids = {path: oid for path, (_mode, oid) in tree_entries(repo, "HEAD", gone, check=False).items()}
    blobs = read_blobs(repo, list(oids.values()))
    was_at: dict[str, list[str]] = {}
    for path, oid in oids.items():
        if name := stated_id(blobs.get(oid, b"").decode("utf-8", "surrogateescape"), path):
            was_at.setdefault(name, []).append(path)
    found: list[str] = []
    for path in notes:
        try:
            text = (repo / path).read_bytes().decode("utf-8", "surrogateescape")
        except OSError:
            continue
        places = was_at.get(stated_id(text, path) or "", [])
        if len(places) == 1:  # more than one: copies a person made, not one note moved
            found.append(places[0])
    return found


def commit_all(store: Store, message: str) -> str | None:
    """Stage everything in the working tree and commit; None if nothing changed."""
    repo = store.memory
    run_git(repo, "add", "-A")
    if not run_git(repo, "diff", "--cached", "--quiet", check=False).returncode:
        return None
    run_git(repo, "commit", "-q", "--no-verify", "-m", message)
    return head(repo)


def changed_paths(repo: Path, old: str | None, new: str | None) -> list[str]:
    """Paths that differ between two commits (all tracked paths if `old` is None)."""
    if not new or old == new:
        return []
    if old is None:
        out = git_out(repo, "ls-tree", "-r", "--name-only", "-z", new)
    else:
        out = git_out(repo, "diff", "--name-only", "-z", "--no-renames", old, new)
    return [p for p in out.split("\0") if p]


def root_commits(repo: Path) -> list[str]:
    """The root commits of HEAD's history, sorted (one, unless unrelated histories were merged)."""
    proc = run_git(repo, "rev-list", "--max-parents=0", "HEAD", check=False)
    return sorted(line for line in proc.stdout.split() if line) if proc.returncode == 0 else []


def store_id(store: Store) -> str | None:
    """The id all machines of one memory share: its root commit (the smallest, if several).

    Every clone of a memory descends from the first commit `init` made, so two
    different people's stores never have the same id, and no id has to be
    stored or synced. None in an empty repo.
    """
    roots = root_commits(store.memory)
    return roots[0] if roots else None


def contains_commit(repo: Path, commit: str) -> bool:
    """True if `commit` is HEAD or one of its ancestors (False if unknown here)."""
    proc = run_git(repo, "merge-base", "--is-ancestor", commit, "HEAD", check=False)
    return proc.returncode == 0
