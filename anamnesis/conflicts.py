"""Same-line conflicts in notes: merge two versions without dropping a byte.

When two machines changed the same note, sync merges the two versions here.
Front matter is merged field by field (tags as a three-way set, `updated` the
later one, `created` the earlier one); the body goes through `git merge-file`.
What cannot be merged ends up as standard git conflict markers in the body,
so the front matter stays valid YAML and the note stays indexed and readable.

The result does not depend on which side is "ours": both versions are put in
a fixed order first, so two machines that resolve the same conflict at the
same time write the same bytes and their results merge cleanly later.

This module also lists conflicted notes and resolves them (`--ours`,
`--theirs`, `--both`) for `anamnesis conflicts` / `anamnesis resolve`.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from anamnesis.errors import GitError
from anamnesis.notes import has_conflict_markers, split_front_matter
from anamnesis.paths import Store

START, MIDDLE, BASE, END = "<<<<<<< ", "=======", "||||||| ", ">>>>>>> "
FRONT_MATTER_LABEL = "(front matter)"
_MISSING: Any = object()
# Fields that change on nearly every save: merged silently, never a conflict block.
_QUIET_FIELDS = ("updated", "created", "machine", "tags")
_UNION_FILES = (".gitignore", ".gitattributes")


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as the text they were written as."""


_Loader.add_constructor(
    "tag:yaml.org,2002:timestamp",
    lambda loader, node: loader.construct_scalar(node),  # type: ignore[arg-type]
)


@dataclass
class MergedText:
    """The merged file text and whether it carries conflict markers."""

    text: str
    conflicted: bool


@dataclass
class Side:
    """One version of a file in a merge: who wrote it and what it says."""

    label: str
    text: str


def merge_texts(path: str, base: str | None, one: Side, two: Side) -> MergedText:
    """Three-way merge of two versions of `path` (base None: both added it).

    Notes (`.md`) merge front matter by field and the body by lines; other text
    files by lines, except .gitignore/.gitattributes, whose lines are united.
    """
    first, second = order_sides(one, two)
    if first.text == second.text:
        return MergedText(first.text, has_conflict_markers(first.text))
    name = path.rsplit("/", 1)[-1]
    if name in _UNION_FILES:
        return MergedText(merge_file(base or "", first, second, union=True).text, False)
    if path.lower().endswith(".md"):
        merged = _merge_note(base, first, second)
        if merged is not None:
            return merged
    return merge_file(base or "", first, second)


def order_sides(one: Side, two: Side) -> tuple[Side, Side]:
    """The two sides in a fixed order (by label, then text) so the merge is symmetric."""
    if (one.label, one.text) <= (two.label, two.text):
        return one, two
    return two, one


def merge_file(base: str, first: Side, second: Side, *, union: bool = False) -> MergedText:
    """`git merge-file` on three texts: clean merge, or standard conflict markers.

    `conflicted` is git's own count, so lines that merely look like markers
    (a note about git conflicts) do not make a clean merge a conflict.
    """
    from anamnesis.git import run_git_bytes

    with tempfile.TemporaryDirectory(prefix="anamnesis-merge-") as tmp:
        for name, text in (("first", first.text), ("base", base), ("second", second.text)):
            (Path(tmp) / name).write_bytes(text.encode("utf-8", errors="surrogateescape"))
        args = ["merge-file", "-p"]
        if union:
            args.append("--union")
        args += ["-L", first.label, "-L", "base", "-L", second.label, "first", "base", "second"]
        proc = run_git_bytes(Path(tmp), *args, check=False)
    if proc.returncode < 0 or proc.returncode > 127:
        raise GitError(f"git merge-file failed: {proc.stderr.decode(errors='replace').strip()}")
    return MergedText(proc.stdout.decode("utf-8", errors="surrogateescape"), proc.returncode > 0)


def _load_front_matter(text: str) -> tuple[dict[str, Any], str, str] | None:
    """(fields, front matter text, body) or None when the front matter is not a mapping."""
    fm_text, body = split_front_matter(text)
    if fm_text is None:
        if text.startswith("---"):
            return None  # unclosed front matter: merge as plain text
        return {}, "", body
    try:
        loaded = yaml.load(fm_text, Loader=_Loader)
    except yaml.YAMLError:
        return None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        return None
    return {str(k): v for k, v in loaded.items()}, fm_text, body


