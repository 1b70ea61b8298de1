"""Small text helpers the capture, injection and report code share."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """`count` with `word` in the right number: '1 note', '0 notes', '3 notes'.

    The one place a count meets its noun, so no message says `1 notes` or
    `note(s)`. `many` is the plural when adding an s is wrong ('copy',
    'copies'), or a phrase whose verb agrees ('note has', 'notes have').
    """
    return f"{count} {word if count == 1 else many or word + 's'}"


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
