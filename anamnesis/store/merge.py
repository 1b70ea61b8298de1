"""Three-way merges of text and notes, and conflict blocks: pure functions, no store, no repo.

When two machines changed the same note, sync merges the two versions here.
Front matter is merged field by field (tags as a three-way set, `updated` the
later moment and `machine` with it, `created` the earlier one; only the lines
of fields whose value changed are rewritten); the body line by line with
`git merge-file`. What cannot be merged becomes a conflict block in the body, so
the front matter stays valid YAML and the note stays indexed and readable.

A conflict block holds one labelled section per distinct version. With two
versions it is exactly git's format; with more, every section but the last is
labelled on the line that opens it (`<<<<<<< m0`, `======= m1`) and the last
one on the closing line, as git does:

    <<<<<<< m0
    version of m0
    ======= m1
    version of m1
    =======
    version of m2
    >>>>>>> m2

Text that already holds conflict blocks (a conflict recorded on one machine
meeting another one recorded elsewhere) is never given to `git merge-file` as
if the markers were text: each block is replaced by an opaque token line, the
tokens are merged, and a region both sides changed is settled at the level of
versions — the versions on either side, minus those the other side replaced —
into one flat block. Blocks never nest.

The result does not depend on which side is "ours": sections are put in a
fixed order (by label, then text), so two machines that record the same
conflict at the same time write the same bytes and their results merge
cleanly later.

Listing and resolving the conflicted notes of a store is `conflicts.py`.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from anamnesis.base.errors import GitError, UsageError
from anamnesis.base.git import run_git_bytes
from anamnesis.base.notes import (
    has_conflict_markers,
    holds_itself,
    set_fields,
    split_front_matter,
    stamp_time,
)
from anamnesis.base.text import plural

START, MIDDLE, BASE, END = "<<<<<<< ", "=======", "||||||| ", ">>>>>>> "
FRONT_MATTER_LABEL = "(front matter)"
KEEP_PREFIX = "keep:"  # resolve_text(text, "keep:MACHINE")
_MISSING: Any = object()
# Fields that change on nearly every save: merged silently, never a conflict block.
_QUIET_FIELDS = ("updated", "created", "machine", "tags")
_UNION_FILES = (".gitignore", ".gitattributes")
# A block stands in a text given to `git merge-file` as one line like this (never a marker).
_TOKEN = "\x1banamnesis-conflict-block "


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as the text they were written as."""


_Loader.add_constructor(
    "tag:yaml.org,2002:timestamp",
    lambda loader, node: loader.construct_scalar(node),  # type: ignore[arg-type]
)


@dataclass
class MergedText:
    """The merged file text and whether this merge recorded a conflict in it."""

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
    return merge_lines(base or "", first, second)


def order_sides(one: Side, two: Side) -> tuple[Side, Side]:
    """The two sides in a fixed order (by label, then text) so the merge is symmetric."""
    if (one.label, one.text) <= (two.label, two.text):
        return one, two
    return two, one


def merge_file(
    base: str, first: Side, second: Side, *, union: bool = False, diff3: bool = False, marker_size: int = 7
) -> MergedText:
    """`git merge-file` on three texts: clean merge, or conflict markers of `marker_size`.

    `conflicted` is git's own count. The texts are taken as plain lines: text
    holding conflict blocks goes through `merge_lines` instead.
    """
    with tempfile.TemporaryDirectory(prefix="anamnesis-merge-") as tmp:
        for name, text in (("first", first.text), ("base", base), ("second", second.text)):
            (Path(tmp) / name).write_bytes(text.encode("utf-8", errors="surrogateescape"))
        args = ["merge-file", "-p", f"--marker-size={marker_size}"]
        if union:
            args.append("--union")
        if diff3:
            args.append("--diff3")
        args += ["-L", first.label, "-L", "base", "-L", second.label, "first", "base", "second"]
        proc = run_git_bytes(Path(tmp), *args, check=False)
    if proc.returncode < 0 or proc.returncode > 127:
        said = proc.stderr.decode(errors="replace").strip()
        raise GitError(
            f"git merge-file failed: {said}",
            command="git merge-file",
            reason=said,
            stderr=said,
            returncode=proc.returncode,
        )
    return MergedText(proc.stdout.decode("utf-8", errors="surrogateescape"), proc.returncode > 0)


