"""The note format: markdown with YAML front matter, parsed leniently.

A note is whatever a person or a machine put in a `.md` file under memory/.
Hand-written notes with no or broken front matter are still notes: what the
front matter does not say is derived from the path and the text, and what is
wrong is recorded in `Note.problems` for `anamnesis doctor`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import PurePosixPath
from typing import Any, Literal, get_args

from anamnesis.base.errors import UsageError

NoteType = Literal["semantic", "procedural", "episodic", "preference"]
NOTE_TYPES: tuple[str, ...] = get_args(NoteType)
# Folder names a person browsing memory/ will understand, one per type.
TYPE_FOLDERS = {
    "semantic": "facts",
    "procedural": "howto",
    "episodic": "sessions",
    "preference": "preferences",
}
FOLDER_TYPES = {folder: kind for kind, folder in TYPE_FOLDERS.items()}
GLOBAL_TYPES = ("preference",)  # the user's standing rules hold in every project: never tied to one
GLOBAL_DIR = "global"
MAX_TITLE = 200  # characters: a title is one line, and the start of a file name
PROJECTS_DIR = "projects"
FIELD_ORDER = (
    "id",
    "type",
    "title",
    "project",
    "tags",
    "created",
    "updated",
    "machine",
    "source",
    "supersedes",
)
# A line that opens or closes a conflict block, or a labelled separator of an N-way block
# (a bare ======= alone is a markdown heading underline: it never counts by itself).
CONFLICT_RE = re.compile(r"^(?:<<<<<<<|>>>>>>>)(?:[ \t]|\r?$)|^======= \S", re.M)


class ProblemKind(Enum):
    """What kind of thing is wrong with a note file. Callers branch on this, never on the words
    (a title, a path or a YAML error can say anything). Declared in order of which fix comes first
    when a file has several problems."""

    CONFLICT = "conflict"  # git conflict markers in the front matter or the body
    SYMLINK = "symlink"
    BINARY = "binary"
    NOT_REGULAR = "not-regular"  # a fifo, a socket, a device
    UNREADABLE = "unreadable"
    FRONT_MATTER = "front-matter"  # not closed, not YAML, not a mapping of fields
    FIELD = "field"  # one field is malformed (a date, project, tags) or given twice
    UNKNOWN_TYPE = "unknown-type"
    BAD_FILE_NAME = "bad-file-name"  # the name, not the text, is not UTF-8
    NOT_UTF8 = "not-utf8"
    TOO_BIG = "too-big"
    SUPERSEDES = "supersedes"
    NO_FRONT_MATTER = "no-front-matter"  # docs/notes.md: a note like any other; doctor stays quiet


PROBLEM_FIXES = {
    ProblemKind.CONFLICT: "resolve the conflict in an editor, or `anamnesis resolve`",
    ProblemKind.SYMLINK: "move it out of memory/",
    ProblemKind.BINARY: "move it out of memory/",
    ProblemKind.FRONT_MATTER: "fix the front matter between the '---' lines (see docs/notes.md)",
    ProblemKind.UNKNOWN_TYPE: "set `type:` to semantic, procedural, episodic or preference",
    ProblemKind.BAD_FILE_NAME: "rename the file (its name, not its text, has the bad bytes)",
    ProblemKind.NOT_UTF8: "save the file as UTF-8",
    ProblemKind.SUPERSEDES: "write `supersedes:` as one note id or a list of other notes' ids",
    ProblemKind.NO_FRONT_MATTER: "add a front matter block (see docs/notes.md)",
}
"""What to do about each kind of problem (`anamnesis doctor` shows it); kinds not here have none."""


class Problem(str):
    """One thing wrong with a note file: the words for people (it is the string, so it joins, prints
    and serialises as before) and its `kind`, which is what code branches on."""

    kind: ProblemKind

    def __new__(cls, kind: ProblemKind, text: str) -> Problem:
        problem = super().__new__(cls, text)
        problem.kind = kind
        return problem

    def __getnewargs__(self) -> tuple[ProblemKind, str]:  # type: ignore[override]  # copy and pickle
        return self.kind, str(self)

    @property
    def fix(self) -> str:
        """What to do about it, or "" when nothing needs doing by hand."""
        return PROBLEM_FIXES.get(self.kind, "")


# What makes a note's front matter unfit to save as it is: the fields read from it would be
# made up (a title from the file name, no tags, no dates) and the broken lines pushed into the body.
UNSAVABLE = (ProblemKind.FRONT_MATTER, ProblemKind.FIELD, ProblemKind.UNKNOWN_TYPE)


def front_matter_problem(note: Note) -> Problem | None:
    """The first thing wrong with `note`'s front matter that saving it would paper over, or None."""
    return next((p for p in note.problems if p.kind in UNSAVABLE), None)


