"""The short memory block put into an agent's instructions file (AGENTS.md, GEMINI.md).

Agents without a SessionStart hook we can use do not get memory injected;
this block tells them the memory is there and when to use it. It sits between
two marker comments, so `uninstall` removes exactly the block and the blank
line init put before it, and a re-run replaces it in place.
"""

from __future__ import annotations

import re

BEGIN = "<!-- anamnesis:begin (added by `anamnesis init`; `anamnesis uninstall` removes it) -->"
END = "<!-- anamnesis:end -->"

BODY = """\
## Memory (Anamnesis)

You have a long-term memory that follows this person across sessions and machines: the
`anamnesis` MCP server's tools.

- Before exploring a codebase or a problem from scratch, `search` the memory: earlier
  sessions may already hold the decision, the command or the fix you need.
- When you learn something worth keeping (a decision and its reason, a command that
  works, a fix for an error that will come back, a preference the person states), `write`
  it as a note; `update` a note that has become wrong instead of adding a second one.
"""

_BLOCK_RE = re.compile(r"(\r?\n)?" + re.escape(BEGIN) + r".*?" + re.escape(END) + r"(?:\r?\n)?", re.S)


def block(newline: str = "\n") -> str:
    """The whole block, markers included, with the file's line ending."""
    text = f"{BEGIN}\n{BODY}{END}\n"
    return text.replace("\n", newline)


def _newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def add(text: str | None) -> str:
    """`text` with the block in it: replaced where it stands, else appended after a blank line."""
    text = text or ""
    newline = _newline_of(text)
    wanted = block(newline)
    match = _BLOCK_RE.search(text)
    if match:
        return text[: match.start()] + (match.group(1) or "") + wanted + text[match.end() :]
    if not text:
        return wanted
    if not text.endswith(("\n", "\r")):
        text += newline
    return text + newline + wanted


def remove(text: str) -> str:
    """`text` without the block and the blank line `add` put before it."""
    match = _BLOCK_RE.search(text)
    if not match:
        return text
    head, tail = text[: match.start()], text[match.end() :]
    if tail or not head.endswith("\n"):
        head += match.group(1) or ""  # not the blank line add() put before it at the end: keep it
    return head + tail


def present(text: str | None) -> bool:
    """Whether the block is in the text."""
    return bool(text) and _BLOCK_RE.search(text or "") is not None