def merge_lines(base: str, first: Side, second: Side) -> MergedText:
    """Line merge of two versions that may already hold conflict blocks; never nests blocks.

    Each block becomes one token line, so `git merge-file` moves it as a unit.
    Where both sides changed the same lines, the versions of each side (a
    side's block gives one version per section, plain text one version
    labelled with the side) are settled against the base's versions: a
    version in the base survives only if both sides still have it (a side
    that no longer has it replaced it), every other version is kept. One
    version left is a clean merge; several make one flat block.
    """
    blocks: dict[str, Block] = {}
    texts = [_tokenized(text, blocks) for text in (base, first.text, second.text)]
    size = 32
    while any(re.search(f"^([<|=>])\\1{{{size - 1}}}", text, re.M) for text in texts):
        size *= 2
    raw = merge_file(texts[0], Side(first.label, texts[1]), Side(second.label, texts[2]), diff3=True, marker_size=size)
    lines = raw.text.splitlines(keepends=True)
    eol = "\r\n" if first.text.count("\r\n") * 2 > first.text.count("\n") else "\n"
    out: list[str] = []
    conflicted = False
    i = 0
    while i < len(lines):
        if not lines[i].startswith("<" * size + " "):
            out.append(_untokenized(lines[i], blocks))
            i += 1
            continue
        regions: list[list[str]] = [[], [], []]  # first, base, second
        part = 0
        i += 1
        while i < len(lines) and not lines[i].startswith(">" * size + " "):
            line = lines[i]
            if line.startswith("|" * size + " ") or line.rstrip("\r\n") == "|" * size:
                part = 1
            elif line.rstrip("\r\n") == "=" * size:
                part = 2
            else:
                regions[part].append(line)
            i += 1
        i += 1
        text, recorded = _settle(regions, first.label, second.label, blocks, eol)
        out.append(text)
        conflicted = conflicted or recorded
    return MergedText("".join(out), conflicted)


def _tokenized(text: str, blocks: dict[str, Block]) -> str:
    """`text` with every complete conflict block replaced by a token line (kept in `blocks`)."""
    if START.rstrip() not in text:
        return text
    out: list[str] = []
    for piece in parse_blocks(text):
        if isinstance(piece, Block):
            digest = hashlib.sha256(piece.raw.encode("utf-8", "surrogateescape")).hexdigest()
            token = f"{_TOKEN}{digest}\n"
            blocks.setdefault(token, piece)
            out.append(token)
        else:
            out.append(piece)
    return "".join(out)


def _untokenized(line: str, blocks: dict[str, Block]) -> str:
    block = blocks.get(line.rstrip("\r\n") + "\n") if line.startswith(_TOKEN) else None
    return line if block is None else _with_newline_text(block.raw)


def _detokenized(lines: list[str], blocks: dict[str, Block]) -> str:
    """`lines` as text, each token line given back the conflict block it stands for."""
    return "".join(_untokenized(line, blocks) for line in lines)


def _region_pieces(lines: list[str], blocks: dict[str, Block]) -> list[_Piece]:
    pieces: list[_Piece] = []
    for line in lines:
        block = blocks.get(line.rstrip("\r\n") + "\n") if line.startswith(_TOKEN) else None
        pieces.append(line if block is None else block)
    return pieces


def _kept_base(side: list[str], base: list[str]) -> tuple[list[str], bool] | None:
    """(the lines `side` added, whether after the base) when `side` kept the base region whole
    and only added lines before or after it; else None."""
    if len(side) <= len(base):
        return None
    if side[: len(base)] == base:
        return side[len(base) :], True
    if side[len(side) - len(base) :] == base:
        return side[: len(side) - len(base)], False
    return None


def _beside_a_block(
    regions: list[list[str]], first: str, second: str, blocks: dict[str, Block], eol: str
) -> tuple[str, bool] | None:
    """A region whose base holds a conflict block, where a side kept that base as it was and only
    wrote lines before or after it: those lines are that side's, set beside what the other side
    made of the base, never copied into the block's versions (each merge would copy them again,
    and the note would double). None when no side did that."""
    one, base, two = regions
    if not any(line.startswith(_TOKEN) for line in base):
        return None
    kept_one, kept_two = _kept_base(one, base), _kept_base(two, base)
    if kept_one is not None and kept_two is not None:
        (added_one, after_one), (added_two, after_two) = kept_one, kept_two
        if after_one == after_two:  # both wrote on the same side of it: only those lines can clash
            inner, recorded = _settle([added_one, [], added_two], first, second, blocks, eol)
            kept = _detokenized(base, blocks)
            return (kept + inner if after_one else inner + kept), recorded
        later, earlier = (added_one, added_two) if after_one else (added_two, added_one)
        return _detokenized(earlier + base + later, blocks), False
    if kept_one is not None:
        added, at_end = kept_one
        return _detokenized(two + added if at_end else added + two, blocks), False
    if kept_two is not None:
        added, at_end = kept_two
        return _detokenized(one + added if at_end else added + one, blocks), False
    return None


def _beside_a_shared_block(
    regions: list[list[str]], first: str, second: str, blocks: dict[str, Block], eol: str
) -> tuple[str, bool] | None:
    """A region where both sides start (or end) with the same conflict block, which the base
    lacks: two machines recorded the same conflict, and one or both then wrote lines after (or
    before) it. The shared lines stay once, as they are; only what differs beside them is settled
    (against the base's lines a side left as they were), so those lines are never copied into
    the block's versions, which would double the note each time the two meet again. None when the
    sides share no block at their start or end."""
    one, base, two = regions
    head = _common_prefix(one, two)
    tail = _common_suffix(one[head:], two[head:])
    common = one[:head] + one[len(one) - tail :]
    if not any(line.startswith(_TOKEN) for line in common):
        return None
    rest_one, rest_two = one[head : len(one) - tail], two[head : len(two) - tail]
    # The base's lines that a side still has next to the shared lines are what it left alone.
    left = 0
    if head and not tail:
        left = max(_common_suffix(base, rest_one), _common_suffix(base, rest_two))
        rest_base = base[len(base) - left :]
    elif tail and not head:
        left = max(_common_prefix(base, rest_one), _common_prefix(base, rest_two))
        rest_base = base[:left]
    else:
        rest_base = []
    if rest_one in (rest_base, rest_two):
        middle, recorded = _detokenized(rest_two, blocks), False
    elif rest_two == rest_base:
        middle, recorded = _detokenized(rest_one, blocks), False
    else:
        middle, recorded = _settle([rest_one, rest_base, rest_two], first, second, blocks, eol)
    return _detokenized(one[:head], blocks) + middle + _detokenized(one[len(one) - tail :], blocks), recorded


