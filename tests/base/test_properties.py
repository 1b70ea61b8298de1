"""Properties over many generated inputs, where single examples stood: the merge is symmetric and
loses no line a side wrote; a note renders and parses back to itself."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from anamnesis.base.notes import Note, parse_note, render_note
from anamnesis.store.merge import Side, merge_texts

# Small and quick: the fast suite runs these on every change (git merge-file is a process per merge).
FAST = settings(max_examples=40, deadline=None)

FRONT = """---
id: abcdefghjk
type: semantic
title: Pool sizing
tags:
- postgres
created: '2024-01-01T00:00:00Z'
updated: '2024-01-01T00:00:00Z'
machine: laptop
---

"""

# Few distinct words, so sides often touch the same lines and write the same text.
LINE = st.sampled_from(["alpha", "beta", "gamma", "delta", "pool size 20", "timeout 30 s", "- item", ""])
LINES = st.lists(LINE, max_size=8)


@st.composite
def edited(draw: st.DrawFn, base: list[str]) -> list[str]:
    """A side's version of `base`: some lines kept, some replaced, some inserted, some deleted."""
    out: list[str] = []
    for line in base:
        action = draw(st.sampled_from(["keep", "keep", "replace", "delete", "insert"]))
        if action == "keep":
            out.append(line)
        elif action == "replace":
            out.append(draw(LINE) + " " + draw(st.sampled_from(["one", "two"])))
        elif action == "insert":
            out += [line, draw(LINE)]
    return out + draw(st.lists(LINE, max_size=2))


@st.composite
def three_versions(draw: st.DrawFn) -> tuple[list[str], list[str], list[str]]:
    base = draw(LINES)
    return base, draw(edited(base)), draw(edited(base))


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _added(side: list[str], base: list[str]) -> set[str]:
    return {line for line in side if line not in base and line}


@FAST
@given(versions=three_versions(), note=st.booleans())
def test_merge_is_symmetric_and_keeps_every_line_a_side_added(
    versions: tuple[list[str], list[str], list[str]], note: bool
) -> None:
    base, one, two = versions
    path, head = ("global/facts/x.md", FRONT) if note else ("notes.txt", "")
    texts = [head + _text(lines) for lines in (base, one, two)]
    forward = merge_texts(path, texts[0], Side("laptop", texts[1]), Side("desktop", texts[2]))
    backward = merge_texts(path, texts[0], Side("desktop", texts[2]), Side("laptop", texts[1]))
    assert forward == backward
    merged = forward.text.splitlines()
    for line in _added(one, base) | _added(two, base):
        assert line in merged, (line, forward.text)


TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\ufeff"),
    max_size=30,
)
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=12)
STAMP = st.datetimes(timezones=st.none()).map(lambda d: d.replace(microsecond=0).isoformat() + "Z")
IDENT = st.text(alphabet="0123456789abcdefghjkmnpqrstvwxyz", min_size=10, max_size=10)
MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")  # a conflict is a problem by design: not here
BODY = st.lists(TEXT.filter(lambda line: not line.startswith(MARKERS)), max_size=5).map(
    lambda lines: "".join(line + "\n" for line in lines)
)


@st.composite
def notes(draw: st.DrawFn) -> Note:
    ident = draw(IDENT)
    return Note(
        path=f"global/facts/x-{ident}.md",
        id=ident,
        type=draw(st.sampled_from(["semantic", "procedural", "episodic", "preference"])),
        title=draw(TEXT.filter(lambda t: t.strip() == t and t != "")),
        body=draw(BODY),
        project=draw(st.none() | WORD.map(lambda w: "github.com/acme/" + w)),
        tags=draw(st.lists(WORD, max_size=3, unique=True)),
        created=draw(STAMP),
        updated=draw(STAMP),
        machine=draw(WORD),
        source=draw(st.sampled_from(["cli", "mcp", "hook"])),
        supersedes=draw(st.lists(IDENT.filter(lambda other: other != ident), max_size=2, unique=True)),
    )



@FAST
@given(note=notes())
def test_render_then_parse_gives_the_same_note(note: Note) -> None:
    """Every field comes back as it was; the body up to the blank space around it (a file's body
    starts after one blank line and ends with one newline), and once they are gone a second round
    changes nothing."""
    text = render_note(note)
    back = parse_note(text, note.path)
    assert back.problems == []
    assert back.metadata() == note.metadata()
    assert back.body.strip() == note.body.strip()
    # Blank lines at the top of a body are not kept (parsing drops them), so compare without them.
    assert render_note(back) == render_note(dataclasses.replace(note, body=note.body.lstrip("\n")))