def first_fix(problems: Iterable[Problem]) -> str:
    """The fix to show for a file with these problems: that of the kind that comes first."""
    order = list(ProblemKind)
    fixes = sorted((order.index(p.kind), p.fix) for p in problems if p.fix)
    return fixes[0][1] if fixes else ""
_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford-ish base32, no i/l/o/u


def new_id() -> str:
    """A short random id (50 bits): two machines never pick the same one."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(10))


def now_iso(at: float | None = None) -> str:
    """Current UTC time (or the Unix time `at`) as ISO 8601 with a Z, to the second."""
    when = dt.datetime.now(dt.UTC) if at is None else dt.datetime.fromtimestamp(at, dt.UTC)
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def stamp_time(value: Any) -> dt.datetime | None:
    """An `updated:`/`created:` value as an aware UTC time (a date is its midnight); None if it
    is not one. How stamps are compared: written with another offset, or unquoted (a YAML
    timestamp), the same moment compares the same."""
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, dt.date):
        when = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str) and value.strip():
        try:
            when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def slugify(text: str, max_len: int = 60) -> str:
    """A readable, filesystem-safe slug ('Fix the DB pool!' -> 'fix-the-db-pool')."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    return text[:max_len].rstrip("-") or "note"


def project_folder(project: str) -> str:
    """The folder name for a project key ('github.com/acme/api' -> 'github.com-acme-api')."""
    folder = re.sub(r"[^A-Za-z0-9._-]+", "-", project).strip("-.").lower()
    return folder[:100] or "unnamed"


def note_relpath(kind: str, title: str, note_id: str, project: str | None) -> str:
    """Where a new note goes, relative to memory/: readable and collision-free."""
    folder = TYPE_FOLDERS[kind]
    project = note_project(kind, project)
    base = GLOBAL_DIR if project is None else f"{PROJECTS_DIR}/{project_folder(project)}"
    return f"{base}/{folder}/{slugify(title)}-{note_id}.md"


@dataclass
class Note:
    """One note: its front-matter fields, its body and what was wrong with it."""

    path: str  # posix path relative to memory/
    id: str
    type: str
    title: str
    body: str
    project: str | None = None
    tags: list[str] = field(default_factory=list)
    created: str = ""
    updated: str = ""
    machine: str = ""
    source: str = ""
    supersedes: list[str] = field(default_factory=list)  # ids of the notes this one replaces
    extra: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def conflicted(self) -> bool:
        """True while the note still carries git conflict markers (in its body, or in its front
        matter, which a parse records as a problem of that kind)."""
        return has_conflict_markers(self.body) or any(p.kind is ProblemKind.CONFLICT for p in self.problems)

    def metadata(self) -> dict[str, Any]:
        """Front matter in a stable field order, extras after the known fields."""
        meta: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "title": self.title,
            "project": self.project,
            "tags": list(self.tags),
            "created": self.created,
            "updated": self.updated,
            "machine": self.machine,
            "source": self.source,
        }
        if meta["project"] is None:
            del meta["project"]
        if self.supersedes:  # one id as a plain scalar, several as a list
            meta["supersedes"] = self.supersedes[0] if len(self.supersedes) == 1 else list(self.supersedes)
        meta.update({k: v for k, v in self.extra.items() if k not in meta and k not in FIELD_ORDER})
        return meta

    def to_dict(self, with_body: bool = True) -> dict[str, Any]:
        """A JSON-ready view for --json and MCP."""
        data = {"path": self.path, **self.metadata(), "conflicted": self.conflicted}
        data["project"] = self.project
        data["supersedes"] = list(self.supersedes)  # always a list here, whatever the file says
        if self.problems:
            data["problems"] = list(self.problems)
        if with_body:
            data["body"] = self.body
        return data