def _written_beside_a_new_block(
    regions: list[list[str]], first: str, second: str, blocks: dict[str, Block], eol: str
) -> tuple[str, bool] | None:
    """A region where the base holds no conflict block and a side holds one, with lines it wrote
    before or after it (none of them the base's): the block is settled on its own against the
    other side (plain text, or a block of its own, maybe with lines beside it too, settled the
    same way), and those lines set beside the result, once. Read as versions, they would go
    into every version of the block (a version of one machine with another's lines, that no
    machine ever had), and be copied again at each later meeting. Lines both sides have alike
    beside their blocks stay once. None when the region is not like that."""
    one, base, two = regions
    if any(line.startswith(_TOKEN) for line in base) or not any(
        line.startswith(_TOKEN) for line in one + two
    ):
        return None
    head = _common_prefix(one, two)
    tail = _common_suffix(one[head:], two[head:])
    if head or tail:  # plain lines (a shared block is _beside_a_shared_block's) both sides have alike
        cut = _common_prefix(base, one[:head])
        cut_end = _common_suffix(base[cut:], one[len(one) - tail :])
        inner = [one[head : len(one) - tail], base[cut : len(base) - cut_end], two[head : len(two) - tail]]
        if inner[0] == inner[2]:
            middle, recorded = _detokenized(inner[0], blocks), False
        else:
            middle, recorded = _settle(inner, first, second, blocks, eol)
        return _detokenized(one[:head], blocks) + middle + _detokenized(one[len(one) - tail :], blocks), recorded
    for side, other in ((0, 2), (2, 0)):
        lines = regions[side]
        tokens = [n for n, line in enumerate(lines) if line.startswith(_TOKEN)]
        if not tokens:
            continue
        # Of several blocks, the one the other side's lines come from (the last at a tie) meets
        # them; the others stay as they are, beside it, like lines written there.
        theirs = {x for piece in _region_pieces(regions[other], blocks) for x in _lines_of(piece)}
        at = max(tokens, key=lambda n: (sum(x in theirs for x in _lines_of(blocks[_key(lines[n])])), n))
        before, after = lines[:at], lines[at + 1 :]
        if not (before or after) or _common_prefix(before, base) or _common_suffix(after, base):
            continue
        inner = [lines[at : at + 1], base, regions[other]] if side == 0 else [regions[other], base, lines[at : at + 1]]
        text, recorded = _settle(inner, first, second, blocks, eol)
        return _detokenized(before, blocks) + text + _detokenized(after, blocks), recorded
    return None


def _key(token_line: str) -> str:
    return token_line.rstrip("\r\n") + "\n"


