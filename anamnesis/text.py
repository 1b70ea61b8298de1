"""Small text helpers the capture and injection code share."""

from __future__ import annotations


def trim(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a line or word end, marked with …."""
    text = text.strip()
    if len(text) <= limit:
        return text
    if limit < 2:
        return ""
    room = limit - 2
    cut = text.rfind("\n", 0, room)
    if cut < room * 0.6:
        cut = text.rfind(" ", 0, room)
    if cut < room * 0.6:
        cut = room
    return text[:cut].rstrip() + " …"