def _merge_note(base: str | None, first: Side, second: Side) -> MergedText | None:
    """Field-wise front matter + line-wise body; None means 'merge as plain text'."""
    parsed_one = _load_front_matter(first.text)
    parsed_two = _load_front_matter(second.text)
    parsed_base = _load_front_matter(base) if base is not None else ({}, "", "")
    if parsed_one is None or parsed_two is None or parsed_base is None:
        return None
    meta_one, fm_one, body_one = parsed_one
    meta_two, fm_two, body_two = parsed_two
    meta_base, _, body_base = parsed_base
    meta, field_conflicts = merge_fields(meta_base, meta_one, meta_two)
    merged_body = merge_file(
        body_base, Side(first.label, body_one), Side(second.label, body_two)
    )
    body = merged_body.text
    if field_conflicts:
        body = _field_block(field_conflicts, first.label, second.label) + body
    if meta == meta_one:
        fm = fm_one
    elif meta == meta_two:
        fm = fm_two
    else:
        fm = _dump(meta)
    text = body if not meta and not fm_one and not fm_two else f"---\n{fm.rstrip(chr(10))}\n---\n{body}"
    return MergedText(text, bool(field_conflicts) or merged_body.conflicted)


def _dump(meta: dict[str, Any]) -> str:
    """YAML the way notes are written: block style, field order kept, unicode as is."""
    return yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000, default_flow_style=False)


def merge_fields(
    base: dict[str, Any], one: dict[str, Any], two: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, Any, Any]]]:
    """Three-way merge of front matter fields.

    Returns the merged fields and the fields both sides changed to different
    values (key, first value, second value); for those the merged fields hold
    the value of the side with the later `updated` stamp.
    """
    keys = list(dict.fromkeys([*one, *two]))
    merged: dict[str, Any] = {}
    conflicts: list[tuple[str, Any, Any]] = []
    second_is_newer = str(two.get("updated") or "") > str(one.get("updated") or "")
    for key in keys:
        b, x, y = base.get(key, _MISSING), one.get(key, _MISSING), two.get(key, _MISSING)
        if x == y:
            value = x
        elif x == b:
            value = y
        elif y == b:
            value = x
        elif key == "tags":
            value = _merge_tags(b, x, y)
        elif key == "updated":
            value = max((v for v in (x, y) if v is not _MISSING), key=str)
        elif key == "created":
            present = [v for v in (x, y) if v not in (_MISSING, None, "")]
            value = min(present, key=str) if present else x
        else:
            value = y if second_is_newer else x
            if key not in _QUIET_FIELDS:
                conflicts.append((key, x, y))
        if value is not _MISSING:
            merged[key] = value
    return merged, conflicts


def _tag_list(value: Any) -> list[str]:
    if value is _MISSING or value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    if isinstance(value, str):  # `tags: deploy, ops` written by hand
        return [tag for tag in re.split(r"[,\s]+", value) if tag]
    return [str(value)]


def _merge_tags(base: Any, one: Any, two: Any) -> list[str]:
    """Tags added on either side are kept; a tag removed on one side stays removed."""
    b, x, y = _tag_list(base), _tag_list(one), _tag_list(two)
    out: list[str] = []
    for tag in [*x, *y]:
        if tag in out:
            continue
        in_base = tag in b
        if (in_base and tag in x and tag in y) or (not in_base):
            out.append(tag)
    return out


def _field_yaml(key: str, value: Any) -> str:
    if value is _MISSING:
        return f"# {key}: (removed)\n"
    return _dump({key: value})


def _field_block(conflicts: list[tuple[str, Any, Any]], first: str, second: str) -> str:
    """A conflict block at the top of the body showing both values of each field."""
    one = "".join(_field_yaml(k, x) for k, x, _ in conflicts)
    two = "".join(_field_yaml(k, y) for k, _, y in conflicts)
    return (
        f"{START}{first} {FRONT_MATTER_LABEL}\n{one}{MIDDLE}\n{two}"
        f"{END}{second} {FRONT_MATTER_LABEL}\n"
    )


