"""The note format: round trips, lenient parsing, layout."""

from __future__ import annotations

import pytest
from conftest import RunCli

from anamnesis.base.notes import (
    Note,
    front_matter_fields,
    has_conflict_markers,
    new_id,
    note_relpath,
    parse_note,
    render_note,
    slugify,
)
from anamnesis.base.paths import Store


def make_note(**fields: object) -> Note:
    base: dict[str, object] = {
        "path": "global/facts/x-0123456789.md",
        "id": "0123456789",
        "type": "semantic",
        "title": "Pool: size matters",
        "body": "Body with `pg_bouncer.pool_size`.\n",
        "project": "github.com/acme/api",
        "tags": ["postgres", "perf"],
        "created": "2026-11-01T10:00:00Z",
        "updated": "2026-11-02T10:00:00Z",
        "machine": "desk-1a2b",
        "source": "cli",
    }
    base.update(fields)
    return Note(**base)  # type: ignore[arg-type]


def test_render_then_parse_round_trips_every_field() -> None:
    note = make_note(extra={"links": ["a", "b"]})
    text = render_note(note)
    assert text.startswith("---\nid: 0123456789\ntype: semantic\n")
    back = parse_note(text, note.path)
    assert back.metadata() == note.metadata()
    assert back.body == note.body
    assert back.problems == []


def test_broken_yaml_is_still_a_note_with_a_problem() -> None:
    text = "---\ntitle: [unclosed\ntags: x\n---\n# Heading here\nsome text\n"
    note = parse_note(text, "projects/acme/howto/deploy-steps-abcdefghjk.md")
    assert note.type == "procedural"  # from the folder
    assert note.project == "acme"  # from the folder
    assert note.id == "abcdefghjk"  # from the file name
    assert "some text" in note.body
    assert any("not valid YAML" in p for p in note.problems)


def test_no_front_matter_derives_title_from_heading() -> None:
    note = parse_note("# My Title\n\ntext\n", "global/facts/whatever.md")
    assert note.title == "My Title"
    assert note.problems == ["no front matter"]
    assert note.id.startswith("p")


def test_unclosed_front_matter_and_non_mapping() -> None:
    assert "not closed" in parse_note("---\ntitle: x\nno end\n", "a.md").problems[0]
    assert "not a mapping" in parse_note("---\n- a\n- b\n---\nbody\n", "a.md").problems[0]


def test_unknown_type_falls_back_and_is_reported() -> None:
    note = parse_note("---\ntype: diary\ntitle: t\n---\nb\n", "global/sessions/t.md")
    assert note.type == "episodic"
    assert any("unknown type" in p for p in note.problems)


def test_dates_and_tag_strings_are_normalised() -> None:
    note = parse_note("---\ntitle: t\ncreated: 2026-11-01 10:00:00\ntags: 'a, #B c'\n---\nb\n", "a.md")
    assert note.created == "2026-11-01T10:00:00Z"
    assert note.updated == note.created
    assert note.tags == ["a", "b", "c"]


def test_conflict_markers_are_detected() -> None:
    body = "intro\n<<<<<<< ours\nmine\n=======\ntheirs\n>>>>>>> theirs\n"
    assert has_conflict_markers(body)
    assert parse_note("---\ntitle: t\n---\n" + body, "a.md").conflicted
    assert not has_conflict_markers("a line with ======= only\n")


def test_layout_is_readable_and_unique() -> None:
    one, two = new_id(), new_id()
    assert one != two and len(one) == 10
    assert note_relpath("semantic", "Fix: the DB pool!", one, "github.com/acme/api") == (
        f"projects/github.com-acme-api/facts/fix-the-db-pool-{one}.md"
    )
    assert note_relpath("preference", "Be brief", one, "github.com/acme/api").startswith(
        "global/preferences/"
    )
    assert note_relpath("episodic", "s", one, None).startswith("global/sessions/")
    assert slugify("Ünïcödé   title — here") == "unicode-title-here"
    assert slugify("!!!") == "note"


