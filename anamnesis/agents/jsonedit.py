"""Changing a JSON document's text so that only what changes changes.

`edit(text, new)` returns `text` altered so that it parses to `new`, keeping
every other byte: numbers stay as written (`1e3` is not turned into
`1000.0`), escapes stay escapes, compact objects stay compact and the
indentation is the file's own. What is added goes in front of the first
member of its object or array (so in an indented file no existing line
changes, not even to gain a comma), indented like its neighbours; what is
removed takes its whole lines with it.

The text is scanned one level at a time and only where the data differs, so
a large file (Claude Code's `~/.claude.json` keeps history) costs little.
The result is checked by parsing it; should it ever not give `new`, the
document is written out whole instead (correct, if not byte-preserving).

Some agents read JSON with comments (`//`, `/* */`) and, some, trailing
commas (a `Dialect`). Such a text is edited the same way: comments and
trailing commas are blanked out to spaces of the same length (newlines
kept), so the offsets found in that plain JSON are the offsets in the text
itself, and the edits are made in the text with its comments. A text with
comments is never written out whole (that would drop them): if an edit
cannot be made in place, `Uneditable` is raised.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_DECODER = json.JSONDecoder()
_SURROGATE = re.compile("[\ud800-\udfff]")
PAIRING_LIMIT = 2500  # old x new elements of a changed array paired by likeness; longer ones by kind


@dataclass(frozen=True)
class Dialect:
    """What a reader of the file accepts besides plain JSON."""

    comments: bool = False  # `// line` and `/* block */`
    trailing_commas: bool = False  # `[1, 2,]`, `{"a": 1,}`


JSON = Dialect()
WITH_COMMENTS = Dialect(comments=True)
JSONC = Dialect(comments=True, trailing_commas=True)
_EXTRAS = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*[\s\S]*?\*/|,(?=(?:\s|//[^\n]*|/\*[\s\S]*?\*/)*[]}])')


class Uneditable(ValueError):
    """A text with comments that cannot be edited in place (writing it whole would drop them)."""


def plain(text: str, dialect: Dialect = JSON) -> str:
    """`text` with the comments and trailing commas `dialect` allows blanked out (same length,
    newlines kept): plain JSON with every offset unchanged. Others are left for the parser to refuse."""
    if dialect == JSON or ("/" not in text and "," not in text):
        return text

    def blank(match: re.Match[str]) -> str:
        token = match.group()
        if token.startswith('"') or (token == "," and not dialect.trailing_commas):
            return token
        if token.startswith("/") and not dialect.comments:
            return token
        return re.sub(r"[^\r\n]", " ", token)

    return _EXTRAS.sub(blank, text)


def comments(text: str) -> list[str]:
    """The comments of a text, in order (none in plain JSON)."""
    if "/" not in text:
        return []
    return [m.group() for m in _EXTRAS.finditer(text) if m.group().startswith("/")]


def loads(text: str, dialect: Dialect = JSON) -> Any:
    """The data a text of this dialect holds (json.loads' errors for anything else)."""
    return json.loads(plain(text, dialect))


class _Unexpected(ValueError):
    """The text is not the JSON we expected (it was checked with json.loads first, so: a bug)."""


@dataclass
class _Child:
    """One member of an object (with its key) or element of an array, by offsets into the text."""

    start: int  # where the member starts: its key, or the element itself
    key: str | None
    key_end: int  # where its key ends (start for an array element)
    value_start: int
    value_end: int


class _Editor:
    def __init__(self, text: str, original: str | None = None) -> None:
        self.text = text
        self.original = text if original is None else original  # with its comments, where it has some
        self.edits: list[tuple[int, int, str]] = []
        self.key_sep = ": "
        self.item_sep = ", "
        self.unit = "  "
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self._children: dict[int, list[_Child]] = {}

    # -- scanning --------------------------------------------------------------------------

    def _ws(self, pos: int) -> int:
        match = _WS.match(self.text, pos)
        return match.end() if match else pos

    def _value_end(self, pos: int) -> int:
        """The end of the value starting at `pos` (json's own C scanner skips it)."""
        return int(_DECODER.raw_decode(self.text, pos)[1])

    def children(self, start: int, end: int) -> list[_Child]:
        """The members or elements of the container spanning text[start:end], one level deep."""
        if start not in self._children:
            self._children[start] = self._scan(start, end)
        return self._children[start]

    def _scan(self, start: int, end: int) -> list[_Child]:
        is_object = self.text[start] == "{"
        out: list[_Child] = []
        pos = self._ws(start + 1)
        if pos >= end - 1:
            return out
        while True:
            child_start = key_end = pos
            key = None
            if is_object:
                match = _STRING.match(self.text, pos)
                if not match:
                    raise _Unexpected(pos)
                key = json.loads(match.group())
                key_end = match.end()
                pos = self._ws(key_end)
                if self.text[pos : pos + 1] != ":":
                    raise _Unexpected(pos)
                pos = self._ws(pos + 1)
            value_end = self._value_end(pos)
            out.append(_Child(child_start, key, key_end, pos, value_end))
            pos = self._ws(value_end)
            if self.text[pos : pos + 1] == ",":
                pos = self._ws(pos + 1)
                continue
            return out

    # -- layout ----------------------------------------------------------------------------

    def line_start(self, pos: int) -> int:
        return self.text.rfind("\n", 0, pos) + 1

    def starts_line(self, pos: int) -> bool:
        return not self.text[self.line_start(pos) : pos].strip()

    def indent_of(self, pos: int) -> str:
        """The whitespace that begins the line `pos` is on."""
        begin = self.line_start(pos)
        match = _WS.match(self.text, begin)
        lead = self.text[begin : match.end() if match else begin]
        return lead.replace("\n", "").replace("\r", "")

    def dump(
        self, value: Any, indent: str | None, item_sep: str | None = None, key_sep: str | None = None
    ) -> str:
        """`value` as JSON: indented (continuation lines starting with `indent`) or on one line."""
        key_sep = key_sep or self.key_sep
        if indent is None:
            text = json.dumps(value, ensure_ascii=False, separators=(item_sep or self.item_sep, key_sep))
        else:
            text = json.dumps(value, ensure_ascii=False, indent=self.unit, separators=(",", key_sep))
            text = text.replace("\n", self.newline + indent)
        # A lone surrogate is valid JSON but cannot be written as UTF-8: keep it escaped.
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)

    def infer_style(self, root_start: int, root_end: int) -> None:
        """The file's separators (what most of it uses) and indentation unit (its outermost
        object's); a container's own separators win where it has some (`key_sep_of`)."""
        if len(re.findall(r'":[^ \t\r\n]', self.text)) > len(re.findall(r'":[ \t]', self.text)):
            self.key_sep = ":"
        if len(re.findall(r'[]}"el0-9],[^ \t\r\n]', self.text)) > len(re.findall(r",[ \t]", self.text)):
            self.item_sep = ","
        kids = self.children(root_start, root_end)
        for kid in kids:
            if self.starts_line(kid.start) and "\n" in self.text[root_start : kid.start]:
                lead = self.indent_of(kid.start)[len(self.indent_of(root_start)) :]
                if lead:
                    self.unit = lead
                break

    # -- diffing ---------------------------------------------------------------------------

    def value(self, holder: int, start: int, end: int, old: Any, new: Any) -> None:
        """Edits turning the value text[start:end] (parsed: `old`) into `new`; `holder` is where
        its member or element starts (a key, or the value itself)."""
        if _same(old, new):
            return
        if (isinstance(old, dict) and isinstance(new, dict)) or (
            isinstance(old, list) and isinstance(new, list)
        ):
            self.container(holder, start, end, old, new)
            return
        pretty = self.starts_line(holder) and isinstance(new, (dict, list)) and bool(new)
        self.edits.append((start, end, self.dump(new, self.indent_of(holder) if pretty else None)))

    def container(self, holder: int, start: int, end: int, old: Any, new: Any) -> None:
        kids = self.children(start, end)
        deleted: set[int] = set()
        inserts: dict[int, list[Any]] = {}
        if isinstance(old, dict):
            last = {kid.key: i for i, kid in enumerate(kids)}
            for i, kid in enumerate(kids):
                if kid.key not in new:
                    deleted.add(i)
                elif last[kid.key] == i and not _same(old[kid.key], new[kid.key]):
                    self.value(kid.start, kid.value_start, kid.value_end, old[kid.key], new[kid.key])
            added = [(key, value) for key, value in new.items() if key not in old]
            if added:
                first_kept = next((i for i in range(len(kids)) if i not in deleted), len(kids))
                inserts[first_kept] = added
        else:
            # elements equal as data are kept; of the rest, each is paired with the most alike
            # element of its kind (object, list) and changed where it stands; others go or come
            blocks = (
                [("replace", 0, len(old), 0, len(new))]
                if len(old) * len(new) <= PAIRING_LIMIT
                else _opcodes([_canon(v) for v in old], [_canon(v) for v in new])
            )
            for op, i1, i2, j1, j2 in blocks:
                if op == "equal":
                    continue
                pairs = _pairs(old[i1:i2], new[j1:j2])
                for a, b in pairs:
                    kid = kids[i1 + a]
                    self.value(kid.start, kid.value_start, kid.value_end, old[i1 + a], new[j1 + b])
                paired_old = {a for a, _ in pairs}
                deleted.update(i1 + a for a in range(i2 - i1) if a not in paired_old)
                paired_new = dict((b, a) for a, b in pairs)
                for b in range(j2 - j1):
                    if b not in paired_new:  # before the next paired element, or at the block's end
                        at = next((paired_new[k] for k in range(b + 1, j2 - j1) if k in paired_new), i2 - i1)
                        inserts.setdefault(i1 + at, []).append(new[j1 + b])
        self.sequence(holder, start, end, kids, deleted, inserts, isinstance(old, dict))

    def sequence(
        self,
        holder: int,
        start: int,
        end: int,
        kids: list[_Child],
        deleted: set[int],
        inserts: dict[int, list[Any]],
        is_object: bool,
    ) -> None:
        """Remove the `deleted` children and add `inserts` (before the child at each index)."""
        kept = [i for i in range(len(kids)) if i not in deleted]

        key_sep = None
        if is_object and kids:
            between = self.text[kids[0].key_end : kids[0].value_start]
            key_sep = ":" + (" " if between.endswith((" ", "\t")) else "")

        def render(items: list[Any], indent: str | None, sep: str | None = None) -> list[str]:
            if is_object:
                return [
                    self.dump(key, None) + (key_sep or self.key_sep) + self.dump(value, indent, sep, key_sep)
                    for key, value in items
                ]
            return [self.dump(value, indent, sep) for value in items]

        sep = None
        if len(kids) > 1:
            gap = self.text[kids[0].value_end : kids[1].start]
            if "\n" not in gap:
                sep = "," + gap.split(",", 1)[-1]
        if not kept and self.original[start + 1 : end - 1] != self.text[start + 1 : end - 1]:
            items = [item for at in sorted(inserts) for item in inserts[at]]
            self.edits.append((start + 1, end - 1, self._around_comments(holder, kids, start, end, render(items, None))))
            return
        if not kept:
            items = [item for at in sorted(inserts) for item in inserts[at]]
            multiline = "\n" in self.text[start:end] or (self.starts_line(holder) and bool(items))
            if not items:
                inner = ""
            elif multiline:
                outer = self.indent_of(holder)
                indent = (
                    self.indent_of(kids[0].start)
                    if kids and self.starts_line(kids[0].start)
                    else outer + self.unit
                )
                nl = self.newline
                inner = nl + indent + ("," + nl + indent).join(render(items, indent)) + nl + outer
            else:
                inner = (sep or self.item_sep).join(render(items, None, sep))
            self.edits.append((start + 1, end - 1, inner))
            return
        # runs of deleted children go with their separators (and whole lines where they have them)
        run: list[int] = []
        for i in [*range(len(kids)), len(kids)]:
            if i < len(kids) and i in deleted:
                run.append(i)
                continue
            if run:
                a, b = run[0], run[-1]
                if i < len(kids):
                    whole = self.starts_line(kids[a].start) and self.starts_line(kids[i].start)
                    cut_from = self.line_start(kids[a].start) if whole else kids[a].start
                    cut_to = self.line_start(kids[i].start) if whole else kids[i].start
                    self.edits.append((cut_from, cut_to, ""))
                else:
                    self.edits.append((kids[a - 1].value_end, kids[b].value_end, ""))
                run = []
        for at, items in sorted(inserts.items()):
            before = next((i for i in kept if i >= at), None)
            if before is not None:
                anchor = kids[before]
                if self.starts_line(anchor.start):
                    indent = self.indent_of(anchor.start)
                    text = "".join(item + "," + self.newline + indent for item in render(items, indent))
                else:
                    gap = sep or self.item_sep
                    text = "".join(item + gap for item in render(items, None, sep))
                self.edits.append((anchor.start, anchor.start, text))
            else:
                after = kids[kept[-1]]
                if self.starts_line(after.start):
                    indent = self.indent_of(after.start)
                    text = "".join("," + self.newline + indent + item for item in render(items, indent))
                else:
                    gap = sep or self.item_sep
                    text = "".join(gap + item for item in render(items, None, sep))
                self.edits.append((after.value_end, after.value_end, text))

    def _around_comments(self, holder: int, kids: list[_Child], start: int, end: int, items: list[str]) -> str:
        """The inside of a container whose every child goes (or that had none) and that holds
        comments: the children cut out, the comments kept, `items` added on lines of their own."""
        source = self.original
        pieces: list[str] = []
        pos = start + 1
        for kid in kids:
            pieces.append(source[pos : kid.start])
            after = kid.value_end
            while source[after : after + 1] in (" ", "\t", "\r", "\n"):
                after += 1
            pos = after + 1 if source[after : after + 1] == "," else kid.value_end
        pieces.append(source[pos : end - 1])
        rest = re.sub(r"\n[ \t]*(?=\r?\n)", "", "".join(pieces))
        if not items:
            return rest
        body = rest.rstrip()
        tail = rest[len(body) :]
        outer = self.indent_of(holder)
        indent = outer + self.unit
        nl = self.newline
        added = nl + indent + ("," + nl + indent).join(items)
        return body + added + (tail if "\n" in tail else nl + outer)

    def result(self, text: str | None = None) -> str:
        """The edits made in `text` (default: the text scanned; or the same text with its comments)."""
        text = self.text if text is None else text
        for begin, finish, replacement in sorted(self.edits, key=lambda e: (e[0], e[1]), reverse=True):
            text = text[:begin] + replacement + text[finish:]
        return text


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON data (a scalar also of the same type: `true` is not `1`, `1` is not `1.0`)."""
    return a == b and (isinstance(a, (dict, list)) or type(a) is type(b))


def _opcodes(old: list[str], new: list[str]) -> Sequence[tuple[str, int, int, int, int]]:
    return difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()


def _pairs(old: list[Any], new: list[Any]) -> list[tuple[int, int]]:
    """Order-keeping pairs (old index, new index) of elements of the same kind, as many and as
    alike as can be (dynamic programming; a greedy pairing by kind for long runs)."""
    kinds_old, kinds_new = [_shape(v) for v in old], [_shape(v) for v in new]
    if len(old) * len(new) > PAIRING_LIMIT:
        return [
            (a1 + k, b1 + k)
            for sub, a1, a2, b1, b2 in _opcodes(kinds_old, kinds_new)
            if sub == "equal" or (sub == "replace" and a2 - a1 == b2 - b1)
            for k in range(a2 - a1)
        ]
    texts_old, texts_new = [_canon(v) for v in old], [_canon(v) for v in new]
    best = [[0.0] * (len(new) + 1) for _ in range(len(old) + 1)]
    for i in range(len(old) - 1, -1, -1):
        for j in range(len(new) - 1, -1, -1):
            best[i][j] = max(best[i + 1][j], best[i][j + 1])
            if kinds_old[i] == kinds_new[j]:
                alike = difflib.SequenceMatcher(
                    None, texts_old[i], texts_new[j], autojunk=False
                ).quick_ratio()
                best[i][j] = max(best[i][j], best[i + 1][j + 1] + 1 + alike)
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < len(old) and j < len(new):
        if best[i][j] == best[i + 1][j]:
            i += 1
        elif best[i][j] == best[i][j + 1]:
            j += 1
        else:
            pairs.append((i, j))
            i, j = i + 1, j + 1
    return pairs


def _shape(value: Any) -> str:
    """What kind of element, for pairing changed ones: an object, a list, or a scalar's type."""
    if isinstance(value, dict):
        return "{"
    return "[" if isinstance(value, list) else type(value).__name__


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


def edit(text: str, new: Any, dump_whole: Any = None, dialect: Dialect = JSON) -> str:
    """`text` (a JSON document) changed so that it parses to `new`, everything else kept.

    `dump_whole(new)` writes the document out whole when the text cannot be
    edited in place (blank text, or a top-level value that is not an object);
    a text with comments or trailing commas (`dialect`) is never written out
    whole: `Uneditable` is raised instead.
    """
    scanned = plain(text, dialect)
    try:
        old = json.loads(scanned) if scanned.strip() else None
    except (ValueError, RecursionError):
        old = None
    fallback = dump_whole or (lambda data: json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    extras = scanned != text
    if not isinstance(old, dict) or not isinstance(new, dict):
        if extras:
            raise Uneditable("the file is not a JSON object that can be edited in place")
        return str(fallback(new))
    editor = _Editor(scanned, text)
    try:
        start = editor._ws(0)
        end = editor._value_end(start)
        editor.infer_style(start, end)
        editor.value(start, start, end, old, new)
        result = editor.result(text)
        if loads(result, dialect) == new:
            return result
    except (ValueError, IndexError, RecursionError):
        pass
    if extras:
        raise Uneditable("this change cannot be made in place without losing the file's comments")
    return str(fallback(new))