def has_conflict_markers(text: str) -> bool:
    """Whether `text` holds a conflict block, or any part of one left behind (a block whose
    `<<<<<<<` or `>>>>>>>` line was deleted by hand still has the other)."""
    return ("<<<<<<<" in text or ">>>>>>>" in text or "======= " in text) and CONFLICT_RE.search(text) is not None


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # characters beyond the Basic Multilingual Plane: emoji


def render_note(note: Note) -> str:
    """The file text of a note: YAML front matter, a blank line, the body."""
    import frontmatter  # lazy: only writers need it; keeps it off search, list and the read-only hooks

    meta = note.metadata()
    post = frontmatter.Post(note.body.rstrip("\n") + "\n", **meta)
    options: dict[str, Any] = {}
    if _ASTRAL.search(repr(meta)):  # libyaml's emitter escapes these ("\U0001F680"); the Python one writes UTF-8
        import yaml  # lazy: as frontmatter above

        options["Dumper"] = yaml.SafeDumper
    return frontmatter.dumps(post, sort_keys=False, allow_unicode=True, width=1000, **options) + "\n"


def _as_text(value: Any) -> str:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return str(value.isoformat()) + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    return "" if value is None else str(value)


def check_type(kind: str) -> str:
    """`kind` if it is a note type; else a UsageError naming the types (every adapter checks through this)."""
    if kind not in NOTE_TYPES:
        raise UsageError(f"unknown type {kind!r}; use one of {', '.join(NOTE_TYPES)}")
    return kind


def note_project(kind: str, project: str | None) -> str | None:
    """The project a new note of type `kind` belongs to: none for global types (preferences), whatever
    the caller asked; else the key stripped (a blank one stays blank, for `validate` to refuse)."""
    if kind in GLOBAL_TYPES or not project:
        return None
    return project.strip()


# The tag rule, in one place: a tag is one word. Every input (a string, or each item of a list)
# is split at commas and white space, a leading '#' is dropped, and the rest is lower-cased.
TAG_SEPARATORS = r",\s"
_TAG_SPLIT = re.compile(f"[{TAG_SEPARATORS}]+")
# What an input must hold to give at least one tag: a character that is neither a separator
# nor '#'. A search pattern (not anchored), valid in Python and JSON Schema alike, so the MCP
# schema states exactly what `normalize_tags` accepts.
TAG_INPUT_PATTERN = f"[^{TAG_SEPARATORS}#]"


def normalize_tags(value: Any) -> list[str]:
    """Tags as stored: lower case, without a leading '#', no empties or repeats, in order.

    A string, and each item of a list (or any other collection but a mapping),
    is split at commas and white space: `"a b"`, `"a, b"` and `["a b"]` are all
    the two tags a and b. The one rule for tags from front matter, the CLI,
    MCP, the web and importers (see docs/notes.md).
    """
    if value is None:
        return []
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, Iterable) and not isinstance(value, (Mapping, bytes)):
        items = [str(v) for v in value if v is not None]
    else:
        items = [str(value)]
    seen: dict[str, None] = {}
    for item in items:
        for word in _TAG_SPLIT.split(item):
            tag = word.lstrip("#").lower()
            if tag:
                seen.setdefault(tag, None)
    return list(seen)


# The note-file rule, in one place: a note is a `.md` file (any case) with no path part that
# starts with '.', so memory/.git, tidy's memory/.archive/ and a person's projects/.drafts/
# hold no notes. Aliases (memory/aliases/*.alias) are not .md files, so not notes either.
NOTE_SUFFIXES = (".md", ".MD", ".Md", ".mD")
HIDDEN_PREFIX = "."
ARCHIVE_DIR = ".archive"  # tidy's archive: notes set aside, at their own path below it


def is_note_path(relpath: str) -> bool:
    """Whether a memory/-relative posix path names a note file: what the index holds, sync stamps
    and counts, and a write or a move may create. The scanner walks the same rule folder by folder."""
    parts = relpath.split("/")
    return parts[-1].endswith(NOTE_SUFFIXES) and not any(part.startswith(HIDDEN_PREFIX) for part in parts)


_ID_RE = re.compile(r"[^\s,\x00-\x1f\x7f]{1,100}")


