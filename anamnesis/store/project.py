"""The project key: the same on every machine wherever the checkout lives.

Order: a `.anamnesis-project` marker file committed in the project (first
line is the key), else the normalised URL of the repo's `origin` remote (or
its first remote), else the folder name. Reads .git/config directly, no
subprocess, because the hooks call this on every session start.

A key found so is then looked up in the synced project aliases
(memory/aliases/, written by `anamnesis project alias` and `project rename`):
a repository renamed or moved to another host or organisation keeps finding
the notes filed under its old key, on every machine, without moving them.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from anamnesis.base.errors import AnamnesisError, UsageError
from anamnesis.base.paths import default_home
from anamnesis.base.text import plural

MARKER = ".anamnesis-project"
MAX_KEY = 200
ALIASES_DIR = "aliases"  # under memory/: one small file per alias, so two machines adding aliases never conflict
ALIAS_SUFFIX = ".alias"
MAX_ALIAS_HOPS = 8
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
_SCP_REMOTE = re.compile(r"^[\w.\-]+@[\w.\-]+:(?!//)")  # git@github.com:acme/api.git


def check_project_key(key: str) -> str:
    """`key` without surrounding blanks, or UsageError when it cannot be a project key.

    The one rule for a key given by hand (CLI `-p`, MCP `project`): one line
    of at most 200 characters with a letter or digit, and not a path — no
    leading `/`, `~` or `\\`, no drive letter, no backslash, no empty, `.`,
    `..` or `.git` part between slashes. A key names a project the same way
    on every machine (`github.com/acme/api`); a path would be stored under a
    mangled folder name (`/abs/path` as `projects/abs-path`, `.git` as `projects/git`).
    A key that starts with a host (`GitHub.com/Acme/API`) is lower-cased, as the key made from a
    checkout's remote is, so both name one project.
    """
    if not isinstance(key, str):
        raise UsageError("a project key must be text")
    key = key.strip()
    if "://" in key or _SCP_REMOTE.match(key):  # a remote's URL: the key made from it, as for a checkout
        key = normalize_remote(key)
    why = None
    if not key:
        why = "it is empty"
    elif len(key) > MAX_KEY:
        why = f"it is {plural(len(key), 'character')}; the limit is {MAX_KEY}"
    elif any(ord(c) < 32 or ord(c) == 127 for c in key):
        why = "it holds a line break or control character"
    elif not any(c.isalnum() for c in key):
        why = "it has no letter or digit"
    elif key.startswith(("/", "~", "\\")) or _DRIVE.match(key) or "\\" in key:
        why = "it is a path, not a key"
    elif any(part.strip() in ("", ".", "..") or part.strip().lower() == ".git" for part in key.split("/")):
        why = "it has an empty, '.', '..' or '.git' part"
    if not why and _holds_a_secret(key):
        raise UsageError(
            "project key is refused: it holds what looks like a secret (a token); "
            "use the repository's key, like github.com/acme/api"
        )
    if why:
        raise UsageError(f"project key {key!r} is refused: {why}; use a key like github.com/acme/api")
    if "." in key.split("/", 1)[0] and "/" in key:
        return key.lower()  # a host and a path, like a remote's: spelt as `normalize_remote` spells one
    return key


def _holds_a_secret(key: str) -> bool:
    """A token pasted into a key would name a folder, front matter and commits (its case too:
    keys are lower-cased, so the upper-cased form is tried as well)."""
    from anamnesis.store.redaction import redact_field  # lazy: the hooks read keys, the rules are big

    return any(redact_field(form) != form for form in (key, key.upper()))


def find_repo_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` holding .git (dir or worktree file)."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def normalize_remote(url: str) -> str:
    """'git@github.com:Acme/API.git' and 'https://github.com/acme/api' -> 'github.com/acme/api'."""
    url = url.strip()
    scp = re.match(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$", url)
    if scp and "://" not in url:
        host, path = scp.group(1), scp.group(2)
    else:
        match = re.match(r"^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?([^/:]+)(?::\d+)?(/.*)?$", url, re.I)
        if match:
            host, path = match.group(1), match.group(2) or ""
        else:  # a local path used as a remote
            host, path = "", url
    path = re.sub(r"\.git/?$", "", path.strip("/")).strip("/")
    path = re.sub(r"/+", "/", path)
    key = f"{host}/{path}" if host else path
    return key.lower()


def _git_dir(root: Path) -> Path:
    dotgit = root / ".git"
    if dotgit.is_file():
        text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            gitdir = Path(text.split(":", 1)[1].strip())
            gitdir = gitdir if gitdir.is_absolute() else (root / gitdir)
            common = gitdir / "commondir"
            if common.exists():
                return (gitdir / common.read_text().strip()).resolve()
            return gitdir
    return dotgit


def remote_url(root: Path) -> str | None:
    """The origin remote's URL (or the first remote's) from the repo's config."""
    config = configparser.RawConfigParser(strict=False)
    try:
        config.read(_git_dir(root) / "config", encoding="utf-8")
    except (configparser.Error, OSError):
        return None
    remotes = [s for s in config.sections() if s.startswith('remote "')]
    remotes.sort(key=lambda s: s != 'remote "origin"')
    for section in remotes:
        url = config.get(section, "url", fallback=None)
        if url:
            return url
    return None


