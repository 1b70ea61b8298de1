"""Links between notes: `[[wikilinks]]` and relative markdown links to other notes.

People write notes in Obsidian-style editors as often as agents do, so both
link styles count. `LinkGraph` resolves every note's links once (links,
backlinks, links to no note yet) for the dashboard's note page and memory
map; `rewrite_links` keeps links pointing at a note that moves
(`store.move_note`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

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

    def resolve_all(self, source_path: str, body: str) -> tuple[set[str], list[Unresolved]]:
        """The notes `body` links to (not itself), and its links that name no note, once each in order."""
        found: set[str] = set()
        missing: dict[Unresolved, None] = {}
        for target in wikilink_targets(body):
            path = self.wikilink(target)
            if path is None:
                missing.setdefault(Unresolved(target, "wikilink"), None)
            elif path != source_path:
                found.add(path)
        for target in markdown_targets(body):
            path = self.markdown(source_path, target)
            if path is None:
                missing.setdefault(Unresolved(target, "markdown"), None)
            elif path != source_path:
                found.add(path)
        return found, list(missing)


def _masked(body: str) -> str:
    """`body` with fenced code and code spans blanked (same length, newlines kept), so a match's
    offsets in the result are its offsets in `body`."""

    def blank(match: re.Match[str]) -> str:
        return "".join("\n" if c == "\n" else " " for c in match.group(0))

    return _CODE_SPAN_RE.sub(blank, _FENCE_RE.sub(blank, body))


@dataclass(frozen=True)
class Unresolved:
    """A link in a note to no known note: `target` as written, `kind` "wikilink" or "markdown"."""

    target: str
    kind: str

    @property
    def title(self) -> str:
        """A title for the note that would answer this link."""
        if self.kind == "wikilink":
            return self.target.strip()
        stem = posixpath.splitext(posixpath.basename(self.target))[0]
        words = _ID_SUFFIX_RE.sub("", stem).replace("-", " ").replace("_", " ").strip()
        return (words[:1].upper() + words[1:]) or stem


class LinkGraph:
    """Every note's links resolved once: what each note links to, what links to it, and
    the links that name no note yet. Built from (NoteKey, body) pairs."""

    def __init__(self, notes: Iterable[tuple[NoteKey, str]]) -> None:
        items = list(notes)
        self.notes: dict[str, NoteKey] = {key.path: key for key, _body in items}
        self.resolver = LinkResolver(self.notes.values())
        self.links: dict[str, set[str]] = {}
        self.backlinks: dict[str, set[str]] = {}
        self.unresolved: dict[str, list[Unresolved]] = {}
        for key, body in items:
            found, missing = self.resolver.resolve_all(key.path, body)
            if found:
                self.links[key.path] = found
                for target in found:
                    self.backlinks.setdefault(target, set()).add(key.path)
            if missing:
                self.unresolved[key.path] = missing

    def links_of(self, path: str) -> set[str]:
        return self.links.get(path, set())

    def backlinks_of(self, path: str) -> set[str]:
        return self.backlinks.get(path, set())

    def unresolved_of(self, path: str) -> list[Unresolved]:
        return self.unresolved.get(path, [])


def _relative(target: str, from_dir: str, original: str) -> str:
    """`target` (a memory/-relative path) as a link from folder `from_dir`, encoded like `original`."""
    rel = posixpath.relpath(target, from_dir or ".")
    if "%" in original or any(c in rel for c in " ()<>"):
        rel = quote(rel, safe="/._-~")
    return rel


def _wikilink_for(target: str, old: NoteKey, new_path: str) -> str | None:
    """What `[[target]]`, naming note `old`, becomes once it lives at `new_path` (None: unchanged).

    A link by id or title still resolves; one by path, file name or file name
    without the id keeps that style with the new name.
    """
    written = target.strip()
    key = written.lower()
    with_md = key.endswith(".md")
    if with_md:
        key = key[:-3]
    if key in (old.id.lower(), old.title.strip().lower()):
        return None
    old_stem = posixpath.splitext(posixpath.basename(old.path))[0]
    new_stem = posixpath.splitext(posixpath.basename(new_path))[0]
    new_full = new_path[:-3] if new_path.endswith(".md") else new_path
    if key == (old.path[:-3] if old.path.endswith(".md") else old.path).lower():
        replacement = new_full
    elif key == old_stem.lower():
        replacement = new_stem
    elif key == _ID_SUFFIX_RE.sub("", old_stem).lower():
        replacement = _ID_SUFFIX_RE.sub("", new_stem)
    else:
        return None
    return replacement + (".md" if with_md else "")


def rewrite_links(
    body: str,
    source_path: str,
    resolver: LinkResolver,
    old: NoteKey,
    new_path: str,
    *,
    moved_from: str | None = None,
) -> str:
    """`body` of the note at `source_path` with its links to note `old` pointing at `new_path`.

    When the note itself moved (`moved_from` is where it was, `source_path`
    where it is now), its relative links to other notes are rewritten to
    still reach them from the new folder. Links in code are left alone, and
    so is every other byte.
    """
    masked = _masked(body)
    resolve_from = moved_from or source_path
    edits: list[tuple[int, int, str]] = []
    for match in WIKILINK_RE.finditer(masked):
        target = match.group(1)
        if resolver.wikilink(target) == old.path:
            replacement = _wikilink_for(target, old, new_path)
            if replacement is not None:
                edits.append((match.start(1), match.end(1), replacement))
    new_dir = posixpath.dirname(source_path)
    for match in MDLINK_RE.finditer(masked):
        href = match.group(1)
        if _SCHEME_RE.match(href) or href.startswith(("/", "#")):
            continue
        path_part, hash_sign, anchor = href.partition("#")
        target = resolver.markdown(resolve_from, path_part)
        if target is None:
            continue
        if target == old.path:
            destination = new_path
        elif moved_from is not None:
            destination = target
        else:
            continue
        rewritten = _relative(destination, new_dir, path_part) + hash_sign + anchor
        if rewritten != href:
            edits.append((match.start(1), match.end(1), rewritten))
    for start, end, text in sorted(edits, reverse=True):
        body = body[:start] + text + body[end:]
    return body


def link_needle(path: str) -> str:
    """Lower-case text that every link naming the note at `path` by path or file name contains
    (its file name without the id), to skip notes that cannot link to it that way."""
    stem = posixpath.splitext(posixpath.basename(path))[0]
    return _ID_SUFFIX_RE.sub("", stem).lower()