# -- reading and resolving conflict blocks -------------------------------------------


@dataclass
class Block:
    """One conflict block: its labels and the lines of each side."""

    first_label: str
    second_label: str
    first: list[str] = field(default_factory=list)
    second: list[str] = field(default_factory=list)

    @property
    def front_matter(self) -> bool:
        return self.first_label.endswith(FRONT_MATTER_LABEL)


_Piece = str | Block


def parse_blocks(text: str) -> list[_Piece]:
    """Split text into plain lines and top-level conflict blocks (nested ones stay inside)."""
    pieces: list[_Piece] = []
    block: Block | None = None
    depth = 0
    side = 1
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if block is None:
            if bare.startswith(START):
                block = Block(bare[len(START) :], "")
                depth, side = 1, 1
            else:
                pieces.append(line)
            continue
        if bare.startswith(START):
            depth += 1
        elif depth == 1 and bare.startswith(BASE):
            side = 0  # diff3 base section: dropped on resolution
            continue
        elif depth == 1 and bare == MIDDLE:
            side = 2
            continue
        elif bare.startswith(END):
            if depth == 1:
                block.second_label = bare[len(END) :]
                pieces.append(block)
                block = None
                continue
            depth -= 1
        if side == 1:
            block.first.append(line)
        elif side == 2:
            block.second.append(line)
    if block is not None:  # unterminated block: keep the text as it was
        pieces.append(f"{START}{block.first_label}\n")
        pieces.extend(block.first)
        if side == 2:
            pieces.append(f"{MIDDLE}\n")
            pieces.extend(block.second)
    return pieces


def block_labels(text: str) -> list[tuple[str, str]]:
    """The (first, second) labels of every conflict block in `text`."""
    return [(p.first_label, p.second_label) for p in parse_blocks(text) if isinstance(p, Block)]


def resolve_text(text: str, keep: str) -> str:
    """Remove every conflict block, keeping `keep`: 'ours' (upper side), 'theirs' or 'both'.

    Blocks nested in a kept side (three machines changed the same line) are
    resolved the same way. Front-matter blocks set the chosen side's values
    in the front matter ('both' keeps the upper side's values there).
    """
    if keep not in ("ours", "theirs", "both"):
        raise ValueError(f"keep must be ours, theirs or both, not {keep!r}")
    fm_text, body = split_front_matter(text)
    new_body, field_values, removed = _resolve_body(body, keep)
    if fm_text is None:
        return new_body
    if field_values or removed:
        meta = yaml.load(fm_text, Loader=_Loader) or {}
        if isinstance(meta, dict):
            meta.update(field_values)
            for key in removed:
                meta.pop(key, None)
            fm_text = _dump(meta)
    return f"---\n{fm_text.rstrip(chr(10))}\n---\n{new_body}"


def _resolve_body(body: str, keep: str, nested: bool = False) -> tuple[str, dict[str, Any], list[str]]:
    """(body without conflict blocks, front-matter values chosen, front-matter fields removed).

    Only top-level blocks can set front matter; a nested one's lines stay as text.
    """
    out: list[str] = []
    field_values: dict[str, Any] = {}
    removed: list[str] = []
    for piece in parse_blocks(body):
        if isinstance(piece, str):
            out.append(piece)
            continue
        chosen = piece.second if keep == "theirs" else piece.first
        if piece.front_matter and not nested:
            for line in chosen:
                match = re.match(r"^# (\S+): \(removed\)$", line.rstrip("\n"))
                if match:
                    removed.append(match.group(1))
            loaded = yaml.load("".join(chosen), Loader=_Loader) or {}
            if isinstance(loaded, dict):
                field_values.update({str(k): v for k, v in loaded.items()})
            continue
        sides = [chosen, piece.second] if keep == "both" else [chosen]
        for lines in sides:
            lines = _with_newline(lines)
            if any(line.startswith(START) for line in lines):
                lines = [_resolve_body("".join(lines), keep, nested=True)[0]]
            out.extend(lines)
    return "".join(out), field_values, removed