def _lines_of(piece: _Piece) -> list[str]:
    """The lines of a piece of a region: a plain line, or every version's lines of a block."""
    return [x for s in piece.sections for x in s.lines] if isinstance(piece, Block) else [piece]


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _common_suffix(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[len(a) - 1 - n] == b[len(b) - 1 - n]:
        n += 1
    return n


def _settle(
    regions: list[list[str]], first: str, second: str, blocks: dict[str, Block], eol: str
) -> tuple[str, bool]:
    """The text for a region both sides changed, and whether it holds a new conflict."""
    beside = _beside_a_block(regions, first, second, blocks, eol)
    if beside is not None:
        return beside
    shared = _beside_a_shared_block(regions, first, second, blocks, eol)
    if shared is not None:
        return shared
    written = _written_beside_a_new_block(regions, first, second, blocks, eol)
    if written is not None:
        return written
    one, base, two = (_region_pieces(r, blocks) for r in regions)
    v1, v2 = versions(one, first), versions(two, second)
    # Plain text where the base had a block is a resolution: a decision, kept even if it equals a version.
    settled = any(isinstance(p, Block) for p in base)
    plain = [not any(isinstance(p, Block) for p in side) for side in (one, two)]
    kept = _three_way(versions(base, ""), v1, v2, decided=(settled and plain[0], settled and plain[1]))
    texts = {s.text for s in kept}
    if texts == {s.text for s in v1}:
        return _detokenized(regions[0], blocks), False
    if texts == {s.text for s in v2}:
        return _detokenized(regions[2], blocks), False
    if len(kept) == 1:
        return kept[0].text, False
    return render_sections(sorted(kept, key=lambda s: (s.label, s.text)), eol=eol, trim=True), True


def _three_way(
    base: list[Section], one: list[Section], two: list[Section], decided: tuple[bool, bool] = (False, False)
) -> list[Section]:
    """Versions of both sides, less the base's versions that one side no longer has (it replaced
    them), except a side's `decided` version (it resolved the base's block, so its text is a
    choice, not a leftover); identical versions are one, with the labels of all."""
    in_base = {s.text for s in base}
    in_one, in_two = {s.text for s in one}, {s.text for s in two}
    kept = [
        s
        for n, side in enumerate((one, two))
        for s in side
        if decided[n] or s.text not in in_base or (s.text in in_one and s.text in in_two)
    ]
    if not kept and one and two:
        kept = [*one, *two]  # each side replaced the other's base version (two resolutions): keep both
    return _dedupe(kept)


def versions(pieces: Iterable[_Piece], label: str) -> list[Section]:
    """The versions a stretch of text stands for: itself (labelled `label`) when it holds no
    block, else one per label found in its blocks, each block read as that label's section
    (or its first section, where that label has none)."""
    pieces = list(pieces)
    found = [p for p in pieces if isinstance(p, Block)]
    if not found:
        return [Section(label, [str(p) for p in pieces])]
    labels = list(dict.fromkeys(s.label for block in found for s in block.sections))
    out: list[Section] = []
    for name in labels:
        lines: list[str] = []
        for piece in pieces:
            if isinstance(piece, Block):
                chosen = [s for s in piece.sections if s.label == name] or piece.sections[:1]
                for section in chosen:
                    lines.extend(_with_newline(section.lines))
            else:
                lines.append(piece)
        out.append(Section(name, lines))
    return _dedupe(out)


def _dedupe(sections: list[Section]) -> list[Section]:
    """One section per distinct text, in first-seen order, labelled with every label it had."""
    by_text: dict[str, list[Section]] = {}
    for section in sections:
        by_text.setdefault(section.text, []).append(section)
    return [Section(join_labels([s.label for s in group]), group[0].lines) for group in by_text.values()]


def label_names(label: str) -> list[str]:
    """The machine names in a section label ('m1, m3 (front matter)' -> ['m1', 'm3'])."""
    bare = label.removesuffix(FRONT_MATTER_LABEL).strip()
    return [name.strip() for name in bare.split(", ") if name.strip()]


def join_labels(labels: list[str]) -> str:
    """One label for a version several machines wrote alike ('m1', 'm3' -> 'm1, m3')."""
    if len(set(labels)) == 1:
        return labels[0]
    names = list(dict.fromkeys(name for label in labels for name in label_names(label)))
    front = any(label.endswith(FRONT_MATTER_LABEL) for label in labels)
    return ", ".join(names) + (f" {FRONT_MATTER_LABEL}" if front else "")


def render_sections(sections: list[Section], *, eol: str = "\n", trim: bool = False) -> str:
    """A conflict block of these sections (two: git's own format). `trim` moves lines every
    section starts or ends with out of the block."""
    bodies = [_with_newline(s.lines) for s in sections]
    head: list[str] = []
    tail: list[str] = []
    if trim:
        while all(len(b) > len(head) + len(tail) for b in bodies) and len({b[len(head)] for b in bodies}) == 1:
            head.append(bodies[0][len(head)])
        while all(len(b) > len(head) + len(tail) for b in bodies) and len({b[-1 - len(tail)] for b in bodies}) == 1:
            tail.insert(0, bodies[0][-1 - len(tail)])
        bodies = [b[len(head) : len(b) - len(tail)] for b in bodies]
    out = [*head, f"{START}{sections[0].label}{eol}", *bodies[0]]
    for section, body in zip(sections[1:-1], bodies[1:-1], strict=True):
        out.append(f"{MIDDLE} {section.label}{eol}" if section.label else f"{MIDDLE}{eol}")
        out.extend(body)
    out += [f"{MIDDLE}{eol}", *bodies[-1], f"{END}{sections[-1].label}{eol}", *tail]
    return "".join(out)


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
    if holds_itself(loaded):
        return None  # merged as plain text
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
    # The front-matter block at the top of a body is settled on its own, never with body lines.
    block_base, body_base = _front_matter_block(body_base)
    block_one, body_one = _front_matter_block(body_one)
    block_two, body_two = _front_matter_block(body_two)
    merged_body = merge_lines(body_base, Side(first.label, body_one), Side(second.label, body_two))
    new: list[Section] = []
    if field_conflicts:
        new = [
            Section(f"{first.label} {FRONT_MATTER_LABEL}", [_field_yaml(k, x) for k, x, _ in field_conflicts]),
            Section(f"{second.label} {FRONT_MATTER_LABEL}", [_field_yaml(k, y) for k, _, y in field_conflicts]),
        ]
    top, top_conflicted = _settle_front_matter_blocks(
        block_base, [(block_one, first.label, meta_one), (block_two, second.label, meta_two)], new, meta
    )
    body = top + merged_body.text
    if meta == meta_one:
        fm = fm_one
    elif meta == meta_two:
        fm = fm_two
    else:
        fm = _changed_lines(fm_one, meta_one, meta)
    text = body if not meta and not fm_one and not fm_two else f"---\n{fm.rstrip(chr(10))}\n---\n{body}"
    return MergedText(text, top_conflicted or merged_body.conflicted)


def _changed_lines(fm_text: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    """`fm_text` (fields `before`) holding the fields `after`: only the lines of fields whose value
    changed are rewritten, so a person's comments, quoting and layout stay; the whole front
    matter is written anew only when that cannot be done line by line."""
    changes = {k: v for k, v in after.items() if k not in before or before[k] != v}
    edited = set_fields(f"---\n{fm_text}\n---\n", changes, [k for k in before if k not in after])
    fm = split_front_matter(edited)[0] if edited is not None else None
    return fm if fm is not None else _dump(after)


def _front_matter_block(body: str) -> tuple[Block | None, str]:
    """(the front-matter conflict block a body starts with, or None; the rest of the body)."""
    if not body.startswith(START):
        return None, body
    first_line = body.split("\n", 1)[0].rstrip("\r")
    if not first_line.endswith(FRONT_MATTER_LABEL):
        return None, body
    pieces = parse_blocks(body)
    if pieces and isinstance(pieces[0], Block) and body.startswith(pieces[0].raw):
        return pieces[0], body[len(pieces[0].raw) :]
    return None, body


def _settle_front_matter_blocks(
    base: Block | None,
    sides: list[tuple[Block | None, str, dict[str, Any]]],
    new: list[Section],
    meta: dict[str, Any],
) -> tuple[str, bool]:
    """Settle the front-matter blocks of a merge, as merge_lines settles a body region: the block
    for the top of the merged body ('' for none), and whether it is a new conflict.

    `sides` holds each side's block, label and fields; `meta` is the merged
    fields. A side without the block the base had resolved it: its fields are
    its choice, kept like a resolved body region. One version left that the
    merged fields do not hold stays in a block beside them, so it is not lost.
    """
    found: list[list[Section]] = []
    decided: list[bool] = []
    keys = list(dict.fromkeys(k for s in (base.sections if base else []) for k in _section_keys(s)))
    for block, label, fields in sides:
        if block is None and base is not None:
            found.append([Section(f"{label} {FRONT_MATTER_LABEL}", [_fields_yaml(fields, keys)])])
            decided.append(True)
        else:
            found.append(block.sections if block else [])
            decided.append(False)
    v1, v2 = found
    kept = _three_way(base.sections if base else [], v1, v2, decided=(decided[0], decided[1])) if (v1 or v2) else []
    kept = _dedupe([*kept, *new])
    if len(kept) == 1:
        keys = _section_keys(kept[0])
        current = _fields_yaml(meta, keys)
        if current == _fields_yaml({**meta, **_section_fields(kept[0])[0]}, keys) and not _section_fields(kept[0])[1]:
            return "", False  # the front matter holds it
        label = next((lb for _b, lb, fields in sides if _fields_yaml(fields, keys) == current), sides[0][1])
        kept = _dedupe([Section(f"{label} {FRONT_MATTER_LABEL}", [current]), kept[0]])
    if len(kept) < 2:
        return "", False
    texts = {s.text for s in kept}
    for (block, _label, _fields), side in zip(sides, found, strict=True):
        if block is not None and texts == {s.text for s in side}:
            return _with_newline_text(block.raw), bool(new)
    return render_sections(sorted(kept, key=lambda s: (s.label, s.text))), True


def _section_keys(section: Section) -> list[str]:
    values, removed = _section_fields(section)
    return list(dict.fromkeys([*values, *removed]))


def _fields_yaml(fields: dict[str, Any], keys: list[str]) -> str:
    return "".join(_field_yaml(k, fields.get(k, _MISSING)) for k in keys)


def _section_fields(section: Section) -> tuple[dict[str, Any], list[str]]:
    """The front-matter values a front-matter block's section holds, and the fields it removes."""
    removed = []
    for line in section.lines:
        match = re.match(r"^# (\S+): \(removed\)$", line.rstrip("\r\n"))
        if match:
            removed.append(match.group(1))
    try:
        loaded = yaml.load(section.text, Loader=_Loader) or {}
    except yaml.YAMLError:
        loaded = {}
    values = {str(k): v for k, v in loaded.items()} if isinstance(loaded, dict) else {}
    return values, removed


def _dump(meta: dict[str, Any]) -> str:
    """YAML the way notes are written: block style, field order kept, unicode as is."""
    return yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000, default_flow_style=False)


def merge_fields(
    base: dict[str, Any], one: dict[str, Any], two: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, Any, Any]]]:
    """Three-way merge of front matter fields.

    Returns the merged fields and the fields both sides changed to different
    values (key, first value, second value); for those the merged fields hold
    the value of the side with the later `updated` stamp. `updated` and
    `machine` never conflict: the later stamp wins, with its side's machine.
    """
    keys = list(dict.fromkeys([*one, *two]))
    merged: dict[str, Any] = {}
    conflicts: list[tuple[str, Any, Any]] = []
    second_is_newer = _stamp_key(two.get("updated")) > _stamp_key(one.get("updated"))
    # `machine:` says who made the version `updated:` dates: it goes with the later stamp.
    newer = (two if second_is_newer else one) if one.get("updated") != two.get("updated") else None
    for key in keys:
        b, x, y = base.get(key, _MISSING), one.get(key, _MISSING), two.get(key, _MISSING)
        if key == "machine" and newer is not None and key in newer:
            value = newer[key]
        elif x == y:
            value = x
        elif x == b:
            value = y
        elif y == b:
            value = x
        elif key == "tags":
            value = _merge_tags(b, x, y)
        elif key == "updated":
            value = max((v for v in (x, y) if v is not _MISSING), key=_stamp_key)
        elif key == "created":
            present = [v for v in (x, y) if v not in (_MISSING, None, "")]
            value = min(present, key=_stamp_key) if present else x
        else:
            value = y if second_is_newer else x
            if key not in _QUIET_FIELDS:
                conflicts.append((key, x, y))
        if value is not _MISSING:
            merged[key] = value
    return merged, conflicts


