"""Files shipped with the package (templates/, hooks/), found the same way installed or from a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # anamnesis/, above base/


def template_path(name: str) -> Path:
    """The path of a shipped template, installed (anamnesis/templates) or in a checkout (templates/)."""
    for folder in (_PACKAGE / "templates", _PACKAGE.parent / "templates"):
        candidate = folder / name
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"template {name!r} is missing from this installation")


def read_template(name: str) -> str:
    """The text of a shipped template."""
    return template_path(name).read_text(encoding="utf-8")
