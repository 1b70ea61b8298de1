"""`anamnesis --help` without loading rich: the top-level command list, drawn by hand.

Typer draws help with rich, whose help module alone (markdown, tracebacks,
syntax colours) costs more start-up time than the rest of the command line
together. The top-level help is the one screen people call often, and it is
simple: a usage line, the program's description, the options, and every
command in its panel with the first paragraph of its help. So it is drawn
here from the typer app's own registrations (nothing is listed twice);
`anamnesis COMMAND --help` still goes through typer and rich.
"""

from __future__ import annotations

import inspect
import os
import shutil
import sys
import textwrap
from typing import Any

import typer

DEFAULT_PANEL = "Commands"
_BOLD, _CYAN, _DIM, _RESET = "\x1b[1m", "\x1b[1;36m", "\x1b[2m", "\x1b[0m"


def _first_paragraph(text: str | None) -> str:
    text = inspect.cleandoc(text or "").split("\f")[0]
    return " ".join(text.split("\n\n")[0].split())


def _text(value: Any) -> str | None:
    """A help value set by hand (typer leaves a placeholder object where none was)."""
    return value if isinstance(value, str) else None


def commands_by_panel(app: typer.Typer) -> dict[str, list[tuple[str, str]]]:
    """(name, one-paragraph help) of every visible command and group, by panel, in typer's order:
    commands before groups, panels in the order they first appear."""
    panels: dict[str, list[tuple[str, str]]] = {}
    for command in app.registered_commands:
        if command.hidden or command.callback is None:
            continue
        name = command.name or command.callback.__name__.lower().replace("_", "-")
        helptext = _text(command.short_help) or _text(command.help) or inspect.getdoc(command.callback)
        panels.setdefault(_text(command.rich_help_panel) or DEFAULT_PANEL, []).append((name, _first_paragraph(helptext)))
    for group in app.registered_groups:
        sub = group.typer_instance
        if group.hidden or sub is None or not group.name:
            continue
        helptext = _text(group.help) or _text(sub.info.help)
        if helptext is None and sub.registered_callback is not None and sub.registered_callback.callback is not None:
            helptext = inspect.getdoc(sub.registered_callback.callback)
        panels.setdefault(_text(group.rich_help_panel) or DEFAULT_PANEL, []).append((group.name, _first_paragraph(helptext)))
    return panels


def _options(app: typer.Typer) -> list[tuple[str, str, str]]:
    """(long name, short name, help) of the root options, --help last."""
    rows: list[tuple[str, str, str]] = []
    callback = app.registered_callback.callback if app.registered_callback else None
    if callback is not None:
        for parameter in inspect.signature(callback).parameters.values():
            info = parameter.default
            if not isinstance(info, typer.models.OptionInfo):
                continue
            decls = [d for d in (info.param_decls or ()) if d.startswith("-")]
            long = next((d for d in decls if d.startswith("--")), "")
            short = next((d for d in decls if not d.startswith("--")), "")
            if info.hidden:
                continue
            rows.append((long, short, _first_paragraph(info.help)))
    rows.append(("--help", "-h", "Show this message and exit."))
    return rows


def _program() -> str:
    """The name typer would show: `anamnesis`, or `python -m anamnesis`."""
    argv0 = sys.argv[0] if sys.argv else "anamnesis"
    if os.path.basename(argv0) == "__main__.py":
        return "python -m anamnesis"
    return os.path.basename(argv0) or "anamnesis"


def _width() -> int:
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((80, 24)).columns)
    try:
        return max(40, int(os.environ.get("COLUMNS", "80")))
    except ValueError:
        return 80


def _use_color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def _panel(title: str, rows: list[tuple[str, str]], width: int, color: bool, left_width: int = 0) -> list[str]:
    """A rounded box: the title in its top edge, one row per (left, right), right wrapped."""
    inner = width - 4  # "│ " and " │"
    left_width = max(left_width, *(len(left) for left, _ in rows))
    right_width = max(10, inner - left_width - 2)
    dim = (lambda s: f"{_DIM}{s}{_RESET}") if color else (lambda s: s)
    lines = [dim("╭─ ") + title + dim(" " + "─" * max(0, width - len(title) - 5) + "╮")]
    for left, right in rows:
        wrapped = textwrap.wrap(right, right_width) or [""]
        for i, part in enumerate(wrapped):
            name = left if i == 0 else ""
            shown = f"{_CYAN}{name.ljust(left_width)}{_RESET}" if color and name else name.ljust(left_width)
            pad = inner - left_width - 2 - len(part)
            lines.append(dim("│ ") + shown + "  " + part + " " * max(0, pad) + dim(" │"))
    lines.append(dim("╰" + "─" * (width - 2) + "╯"))
    return lines


def render(app: typer.Typer, width: int | None = None, color: bool | None = None) -> str:
    """The top-level help text of `app`."""
    width = width or _width()
    color = _use_color() if color is None else color
    usage = f"{_program()} [OPTIONS] COMMAND [ARGS]..."
    lines = ["", f" {_BOLD}Usage:{_RESET} {usage}" if color else f" Usage: {usage}", ""]
    description = app.info.help if isinstance(app.info.help, str) else ""
    for paragraph in inspect.cleandoc(description).split("\n\n"):
        lines.extend(" " + line for line in textwrap.wrap(" ".join(paragraph.split()), width - 2))
        lines.append("")
    options = _options(app)
    long_width = max(len(long) for long, _, _ in options)
    lines.extend(_panel("Options", [(f"{long:<{long_width}}  {short}", text) for long, short, text in options], width, color))
    panels = commands_by_panel(app)
    name_width = max((len(name) for rows in panels.values() for name, _ in rows), default=0)
    for title, rows in panels.items():  # one name column for every panel, as typer draws them
        lines.extend(_panel(title, rows, width, color, name_width))
    return "\n".join(lines) + "\n"