def _stamp_key(value: Any) -> tuple[float, str]:
    """How `updated:`/`created:` values compare: by the moment they name (any offset), then as
    text; a value that is no time comes before every time."""
    when = stamp_time(value)
    return (when.timestamp() if when is not None else float("-inf"), "" if value in (None, _MISSING) else str(value))


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


# -- reading conflict blocks -----------------------------------------------------------


@dataclass
class Section:
    """One version in a conflict block: who wrote it (a label naming machines) and its lines."""

    label: str
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    @property
    def names(self) -> list[str]:
        return label_names(self.label)


@dataclass
class Block:
    """One conflict block: a section per version; `raw` is its text as written, `line` the
    1-based line of its opening marker."""

    sections: list[Section]
    raw: str = ""
    line: int = 0
    base: list[str] | None = None  # a diff3 `|||||||` section (a hand-made git merge): never kept

    @property
    def front_matter(self) -> bool:
        return self.sections[0].label.endswith(FRONT_MATTER_LABEL)

    @property
    def labels(self) -> list[str]:
        return [s.label for s in self.sections]

    @property
    def machines(self) -> list[str]:
        """The machine names of its versions, in order."""
        return list(dict.fromkeys(name for s in self.sections for name in (s.names or [s.label])))

    # The two-version view (`first` = the upper section, `second` = the last one).
    @property
    def first_label(self) -> str:
        return self.sections[0].label

    @property
    def second_label(self) -> str:
        return self.sections[-1].label

    @property
    def first(self) -> list[str]:
        return self.sections[0].lines

    @property
    def second(self) -> list[str]:
        return self.sections[-1].lines