def is_note_id(text: str) -> bool:
    """Whether `text` could be a note id: one token, no spaces or commas, at most 100 characters."""
    return _ID_RE.fullmatch(text) is not None


def as_ids(value: Any) -> tuple[list[str], list[Problem]]:
    """(ids, what was wrong) from a `supersedes` value: one id, a list, or a comma-separated string."""
    if value is None:
        return [], []
    if isinstance(value, str):
        items: list[Any] = re.split(r"[,\s]+", value)
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    ids: dict[str, None] = {}
    bad: list[str] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            item = str(item)  # an all-digit id YAML read as a number
        if not isinstance(item, str):
            bad.append(repr(item))
            continue
        item = item.strip()
        if not item:
            continue
        if is_note_id(item):
            ids.setdefault(item, None)
        else:
            bad.append(repr(item))
    problems = []
    if bad:
        problems.append(
            Problem(
                ProblemKind.SUPERSEDES,
                f"supersedes has {', '.join(bad)}, which is not a note id (write one id or a list of ids)",
            )
        )
    return list(ids), problems


def _title_from(body: str, path: str) -> str:
    for line in body.splitlines()[:40]:
        if line.startswith("# "):
            return line[2:].strip()
    stem = PurePosixPath(path).stem
    stem = re.sub(r"-[0-9a-z]{10}$", "", stem)
    return stem.replace("-", " ").replace("_", " ").strip() or stem


_PATH_ID_RE = re.compile(r"-([0-9a-z]{10})\.md$")


def _facts_from_path(path: str) -> tuple[str | None, str | None, str | None]:
    """(project folder, type, id) that the path implies, where it implies them."""
    if path.startswith("/"):
        parts: tuple[str, ...] | list[str] = PurePosixPath(path).parts
    else:  # what PurePosixPath(path).parts gives for a relative path, at a tenth of its cost
        parts = [part for part in path.split("/") if part and part != "."]
    project = None
    kind = None
    if len(parts) >= 3 and parts[0] == PROJECTS_DIR:
        project = parts[1]
    for part in parts[:-1]:
        if part in FOLDER_TYPES:
            kind = FOLDER_TYPES[part]
    match = _PATH_ID_RE.search(parts[-1]) if parts else None
    return project, kind, match.group(1) if match else None


_FRONT_MATTER_RE = re.compile(r"^---[ \t]*\r?\n(.*?)(?:^|\r?\n)---[ \t]*(?:\r?\n|$)", re.S | re.M)


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(front matter text or None, body) — a cheap split, no YAML parsing."""
    if not text.startswith("---"):
        return None, text
    match = _FRONT_MATTER_RE.match(text)
    if not match:
        return None, text
    return match.group(1), text[match.end() :]


_FAST_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?: (.*))?\Z")
_FAST_ITEM = re.compile(r"- (.+)\Z")
_PLAIN_UNSAFE = re.compile(r"""^[-?:,\[\]{}#&*!|>'"%@`\s]|: | #|\s$""")
_STR_TAG = "tag:yaml.org,2002:str"
# plain scalars YAML reads as something else, built here by YAML's own constructors
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("bool", "int", "float", "null", "timestamp")
)
_NEEDS_YAML = object()  # _fast_scalar's answer when only the full parser can tell
_yaml_parts: tuple[Any, Any, Any] | None = None


def _yaml() -> tuple[Any, Any, Any]:
    """YAML's resolver, safe constructor and scalar node class, loaded on the first note parsed
    (not at import: a search that finds the index current never parses a note)."""
    global _yaml_parts
    if _yaml_parts is None:
        import yaml  # lazy: keeps yaml off search and list (the index is current; no note parsed)

        resolver = yaml.resolver.Resolver()  # type: ignore[no-untyped-call]
        _yaml_parts = (resolver, yaml.constructor.SafeConstructor(), yaml.ScalarNode)  # type: ignore[no-untyped-call]
        if None not in resolver.yaml_implicit_resolvers and not resolver.yaml_path_resolvers:
            _STRING_FIRST.update(chr(c) for c in range(32, 127) if chr(c) not in resolver.yaml_implicit_resolvers)
    return _yaml_parts


# First characters of plain scalars YAML certainly reads as strings (no implicit resolver starts
# with them); empty if some resolver could match any first character.
_STRING_FIRST: set[str] = set()