def _with_newline(lines: list[str]) -> list[str]:
    if lines and not lines[-1].endswith("\n"):
        return [*lines[:-1], lines[-1] + "\n"]
    return lines


# -- store level: list and resolve conflicted notes -----------------------------------


@dataclass
class ConflictedNote:
    """A note in memory/ that still carries conflict markers."""

    path: str
    title: str
    labels: list[tuple[str, str]]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "title": self.title, "blocks": [list(pair) for pair in self.labels]}


def list_conflicts(store: Store) -> list[ConflictedNote]:
    """Every file in memory/ with a complete conflict block (git grep, then a real check)."""
    from anamnesis.git import run_git_bytes
    from anamnesis.notes import parse_note

    proc = run_git_bytes(
        store.memory, "grep", "-l", "-z", "--untracked", "-I", "-e", "^<<<<<<< ", check=False
    )
    found: list[ConflictedNote] = []
    for path in sorted(p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p):
        try:
            text = (store.memory / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if not has_conflict_markers(text):
            continue
        title = parse_note(text, path).title if path.endswith(".md") else path
        found.append(ConflictedNote(path, title, block_labels(split_front_matter(text)[1])))
    return found


def binary_conflicts(store: Store) -> list[tuple[str, str]]:
    """(file, its other version) for binary files both sides changed: sync keeps one in place
    and the other beside it as `<file>.<machine>.conflict` (markers cannot go into a binary).
    """
    from anamnesis.git import run_git_bytes

    out = run_git_bytes(store.memory, "ls-files", "-z", "--", "*.conflict", check=False).stdout
    found: list[tuple[str, str]] = []
    for side in sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p):
        stem = side.removesuffix(".conflict")
        cuts = [i for i, c in enumerate(stem) if c == "."]
        original = next((stem[:i] for i in cuts if (store.memory / stem[:i]).is_file()), stem.rsplit(".", 1)[0])
        found.append((original, side))
    return found


def conflicted_ref(store: Store, ref: str) -> str:
    """The memory/-relative path `resolve` works on: a note (path, id, id prefix), or
    another text file of memory/ by its path, as `anamnesis conflicts` lists it
    (an `.obsidian/` setting both machines changed)."""
    from anamnesis.errors import UsageError
    from anamnesis.store import resolve_ref, safe_path

    try:
        return resolve_ref(store, ref)
    except UsageError:
        relpath = ref.strip().replace("\\", "/")
        if safe_path(store, relpath).is_file():
            return relpath
        raise


def resolve_note(store: Store, ref: str, keep: str | None) -> str:
    """Resolve one note: with `keep` ('ours', 'theirs', 'both') rewrite it; with None just
    check a hand edit removed the markers. Then commit and index it. Returns its path.
    """
    from anamnesis import repo
    from anamnesis.errors import UsageError
    from anamnesis.fsutil import atomic_write_text
    from anamnesis.index import open_index
    from anamnesis.lock import store_lock
    from anamnesis.settings import machine_id
    from anamnesis.store import safe_path

    with store_lock(store, "resolve"):
        relpath = conflicted_ref(store, ref)
        path = safe_path(store, relpath)
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        if keep is not None:
            if not has_conflict_markers(text):
                raise UsageError(f"{relpath} has no conflict markers")
            # A note's front matter can take a side's values; other files are text throughout.
            text = resolve_text(text, keep) if relpath.endswith(".md") else _resolve_body(text, keep, nested=True)[0]
            if has_conflict_markers(text):  # e.g. a hand merge left markers inside the front matter
                raise UsageError(f"{relpath} has conflict markers that keeping a side cannot remove; edit it")
            atomic_write_text(path, text)
        elif has_conflict_markers(text):
            raise UsageError(f"{relpath} still has conflict markers; remove them or use --ours/--theirs/--both")
        with open_index(store) as index:
            index.refresh([relpath])
        committed = repo.commit_paths(store, [relpath], f"{machine_id(store)}: resolve conflict in {relpath}")
        if committed is None and keep is None:
            raise UsageError(f"{relpath} has no conflict markers and no change to commit: nothing to resolve")
    return relpath
