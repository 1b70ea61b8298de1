"""Where a store keeps its files, so every adapter agrees on the layout.

Only `memory/` travels between machines; everything else under the home is
machine-local and lives outside the git tree on purpose.

The published anamnesis-memory 0.1.3 package (another program with the same
command name) keeps its store in the same folder by default. Such a store is
recognised here, before any command reads or writes a file in it: a
`config.json` where this store has `settings.json`, notes in
`memory/<procedural|semantic|episodic>/` where this store has `global/` and
`projects/`. Every command refuses it with one line saying what to do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from anamnesis.base.errors import OldStore, StoreMissing

HOME_ENV = "ANAMNESIS_HOME"
OLD_TYPES = ("procedural", "semantic", "episodic")  # 0.1.3 keeps its notes in memory/<type>/
OLD_SUFFIX = "-0.1.3"  # where `init --move-old-store` moves such a store: beside it, this added


def is_old_store(home: Path) -> bool:
    """Whether `home` holds a store of the anamnesis-memory 0.1.3 package (a few stat calls)."""
    config = (home / "config.json").is_file()
    typed = any((home / "memory" / kind).is_dir() for kind in OLD_TYPES)
    if (home / "settings.json").exists():
        return config and typed  # an old store a version before this one wrote its settings into
    return config or typed


def old_store_aside(home: Path) -> Path:
    """Where `init --move-old-store` moves a 0.1.3 store: `<home>-0.1.3`, numbered if that is taken."""
    target = home.with_name(home.name + OLD_SUFFIX)
    number = 1
    while target.exists() or target.is_symlink():
        number += 1
        target = home.with_name(f"{home.name}{OLD_SUFFIX}-{number}")
    return target


def old_store_error(home: Path, hint: str | None = None) -> OldStore:
    """The one line every command says when ANAMNESIS_HOME holds a 0.1.3 store."""
    what = hint or "run `anamnesis init` to move it aside and import its notes in one step"
    return OldStore(
        f"{home} holds a store of anamnesis-memory 0.1.3 (another program with the same command name),"
        f" which this program neither opens nor changes; {what} (see docs/import.md)"
    )


def default_home() -> Path:
    """ANAMNESIS_HOME if set, else ~/.anamnesis."""
    env = os.environ.get(HOME_ENV)
    return Path(env).expanduser() if env else Path.home() / ".anamnesis"


@dataclass(frozen=True)
class Store:
    """The folders and files of one store (one ANAMNESIS_HOME)."""

    home: Path

    @property
    def memory(self) -> Path:
        """The git repository of notes: the only thing that is synced."""
        return self.home / "memory"

    @property
    def settings_path(self) -> Path:
        return self.home / "settings.json"

    @property
    def index_path(self) -> Path:
        return self.home / "index.db"

    @property
    def state_dir(self) -> Path:
        """Machine-local runtime state: lock, logs, spool, heartbeats."""
        return self.home / "state"

    @property
    def lock_path(self) -> Path:
        return self.state_dir / "store.lock"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    def exists(self) -> bool:
        """Whether a store of this program is here (a 0.1.3 store is not)."""
        return (self.memory / ".git").exists() and self.settings_path.exists() and not self.is_old()

    def is_old(self) -> bool:
        """Whether the home holds an anamnesis-memory 0.1.3 store (see the module docstring)."""
        return is_old_store(self.home)

    def refuse_old(self) -> Store:
        """Return self, or raise OldStore (one line: what it is, what to do) for a 0.1.3 store."""
        if self.is_old():
            raise old_store_error(self.home)
        return self

    def require(self) -> Store:
        """Return self, or raise a StoreMissing that tells the user what to run."""
        self.refuse_old()
        if not self.exists():
            if self.settings_path.exists():
                raise StoreMissing(
                    f"{self.memory} is missing or is not a git repository — run `anamnesis init` to create it "
                    "again (with a peer configured, its first sync brings your notes back)"
                )
            raise StoreMissing(f"no store at {self.home} — run `anamnesis init` (or set {HOME_ENV})")
        return self


def open_store(home: Path | str | None = None) -> Store:
    """The store at `home`, or at ANAMNESIS_HOME / ~/.anamnesis."""
    return Store(Path(home).expanduser().absolute() if home else default_home().absolute())
