"""Paths from the outside (CLI, MCP, web, a link in a note) checked to stay inside memory/.

Every writer and reader of a note by path goes through `safe_path`, so no
`..`, absolute path or symlinked folder reaches a file outside the store or
inside its .git folder.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from anamnesis.base.errors import OutsideStore
from anamnesis.base.paths import Store


def safe_path(store: Store, relpath: str) -> Path:
    """The absolute path of `relpath` inside memory/, or OutsideStore.

    Rejects absolute paths, '..', the .git folder and anything that resolves
    (through symlinks) outside memory/.
    """
    if not relpath or "\0" in relpath:
        raise OutsideStore("empty or invalid note path")
    pure = PurePosixPath(relpath.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or (pure.parts and pure.parts[0] == ".git"):
        raise OutsideStore(f"path {relpath!r} is outside the store")
    root = store.memory.resolve()
    full = (store.memory / pure).resolve()
    if full != root and root not in full.parents:
        raise OutsideStore(f"path {relpath!r} resolves outside the store")
    if full == root / ".git" or root / ".git" in full.parents:  # e.g. through a symlinked folder
        raise OutsideStore(f"path {relpath!r} resolves into the git folder")
    return store.memory / pure


def relpath_of(store: Store, path: Path) -> str:
    """memory/-relative posix path of an absolute path inside the store."""
    return path.absolute().relative_to(store.memory.absolute()).as_posix()
