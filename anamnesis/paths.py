"""Where a store keeps its files, so every adapter agrees on the layout.

Only `memory/` travels between machines; everything else under the home is
machine-local and lives outside the git tree on purpose.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from anamnesis.errors import StoreMissing

HOME_ENV = "ANAMNESIS_HOME"


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
        return (self.memory / ".git").exists() and self.settings_path.exists()

    def require(self) -> Store:
        """Return self, or raise a StoreMissing that tells the user what to run."""
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