def checkout_remote(cwd: Path | str) -> str | None:
    """The normalised remote URL (host/path, no user or password) of the repo `cwd` is in, if any."""
    root = find_repo_root(Path(cwd))
    url = remote_url(root) if root is not None else None
    return (normalize_remote(url) or None) if url else None


def project_key(cwd: Path | str) -> str:
    """The cross-machine key of the project that `cwd` is in (folder name as a last resort)."""
    return detect_project(cwd) or resolve_alias(Path(cwd).resolve().name.lower() or "root")


def detect_project(cwd: Path | str) -> str | None:
    """The project key from a marker file or a git repo around `cwd`, after aliases; None outside any project."""
    key = raw_project(cwd)
    return resolve_alias(key) if key else None


def raw_project(cwd: Path | str) -> str | None:
    """The key of `cwd`'s project before aliases: what its marker or remote says."""
    start = Path(cwd)
    root = find_repo_root(start)
    if root is not None and root == (default_home() / "memory").resolve():
        return None  # the memory repo itself is no project (its remotes are the peers)
    for folder in (start.resolve(), *start.resolve().parents):
        marker = folder / MARKER
        if marker.is_file():
            first = marker.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            if first and first[0].strip():
                try:  # the same rule as a key given by hand: `../../etc` names no project
                    return check_project_key(first[0])
                except AnamnesisError:
                    pass  # not a key: the remote or the folder says what project this is
        if root is not None and folder == root:
            break
    if root is not None:
        url = remote_url(root)
        if url:
            key = normalize_remote(url)
            if key:
                return key
        return root.name.lower()
    return None


def alias_file(memory: Path, key: str) -> Path:
    """Where the alias for `key` is kept: memory/aliases/<folder of the key>.alias."""
    folder = re.sub(r"[^A-Za-z0-9._-]+", "-", key).strip("-.").lower()[:100] or "unnamed"
    return memory / ALIASES_DIR / f"{folder}{ALIAS_SUFFIX}"


def read_alias(path: Path) -> tuple[str, str] | None:
    """(alias, project) from an alias file, None when it is missing or not one."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            fields.setdefault(name.strip().lower(), value.strip())
    alias, target = fields.get("alias"), fields.get("project")
    return (alias, target) if alias and target else None


def resolve_alias(key: str, memory: Path | None = None) -> str:
    """The project `key` is an alias of (following chains), else `key` itself.

    One small file read per hop, no index and no git: the hooks call this on
    every session start and prompt.
    """
    memory = memory if memory is not None else default_home() / "memory"
    seen = {key}
    for _ in range(MAX_ALIAS_HOPS):
        found = read_alias(alias_file(memory, key))
        if found is None or found[0] != key or found[1] in seen:
            return key
        key = found[1]
        seen.add(key)
    return key


def current_branch(cwd: Path | str) -> str | None:
    """The checked-out branch of the repo `cwd` is in ('HEAD' when detached), read from .git/HEAD."""
    root = find_repo_root(Path(cwd))
    if root is None:
        return None
    dotgit = root / ".git"
    head_dir = dotgit
    if dotgit.is_file():  # a worktree: HEAD lives in its own gitdir, not the common one
        text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            gitdir = Path(text.split(":", 1)[1].strip())
            head_dir = gitdir if gitdir.is_absolute() else root / gitdir
    try:
        head = (head_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if head.startswith("ref:"):
        ref = head.split(":", 1)[1].strip()
        return ref.removeprefix("refs/heads/")
    return "HEAD"