class Stray(str):
    """A conflict marker line outside any complete block (a block half removed by hand)."""

    number: int = 0


_Piece = str | Block


def marker_of(line: str) -> tuple[str, str] | None:
    """(kind, label) when `line` is a conflict marker line: start, sep, base or end."""
    bare = line.rstrip("\r\n")
    head = bare[:7]
    if len(head) < 7 or head[0] not in "<=|>" or head != head[0] * 7:
        return None
    rest = bare[7:]
    if rest and rest[0] not in " \t":
        return None
    kind = {"<": "start", "=": "sep", "|": "base", ">": "end"}[head[0]]
    return kind, rest.strip()


def parse_blocks(text: str, first_line: int = 1) -> list[_Piece]:
    """Split text into plain lines, complete conflict blocks and stray marker lines (`Stray`).

    A block nested inside another (written by versions before blocks were
    N-way) is read as the versions it stands for: the result is flat.
    `first_line` is the line number of the text's first line (for messages).
    """
    lines = text.splitlines(keepends=True)
    pieces: list[_Piece] = []
    strays: list[int] = []
    i = 0
    while i < len(lines):
        mark = marker_of(lines[i])
        if mark is not None and mark[0] == "start":
            end = _matching_end(lines, i)
            block = _block(lines, i, end, first_line) if end is not None else None
            if block is not None and end is not None:
                pieces.append(block)
                i = end + 1
                continue
        if mark is not None and (mark[0] in ("start", "end") or (mark[0] == "sep" and mark[1])):
            strays.append(len(pieces))
        pieces.append(lines[i])
        i += 1
    if strays:  # a bare ======= or ||||||| counts beside them (alone it is a markdown heading rule)
        strays += [
            n for n, p in enumerate(pieces) if isinstance(p, str) and (marker_of(p) or ("", ""))[0] in ("sep", "base")
        ]
        number = first_line
        for n, piece in enumerate(pieces):
            if n in strays and isinstance(piece, str):
                stray = Stray(piece)
                stray.number = number
                pieces[n] = stray
            number += piece.raw.count("\n") if isinstance(piece, Block) else 1
    return pieces


def _matching_end(lines: list[str], start: int) -> int | None:
    depth = 0
    for j in range(start, len(lines)):
        mark = marker_of(lines[j])
        if mark is None:
            continue
        if mark[0] == "start":
            depth += 1
        elif mark[0] == "end":
            depth -= 1
            if depth == 0:
                return j
    return None