def test_fast_front_matter_agrees_with_yaml_or_declines() -> None:
    import random

    import yaml

    from anamnesis.base.notes import fast_front_matter

    rng = random.Random(5)
    atoms = [
        "abc",
        "It's",
        "'quoted'",
        "'it''s'",
        "a: b",
        "x #y",
        "#c",
        "true",
        "No",
        "null",
        "~",
        "12",
        "0x1f",
        "1.5",
        "2026-11-01",
        "2026-11-01 10:00:00",
        "'2026-11-01T00:00:00Z'",
        "[a, b]",
        "{a: 1}",
        "- x",
        "&anchor",
        "*ref",
        "!tag x",
        "|",
        ">",
        "ok value",
        "tab\there",
        "0123456789",
        "9bf7hx3tdy",
        " lead",
        "trail ",
        "é ü",
        "@at",
        "`tick`",
        "%pct",
        "a,b",
        "[]",
        "",
    ]
    agreed = 0
    for _ in range(3000):
        lines = []
        for key in rng.sample(["id", "title", "tags", "x", "project", "created"], rng.randint(1, 4)):
            if rng.random() < 0.3:
                lines.append(f"{key}:")
                lines.extend(f"- {rng.choice(atoms)}" for _ in range(rng.randint(0, 3)))
            else:
                lines.append(f"{key}: {rng.choice(atoms)}")
        text = "\n".join(lines)
        fast = fast_front_matter(text)
        if fast is None:
            continue
        assert fast == yaml.safe_load(text), text
        agreed += 1
    assert agreed > 300  # the fast path really is taken for plain notes


def test_hand_edits_with_a_bom_crlf_or_wrong_field_kinds_are_read_and_reported() -> None:
    bom = parse_note("\ufeff---\nid: bomaaaaaaa\ntitle: Bom note\n---\nbody\n", "global/facts/bom.md")
    assert (bom.id, bom.title, bom.problems) == ("bomaaaaaaa", "Bom note", [])
    crlf = parse_note("---\r\ntitle: Crlf note\r\ntags: [a, b]\r\n---\r\nbody\r\n", "a.md")
    assert (crlf.title, crlf.tags, crlf.problems) == ("Crlf note", ["a", "b"], [])
    odd = parse_note("---\ntitle: t\ntags: {a: 1}\nproject: [x, y]\n---\nb\n", "projects/acme/facts/t.md")
    assert odd.tags == []
    assert odd.project == "acme"
    assert any("tags" in p for p in odd.problems) and any("project" in p for p in odd.problems)


def test_a_field_written_twice_is_reported() -> None:
    note = parse_note("---\ntitle: first\ntype: semantic\ntitle: second\n---\nbody\n", "a.md")
    assert note.title == "second"
    assert any("title appears more than once" in p for p in note.problems)
    assert parse_note("---\ntitle: t\ntags:\n- a\n- a\n---\nb\n", "a.md").problems == []


def test_a_date_that_is_not_a_date_is_reported() -> None:
    note = parse_note("---\ntitle: t\ncreated: 2026-11-01\nupdated: 1700000000\n---\nb\n", "a.md")
    assert [p for p in note.problems if "not a date" in p] == ["updated 1700000000 is not a date (write it like 2026-11-26T09:14:03Z)"]
    assert parse_note("---\ntitle: t\nupdated: '2026-11-01T10:00:00Z'\n---\nb\n", "a.md").problems == []


@pytest.mark.parametrize(
    "front",
    [
        "created: 2026-02-30",  # the fast reader's path
        "title: 2026-02-31",
        "created: 2026-11-27 25:00:00",
        "created: 2026-02-30\ntags: [a, b]",  # YAML's own parser (flow list)
        "title: \"t\"\nupdated: 2026-13-01T10:00:00Z",
    ],
)
def test_a_date_that_no_calendar_has_is_read_as_text_and_reported_not_raised(front: str) -> None:
    note = parse_note(f"---\n{front}\n---\nbody\n", "global/facts/x.md")
    assert note.body.strip() == "body"
    assert note.problems or note.title == "2026-02-31", front
    assert front_matter_fields(front) is not None


def test_a_date_that_no_calendar_has_stops_no_command(run_cli: RunCli, store: Store) -> None:
    home = store.home
    assert run_cli("new", "Good note", "-t", "semantic", "--body", "kept").returncode == 0
    bad = home / "memory" / "global" / "facts" / "bad.md"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text("---\ntitle: 2026-02-31\ncreated: 2026-02-30\n---\nnothing else is wrong\n")
    for command in (["list"], ["search", "kept"], ["status"], ["reindex"], ["timeline"], ["tidy", "--print"], ["sync"]):
        result = run_cli(*command)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (command, result.stderr)
    assert "Good note" in run_cli("list").stdout
    doctor = run_cli("doctor")
    assert doctor.returncode != 0 and "bad.md" in doctor.stdout and "not a date" in doctor.stdout