def _fast_scalar(raw: str) -> Any:
    """A plain or single-quoted YAML scalar, decoded as YAML decodes it; _NEEDS_YAML otherwise."""
    if len(raw) >= 2 and raw[0] == "'" and raw[-1] == "'":
        inner = raw[1:-1]
        if "'" in inner.replace("''", ""):
            return _NEEDS_YAML
        return inner.replace("''", "'")
    if not raw or _PLAIN_UNSAFE.search(raw):
        return _NEEDS_YAML
    if raw[0] in _STRING_FIRST:  # YAML's resolver would only say "a string" after more work
        return raw
    resolver, constructor, scalar_node = _yaml()  # (the first call also fills _STRING_FIRST)
    if raw[0] in _STRING_FIRST:
        return raw
    tag = resolver.resolve(scalar_node, raw, (True, False))
    if tag == _STR_TAG:
        return raw
    if tag in _SCALAR_TAGS:  # a number, a boolean, a date: YAML's own constructor, so nothing differs
        try:
            return constructor.yaml_constructors[tag](constructor, scalar_node(tag, raw))
        except (ValueError, OverflowError):  # a date that is none (2026-02-30): text, as `_Loader` reads it
            return raw
    return _NEEDS_YAML


_loader: Any = None


def yaml_loader() -> Any:
    """YAML's safe loader, except that a date that is no date (`2026-02-30`, `25:00:00`) is read
    as the text it is instead of raising: one such value must not make a note unreadable (and
    with it every command that reads all notes). Its field is then reported as a problem."""
    global _loader
    if _loader is None:
        import yaml  # lazy: the fast reader handles most front matter; keeps yaml off search and list

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        def timestamp(loader: Any, node: Any) -> Any:
            try:
                return yaml.constructor.SafeConstructor.construct_yaml_timestamp(loader, node)
            except (ValueError, OverflowError):
                return loader.construct_scalar(node)

        _loader = type("LenientSafeLoader", (base,), {})
        _loader.add_constructor("tag:yaml.org,2002:timestamp", timestamp)
    return _loader


def load_yaml(fm_text: str) -> Any:
    """Front matter read by `yaml_loader`; a value that holds itself (`a: &a [*a]`) is invalid
    YAML here: every writer, stamp and JSON answer would recurse on it for ever."""
    import yaml  # lazy: the fast reader handles most front matter; keeps yaml off search and list

    loaded = yaml.load(fm_text, Loader=yaml_loader())
    if holds_itself(loaded):
        raise yaml.YAMLError("a value refers to itself (an alias inside its own anchor)")
    return loaded


def holds_itself(value: Any, _open: set[int] | None = None) -> bool:
    """Whether a loaded YAML value contains itself (YAML aliases can build such a loop)."""
    if not isinstance(value, dict | list):
        return False
    within = _open if _open is not None else set()
    if id(value) in within:
        return True
    within.add(id(value))
    children = [*value.keys(), *value.values()] if isinstance(value, dict) else value
    found = any(holds_itself(child, within) for child in children)
    within.discard(id(value))
    return found


def fast_front_matter(fm_text: str) -> dict[str, Any] | None:
    """Parse the simple front matter Anamnesis writes without the YAML machinery.

    Accepts only `key: scalar` lines and `key:` followed by `- scalar` items
    (plain or single-quoted scalars: strings, numbers, booleans, dates);
    anything else returns None and the caller uses the full YAML parser, so
    results never differ from YAML's. Indexing 10,000 notes spends most of
    its time here otherwise.
    """
    meta: dict[str, Any] = {}
    current: list[Any] | None = None
    block_keys: list[str] = []
    if "\t" in fm_text:
        return None
    for line in fm_text.split("\n"):
        if not line:
            continue
        if line.startswith("- ") and current is not None:
            value = _fast_scalar(line[2:])
            if value is _NEEDS_YAML:
                return None
            current.append(value)
            continue
        match = _FAST_LINE.match(line)
        if not match:
            return None
        key, raw = match.group(1), match.group(2)
        if key in meta:
            return None
        if raw is None or raw == "":
            current = []
            meta[key] = current
            block_keys.append(key)
            continue
        if raw == "[]":
            meta[key], current = [], None
            continue
        value = _fast_scalar(raw)
        if value is _NEEDS_YAML:
            return None
        meta[key], current = value, None
    for key in block_keys:
        if meta[key] == []:
            meta[key] = None  # `key:` with no items is null in YAML
    return meta