def _block(lines: list[str], start: int, end: int, first_line: int) -> Block | None:
    """The block from lines[start] to lines[end] (balanced); None without any separator."""
    sections = [Section(marker_of(lines[start])[1])]  # type: ignore[index]
    base: list[str] | None = None
    target: list[str] = sections[0].lines
    depth = 0
    for j in range(start + 1, end):
        mark = marker_of(lines[j])
        if mark is not None and depth == 0 and mark[0] == "sep":
            sections.append(Section(mark[1]))
            target = sections[-1].lines
            continue
        if mark is not None and depth == 0 and mark[0] == "base" and len(sections) == 1:
            base = target = []
            continue
        if mark is not None and mark[0] == "start":
            depth += 1
        elif mark is not None and mark[0] == "end":
            depth -= 1
        target.append(lines[j])
    if len(sections) < 2:
        return None
    end_label = marker_of(lines[end])[1]  # type: ignore[index]
    if not sections[-1].label:
        sections[-1].label = end_label
    flat: list[Section] = []
    for n, section in enumerate(sections):
        offset = first_line + start + 1 + sum(len(s.lines) + 1 for s in sections[:n])
        inner = parse_blocks(section.text, offset) if any(marker_of(x) for x in section.lines) else None
        if inner is not None and any(isinstance(p, Block) for p in inner):
            flat.extend(versions(inner, section.label))  # an old nested block: its versions
        else:
            flat.append(section)
    return Block(_dedupe(flat), "".join(lines[start : end + 1]), first_line + start, base)


def block_labels(text: str) -> list[list[str]]:
    """The section labels of every conflict block in `text`."""
    return [p.labels for p in parse_blocks(text) if isinstance(p, Block)]


def stray_markers(text: str, first_line: int = 1) -> list[int]:
    """Line numbers of conflict marker lines outside any complete block."""
    return [p.number for p in parse_blocks(text, first_line) if isinstance(p, Stray)]


def stray_lines(path: str, text: str) -> list[tuple[int, str]]:
    """(line number, line) of every conflict marker line outside a complete block, front matter
    included: what a block half removed by hand leaves."""
    fm_text, body = split_front_matter(text) if path.endswith(".md") else (None, text)
    first_line = text[: len(text) - len(body)].count("\n") + 1
    found = [(p.number, p.rstrip("\r\n")) for p in parse_blocks(body, first_line) if isinstance(p, Stray)]
    if fm_text is not None and has_conflict_markers(fm_text):
        found = [(n + 2, line) for n, line in enumerate(fm_text.splitlines()) if marker_of(line)] + found
    return found


def lay_over(path: str, base: str | None, edit: Side, incoming: Side) -> str:
    """A held-back edit (one with marker lines outside a whole block) laid over the incoming
    version, on `base`, the version the edit was made on.

    Line by line first, so an incoming change beside a half-removed block comes in and the edit
    stays as the person left it. Where the two changed the same lines, the versions are set
    side by side in a block of their own; the edit's leftover marker lines are kept out of that
    block (inside it, the first `>>>>>>>` would close it and name a version after the wrong
    machine) and put back after the line they followed, past the block if that line is in it,
    so the note stays held back and says where, until the person finishes."""
    if base is not None:
        plain = merge_file(base, edit, incoming)
        if not plain.conflicted:
            return plain.text
    lines = edit.text.splitlines(keepends=True)
    strays = {p.number - 1 for p in parse_blocks(edit.text) if isinstance(p, Stray)}
    if not strays:
        return merge_texts(path, base, edit, incoming).text
    kept = [line for i, line in enumerate(lines) if i not in strays]
    merged = merge_texts(path, base, Side(edit.label, "".join(kept)), incoming).text.splitlines(keepends=True)
    blocks: list[tuple[int, int]] = []  # (first, last) line index of each block in `merged`
    at = 0
    for piece in parse_blocks("".join(merged)):
        size = piece.raw.count("\n") if isinstance(piece, Block) else 1
        if isinstance(piece, Block):
            blocks.append((at, at + size - 1))
        at += size
    placed: list[tuple[int, str]] = []  # (index in `merged` to insert before, stray line)
    start = 0
    for i in sorted(strays):
        before = next((lines[j] for j in range(i - 1, -1, -1) if j not in strays), None)
        found = next((j for j in range(start, len(merged)) if merged[j] == before), None) if before else None
        where = 0 if before is None else len(merged) if found is None else found + 1
        where = next((last + 1 for first, last in blocks if first < where <= last), where)
        start = max(start, where)
        line = lines[i] if lines[i].endswith("\n") else lines[i] + "\n"
        placed.append((where, line))
    for where, line in reversed(placed):
        merged.insert(where, line)
    return "".join(merged)


def lines_named(lines: list[tuple[int, str]], most: int = 3) -> str:
    """'line 12 `>>>>>>> server`, ...' for the first `most` of (number, line), for a one-line message."""
    shown = ", ".join(f"line {n} `{text}`" for n, text in lines[:most])
    return shown + (f" and {len(lines) - most} more" if len(lines) > most else "")


def new_strays(path: str, text: str, before: str) -> list[tuple[int, str]]:
    """The marker lines of `text` outside a complete block that `before` (the version it was made
    from) did not have as many of: what a resolution stopped half way leaves. A note that quotes
    a lone marker line on purpose, and had it already, has none."""
    had = Counter(line for _n, line in stray_lines(path, before))
    new: list[tuple[int, str]] = []
    for number, line in stray_lines(path, text):
        if had[line] > 0:
            had[line] -= 1
        else:
            new.append((number, line))
    return new


