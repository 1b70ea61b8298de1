"""Links between notes: `[[wikilinks]]` and relative markdown links to other notes.

People write notes in Obsidian-style editors as often as agents do, so both
link styles count. The dashboard's note page and memory map use this; a
future `backlinks` command can too.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

WIKILINK_RE = re.compile(r"\[\[([^\[\]\n|#]+)(#[^\[\]\n|]*)?(?:\|([^\[\]\n]*))?\]\]")
# The label excludes "[" so a long run of brackets is scanned once, not once per bracket.
MDLINK_RE = re.compile(r"\[[^\[\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_ID_SUFFIX_RE = re.compile(r"-[0-9a-z]{10}$")
_FENCE_RE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_CODE_SPAN_RE = re.compile(r"`[^`\n]*`")


@dataclass(frozen=True)
class NoteKey:
    """What a link may name a note by."""

    path: str
    id: str
    title: str


def _strip_code(body: str) -> str:
    """The body without fenced code and code spans, where links are only text."""
    return _CODE_SPAN_RE.sub(" ", _FENCE_RE.sub(" ", body))


def wikilink_targets(body: str) -> list[str]:
    """The targets of every `[[target|label]]` in the body, in order."""
    return [m.group(1).strip() for m in WIKILINK_RE.finditer(_strip_code(body))]


def markdown_targets(body: str) -> list[str]:
    """Relative link targets that point at markdown files (`[x](../facts/y.md)`)."""
    found = []
    for match in MDLINK_RE.finditer(_strip_code(body)):
        target = match.group(1)
        if _SCHEME_RE.match(target) or target.startswith(("/", "#")):
            continue
        target = unquote(target.split("#", 1)[0])
        if target.lower().endswith(".md"):
            found.append(target)
    return found


class LinkResolver:
    """Turns link targets into note paths, given every note's path, id and title."""

    def __init__(self, notes: Iterable[NoteKey]) -> None:
        self.paths: set[str] = set()
        self._by_key: dict[str, str] = {}
        ambiguous: set[str] = set()
        for note in notes:
            self.paths.add(note.path)
            stem = posixpath.splitext(posixpath.basename(note.path))[0].lower()
            keys = {note.id.lower(), stem, _ID_SUFFIX_RE.sub("", stem), note.title.strip().lower()}
            keys.add(note.path.lower())
            keys.add(note.path[:-3].lower() if note.path.endswith(".md") else note.path.lower())
            for key in keys:
                if not key:
                    continue
                if key in self._by_key and self._by_key[key] != note.path:
                    ambiguous.add(key)
                self._by_key.setdefault(key, note.path)
        for key in ambiguous:
            del self._by_key[key]

    def wikilink(self, target: str) -> str | None:
        """The note a `[[target]]` names: by id, file name, title or path; None if unknown."""
        key = target.strip().lower()
        if key.endswith(".md"):
            key = key[:-3]
        return self._by_key.get(key) or self._by_key.get(key + ".md")

    def markdown(self, source_path: str, target: str) -> str | None:
        """The note a relative markdown link from `source_path` points at, if it is a note."""
        target = unquote(target.split("#", 1)[0])
        if not target or _SCHEME_RE.match(target) or target.startswith("/"):
            return None
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(source_path), target))
        return joined if joined in self.paths else None

    def links_of(self, source_path: str, body: str) -> set[str]:
        """Every other note that `body` links to, in either style."""
        found = {self.wikilink(t) for t in wikilink_targets(body)}
        found |= {self.markdown(source_path, t) for t in markdown_targets(body)}
        found.discard(None)
        found.discard(source_path)
        return {p for p in found if p is not None}