def id_in_name(path: str) -> str | None:
    """The id a note's file name ends with (`…-7k2m9q4x1c.md`), or None."""
    return _facts_from_path(path)[2]


def stated_id(text: str, path: str) -> str | None:
    """The id a note says it has: its front matter's `id:`, else the one its file name ends
    with; None when it says neither (its id then comes from its path, and a move changes it).
    What tells that a file deleted here and one added there are the same note."""
    fm_text, _body = split_front_matter(text.removeprefix("\ufeff"))
    fields = front_matter_fields(fm_text) if fm_text is not None else None
    stated = _as_text((fields or {}).get("id")).strip()
    return stated or _facts_from_path(path)[2]


def parse_note(text: str, path: str) -> Note:
    """Parse note text leniently; never raises for bad content."""
    problems: list[Problem] = []
    meta: dict[str, Any] = {}
    text = text.removeprefix("\ufeff")  # a byte order mark some editors write
    fm_text, body = split_front_matter(text)
    if text.startswith("---") and fm_text is None:
        problems.append(Problem(ProblemKind.FRONT_MATTER, "front matter is not closed by a '---' line"))
    elif fm_text is not None and "\r" not in fm_text and (fast := fast_front_matter(fm_text)) is not None:
        meta = fast
    elif fm_text is not None:
        import yaml  # lazy: the fast reader handles most front matter; keeps yaml off search and list

        try:
            loaded = load_yaml(fm_text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            if "<<<<<<<" in fm_text:
                problems.append(Problem(ProblemKind.CONFLICT, f"conflict markers in front matter{where}"))
            else:
                problems.append(Problem(ProblemKind.FRONT_MATTER, f"front matter is not valid YAML{where}: {reason}"))
            body = text
            loaded = None
        if loaded is None:
            pass
        elif isinstance(loaded, dict):
            meta = {str(k): v for k, v in loaded.items()}
            keys = re.findall(r"^([A-Za-z_][\w-]*)[ \t]*:", fm_text, re.M)
            twice = sorted({k for k in keys if keys.count(k) > 1})
            if twice:
                problems.append(
                    Problem(ProblemKind.FIELD, f"field {', '.join(twice)} appears more than once; the last one is used")
                )
        else:
            problems.append(Problem(ProblemKind.FRONT_MATTER, "front matter is not a mapping of fields"))
            body = text
    else:
        problems.append(Problem(ProblemKind.NO_FRONT_MATTER, "no front matter"))

    for name in ("created", "updated"):
        stamp = meta.get(name)
        if stamp is not None and not isinstance(stamp, dt.date) and not _is_iso(str(stamp)):
            problems.append(
                Problem(ProblemKind.FIELD, f"{name} {stamp!r} is not a date (write it like 2026-11-26T09:14:03Z)")
            )
    path_project, path_type, path_id = _facts_from_path(path)
    kind = str(meta.get("type") or path_type or "semantic").lower()
    if kind not in NOTE_TYPES:
        problems.append(Problem(ProblemKind.UNKNOWN_TYPE, f"unknown type {kind!r} (use one of {', '.join(NOTE_TYPES)})"))
        kind = path_type or "semantic"
    note_id = _as_text(meta.get("id")) or path_id or _path_id(path)
    title = _as_text(meta.get("title")).strip() or _title_from(body, path)
    project_value = meta.get("project", path_project)
    if isinstance(project_value, (list, dict)):
        problems.append(
            Problem(ProblemKind.FIELD, "project is not one key (a list or mapping); the folder's project is used")
        )
        project_value = path_project
    tags_value = meta.get("tags")
    if isinstance(tags_value, dict):
        problems.append(Problem(ProblemKind.FIELD, "tags is a mapping; write a list of words"))
        tags_value = None
    supersedes, wrong = as_ids(meta.get("supersedes"))
    problems.extend(wrong)
    if note_id in supersedes:
        problems.append(Problem(ProblemKind.SUPERSEDES, f"supersedes its own id {note_id}; that link is ignored"))
        supersedes.remove(note_id)
    note = Note(
        path=path,
        id=note_id,
        type=kind,
        title=title,
        body=body.lstrip("\n"),
        project=_as_text(project_value) or None,
        tags=normalize_tags(tags_value),
        created=_as_text(meta.get("created")),
        updated=_as_text(meta.get("updated") or meta.get("created")),
        machine=_as_text(meta.get("machine")),
        source=_as_text(meta.get("source")),
        supersedes=supersedes,
        extra={k: v for k, v in meta.items() if k not in FIELD_ORDER},
        problems=problems,
    )
    if has_conflict_markers(note.body):
        note.problems.append(Problem(ProblemKind.CONFLICT, "unresolved git conflict markers"))
    return note


def _is_iso(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _path_id(path: str) -> str:
    return "p" + hashlib.sha1(path.encode()).hexdigest()[:9]


# -- changing fields in place -----------------------------------------------------------------

_MISSING_FIELD: Any = object()


def front_matter_fields(fm_text: str) -> dict[str, Any] | None:
    """The fields of a front matter (its text, without the `---` lines) as parse_note reads them,
    or None if it is not a mapping."""
    if "\r" not in fm_text and (fast := fast_front_matter(fm_text)) is not None:
        return fast
    import yaml  # lazy: only a writer changing fields needs it; keeps yaml off search and list

    try:
        loaded = load_yaml(fm_text)
    except yaml.YAMLError:
        return None
    if loaded is None:
        return {}
    return {str(k): v for k, v in loaded.items()} if isinstance(loaded, dict) else None


def _field_lines(key: str, value: Any, eol: str) -> list[str]:
    import yaml  # lazy: only a writer changing fields needs it; keeps yaml off search and list

    dumped = yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True, width=1000, default_flow_style=False)
    return [line + eol for line in dumped.splitlines()]


def set_fields(text: str, values: Mapping[str, Any], drop: Iterable[str] = ()) -> str | None:
    """`text` with front-matter fields set to `values` (a missing one added at the end of the
    front matter) and `drop` removed, every other byte as it was; None when that cannot be done
    line by line (no front matter, not closed, not a mapping, a field written twice, or a
    result that would not read back as exactly those fields), so the caller leaves the file
    alone or writes the whole front matter.
    """
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    bare = text[len(bom) :]
    match = _FRONT_MATTER_RE.match(bare) if bare.startswith("---") else None
    if match is None:
        return None
    fm_text = match.group(1)
    before = front_matter_fields(fm_text)
    if before is None or has_conflict_markers(fm_text):
        return None
    eol = "\r\n" if "\r\n" in fm_text or (not fm_text and "\r\n" in bare[: match.end()]) else "\n"
    lines = fm_text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += eol  # the line before the closing `---` (its newline is outside the group)
    changes: dict[str, Any] = {**dict.fromkeys(drop, _MISSING_FIELD), **values}
    for key, value in changes.items():
        starts = [n for n, line in enumerate(lines) if re.match(rf"{re.escape(key)}[ \t]*:", line)]
        if len(starts) > 1:
            return None
        new = [] if value is _MISSING_FIELD else _field_lines(key, value, eol)
        if not starts:
            lines.extend(new)
            continue
        end = starts[0] + 1
        while end < len(lines) and lines[end][:1] in (" ", "\t", "-"):
            end += 1  # the field's value goes on over the lines below it (a list, a long text)
        lines[starts[0] : end] = new
    expected = {k: v for k, v in before.items() if k not in changes}
    for key, value in changes.items():
        if value is not _MISSING_FIELD:
            expected[key] = front_matter_fields("".join(_field_lines(key, value, "\n")))[key]  # type: ignore[index]
    new_fm = "".join(lines)
    after = front_matter_fields(new_fm)
    if after != expected:
        return None
    if fm_text and not fm_text.endswith("\n"):
        new_fm = new_fm.removesuffix(eol)  # the newline before `---` is the text's own
    return bom + bare[: match.start(1)] + new_fm + bare[match.end(1) :]


def stamp(text: str, when: str, machine: str) -> str | None:
    """`text` with `updated:` set to `when` and `machine:` to `machine` (see `set_fields`); None
    when its front matter cannot take them without other changes."""
    return set_fields(text, {"updated": when, "machine": machine})