# -- resolving ----------------------------------------------------------------------------


def resolve_text(text: str, keep: str, *, me: str | None = None) -> str:
    """Remove every conflict block of a note, keeping in each:

    - 'both' (or 'all'): every version, one after the other;
    - 'keep:NAME': the version(s) of machine NAME;
    - 'ours': the version of this machine, `me`;
    - 'theirs': the version that is not `me`'s, in blocks of exactly two versions.

    A block without the asked-for version raises UsageError naming the
    machines it has, and nothing is changed. Front-matter blocks put the
    chosen version's values in the front matter ('both' leaves the front
    matter as sync set it: the values of the later edit). Marker lines
    outside a complete block are dropped by 'both'; any other choice refuses,
    since which version they belong to is unknown.
    """
    fm_text, body = split_front_matter(text)
    first_line = text[: len(text) - len(body)].count("\n") + 1
    new_body, field_values, removed = resolve_body(body, keep, me, first_line, front_matter=fm_text is not None)
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


def resolve_body(
    body: str, keep: str, me: str | None, first_line: int = 1, front_matter: bool = False
) -> tuple[str, dict[str, Any], list[str]]:
    """(body without conflict blocks, front-matter values chosen, front-matter fields removed)."""
    pieces = parse_blocks(body, first_line)
    if keep.startswith(KEEP_PREFIX):
        keep = KEEP_PREFIX + machine_named(keep[len(KEEP_PREFIX) :].strip(), [p for p in pieces if isinstance(p, Block)])
    strays = [p for p in pieces if isinstance(p, Stray)]
    if strays and keep not in ("both", "all"):
        where = ", ".join(f"line {p.number} `{p.rstrip()}`" for p in strays[:5])
        more = f" and {len(strays) - 5} more" if len(strays) > 5 else ""
        raise UsageError(
            f"has conflict marker lines outside a complete block ({where}{more}), so which version they "
            "belong to is unknown; edit it (`anamnesis resolve NOTE --edit`), or keep every version with --both"
        )
    out: list[str] = []
    field_values: dict[str, Any] = {}
    removed: list[str] = []
    for piece in pieces:
        if isinstance(piece, Stray):
            continue
        if isinstance(piece, str):
            out.append(piece)
            continue
        if piece.front_matter and front_matter:
            if keep in ("both", "all"):
                continue  # the front matter keeps the values sync chose
            for section in _chosen(piece, keep, me):
                values, gone = _section_fields(section)
                field_values.update(values)
                removed.extend(gone)
            continue
        for section in _chosen(piece, keep, me):
            out.extend(_with_newline(section.lines))
    return "".join(out), field_values, removed


def machine_named(name: str, blocks: list[Block]) -> str:
    """The machine of `blocks` that `name` means: itself, or the one machine whose id it begins
    (`server` for `server-61ef`); a prefix of several is a UsageError naming them. A name that
    matches none is returned as it is, for the caller to say which machines there are."""
    machines = list(dict.fromkeys(m for block in blocks for m in block.machines))
    if name in machines:
        return name
    candidates = [m for m in machines if m.startswith(name)]
    if len(candidates) > 1:
        raise UsageError(f"--keep {name} could be {', '.join(candidates)}: give more of the machine id")
    return candidates[0] if candidates else name


def _chosen(block: Block, keep: str, me: str | None) -> list[Section]:
    """The sections of `block` that `keep` asks for (see resolve_text)."""
    if keep in ("both", "all"):
        return block.sections
    where = f"the conflict at line {block.line}" if block.line else "a conflict block"
    have = ", ".join(block.machines)
    if keep == "theirs":
        mine = [s for s in block.sections if me is not None and me in s.names]
        if len(block.sections) != 2:
            raise UsageError(
                f"{where} has {plural(len(block.sections), 'version')} ({have}); --theirs means the other one of two: "
                "choose one with --keep MACHINE, or keep them all with --both"
            )
        if len(mine) != 1:
            raise UsageError(
                f"this machine ({me}) has no version in {where} ({have}), so 'theirs' is ambiguous: "
                "choose one with --keep MACHINE"
            )
        return [s for s in block.sections if s is not mine[0]]
    if keep == "ours":
        if not me:
            raise UsageError("this machine has no machine id; choose a version with --keep MACHINE")
        name = me
    elif keep.startswith(KEEP_PREFIX):
        name = keep[len(KEEP_PREFIX) :].strip()
    else:
        raise ValueError(f"keep must be both, ours, theirs or keep:MACHINE, not {keep!r}")
    chosen = [s for s in block.sections if name in s.names or s.label == name]
    if not chosen:
        raise UsageError(
            f"{name} has no version in {where}; it has {have}: keep one of those with --keep MACHINE, "
            "every version with --both, or edit it with --edit"
        )
    return chosen


def _with_newline(lines: list[str]) -> list[str]:
    if lines and not lines[-1].endswith("\n"):
        return [*lines[:-1], lines[-1] + "\n"]
    return lines


def _with_newline_text(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"
