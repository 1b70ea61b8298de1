"""How this copy of Anamnesis was installed, and how `uninstall --everything` removes it.

scripts/install makes a virtualenv of its own and links `anamnesis` into ~/.local/bin; it leaves a
marker file in the venv (`anamnesis-install`, naming the link) so that removal deletes exactly those
two and nothing a person made. Any other install (pipx, uv, a venv of the person's own, a clone's
editable .venv) is left alone: `hint` says which command removes it.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

MARKER = "anamnesis-install"  # written by scripts/install into the venv it makes
DISTRIBUTION = "anamnesis-memory"

Kind = Literal["script", "pipx", "uv", "editable", "venv", "python"]


@dataclass(frozen=True)
class Installation:
    """Where the running program lives and what put it there."""

    kind: Kind
    prefix: Path  # the environment (sys.prefix)
    link: Path | None = None  # scripts/install's link into ~/.local/bin, while it still points here

    def removable(self) -> bool:
        """Only what scripts/install made is removed; anything else gets a hint."""
        return self.kind == "script"

    def planned(self) -> list[str]:
        """What `remove` would delete, or the command that removes the program (nothing deleted)."""
        if not self.removable():
            return [self.hint()]
        lines = [f"remove the program: {self.prefix} (the virtualenv scripts/install made)"]
        if self.link is not None:
            lines.append(f"remove the command: {self.link}")
        return lines

    def hint(self) -> str:
        """The command a person runs to remove an install we did not make."""
        python = self.prefix / "bin" / "python"
        if self.kind == "pipx":
            return f"the program was installed with pipx: remove it with `pipx uninstall {self.prefix.name}`"
        if self.kind == "uv":
            return f"the program was installed with uv: remove it with `uv tool uninstall {self.prefix.name}`"
        if self.kind == "editable":
            return (
                f"the program runs from a clone (an editable install in {self.prefix}): "
                f"`{python} -m pip uninstall {DISTRIBUTION}`, or delete that folder"
            )
        if self.kind == "venv":
            return f"the program is installed in the virtualenv {self.prefix}: `{python} -m pip uninstall {DISTRIBUTION}`"
        return f"the program is installed for {sys.executable}: `{sys.executable} -m pip uninstall {DISTRIBUTION}`"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "prefix": str(self.prefix),
            "link": str(self.link) if self.link else None,
            "removable": self.removable(),
        }


def current_installation(prefix: Path | None = None) -> Installation:
    """The installation of the program running now (or of the environment at `prefix`)."""
    prefix = (prefix or Path(sys.prefix)).absolute()
    marker = prefix / MARKER
    if marker.is_file() and (prefix / "pyvenv.cfg").is_file():
        return Installation("script", prefix, _our_link(prefix, marker))
    parts = prefix.parts
    if len(parts) >= 3 and parts[-3:-1] == ("pipx", "venvs"):
        return Installation("pipx", prefix)
    if len(parts) >= 3 and parts[-3:-1] == ("uv", "tools"):
        return Installation("uv", prefix)
    if _editable(prefix):
        return Installation("editable", prefix)
    if (prefix / "pyvenv.cfg").is_file():
        return Installation("venv", prefix)
    return Installation("python", prefix)


def _our_link(prefix: Path, marker: Path) -> Path | None:
    """The link the marker names, if it is a symlink to this venv's command (else it is not ours now)."""
    for line in marker.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("link="):
            link = Path(line.removeprefix("link="))
            if link.is_symlink() and link.resolve() == (prefix / "bin" / "anamnesis").resolve():
                return link
    return None


def _editable(prefix: Path) -> bool:
    """Whether pip recorded this environment's copy of the package as an editable install."""
    for record in prefix.glob("lib/python3*/site-packages/anamnesis_memory-*.dist-info/direct_url.json"):
        try:
            return bool(json.loads(record.read_text()).get("dir_info", {}).get("editable"))
        except (OSError, ValueError):
            return False
    return False


def remove_installation(installation: Installation) -> list[str]:
    """Delete the link and the venv scripts/install made (call it last: the running code goes with it)."""
    if not installation.removable():
        return [installation.hint()]
    done = []
    if installation.link is not None:
        installation.link.unlink(missing_ok=True)
        done.append(f"removed {installation.link}")
    shutil.rmtree(installation.prefix)
    done.append(f"removed {installation.prefix}")
    parent = installation.prefix.parent  # ~/.local/share/anamnesis, made for the venv alone
    if parent.name == "anamnesis" and not any(parent.iterdir()):
        parent.rmdir()
    return done
