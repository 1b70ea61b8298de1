"""`supersedes`: a note saying which older notes it replaces — the field, the CLI, MCP and doctor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli
from mcp.client.session import ClientSession
from test_mcp import Call, _data, _drive, _error

from anamnesis.base.notes import Note, as_ids, parse_note, render_note
from anamnesis.base.paths import Store


def _note(text: str, path: str = "global/facts/new-note-aaaaaaaaaa.md") -> Note:
    return parse_note(text, path)


def _fm(supersedes: str) -> str:
    return f"---\nid: aaaaaaaaaa\ntype: semantic\ntitle: New\n{supersedes}\n---\nbody\n"


# -- the field ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("supersedes: 7k2m9q4x1c", ["7k2m9q4x1c"]),
        ("supersedes: '7k2m9q4x1c'", ["7k2m9q4x1c"]),
        ("supersedes:\n- 7k2m9q4x1c\n- 3hx8a0w2pd", ["7k2m9q4x1c", "3hx8a0w2pd"]),
        ("supersedes: [7k2m9q4x1c, 3hx8a0w2pd, 7k2m9q4x1c]", ["7k2m9q4x1c", "3hx8a0w2pd"]),
        ("supersedes: 7k2m9q4x1c, 3hx8a0w2pd", ["7k2m9q4x1c", "3hx8a0w2pd"]),
        ("supersedes: '7k2m9q4x1c,3hx8a0w2pd'", ["7k2m9q4x1c", "3hx8a0w2pd"]),
        ("supersedes: 1234567890", ["1234567890"]),  # YAML reads it as a number
        ("supersedes:", []),
        ("supersedes: []", []),
        ("supersedes: ''", []),
    ],
)
def test_supersedes_is_read_in_every_spelling(line: str, expected: list[str]) -> None:
    note = _note(_fm(line))
    assert note.supersedes == expected
    assert note.problems == []
    assert "supersedes" not in note.extra


@pytest.mark.parametrize(
    "line",
    [
        "supersedes: {id: 7k2m9q4x1c}",
        "supersedes: true",
        "supersedes: 1.5",
        "supersedes:\n- [a, b]",
    ],
)
def test_a_malformed_supersedes_is_a_problem_not_a_failure(line: str) -> None:
    note = _note(_fm(line))
    assert note.supersedes == []
    assert any("supersedes" in p and "not a note id" in p for p in note.problems), note.problems
    assert note.title == "New" and note.body == "body\n"


def test_good_ids_are_kept_beside_bad_items() -> None:
    note = _note(_fm("supersedes:\n- 7k2m9q4x1c\n- {x: 1}"))
    assert note.supersedes == ["7k2m9q4x1c"]
    assert len(note.problems) == 1


def test_a_note_superseding_itself_is_ignored_with_a_problem() -> None:
    note = _note(_fm("supersedes: [aaaaaaaaaa, 7k2m9q4x1c]"))
    assert note.supersedes == ["7k2m9q4x1c"]
    assert any("its own id" in p for p in note.problems)


def test_as_ids_directly() -> None:
    assert as_ids(None) == ([], [])
    assert as_ids(" a1, b2  c3 ") == (["a1", "b2", "c3"], [])
    ids, problems = as_ids(["ok12", None, "x" * 101])
    assert ids == ["ok12"] and len(problems) == 1


def test_written_back_as_a_scalar_for_one_id_and_a_list_for_several() -> None:
    one = _note(_fm("supersedes: [7k2m9q4x1c]"))
    text = render_note(one)
    assert "\nsupersedes: 7k2m9q4x1c\n" in text
    assert text.index("source:") < text.index("supersedes:")
    two = _note(_fm("supersedes: 7k2m9q4x1c, 3hx8a0w2pd"))
    assert "\nsupersedes:\n- 7k2m9q4x1c\n- 3hx8a0w2pd\n" in render_note(two)
    none = _note(_fm("supersedes: []"))
    assert "supersedes" not in render_note(none)
    assert parse_note(render_note(two), two.path).supersedes == two.supersedes
    assert two.to_dict()["supersedes"] == ["7k2m9q4x1c", "3hx8a0w2pd"]
    assert one.to_dict()["supersedes"] == ["7k2m9q4x1c"]  # always a list in JSON
    assert none.to_dict()["supersedes"] == []


# -- the CLI ---------------------------------------------------------------------------


def _init(run_cli: RunCli) -> None:
    assert run_cli("init", "--local-only").returncode == 0


def _new(run_cli: RunCli, title: str, *args: str) -> dict[str, Any]:
    result = run_cli("new", title, "-G", "--body", f"About {title}.", "--json", *args)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def _log(home: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(home / "memory"), "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def _files(home: Path) -> set[str]:
    return {p.relative_to(home / "memory").as_posix() for p in (home / "memory").rglob("*.md")}


def test_new_supersedes_writes_the_resolved_id(run_cli: RunCli, home: Path) -> None:
    _init(run_cli)
    old = _new(run_cli, "Pool size is 20")
    other = _new(run_cli, "Pool timeout is 5s")
    stem = Path(other["path"]).stem  # a file name resolves too
    new = _new(run_cli, "Pool size is 40", "--supersedes", old["id"][:5], "--supersedes", stem)
    assert new["supersedes"] == [old["id"], other["id"]]
    text = (home / "memory" / new["path"]).read_text()
    assert f"supersedes:\n- {old['id']}\n- {other['id']}\n" in text
    shown = json.loads(run_cli("show", new["id"], "--json").stdout)
    assert shown["supersedes"] == [old["id"], other["id"]]
    single = _new(run_cli, "Pool size is 60", "--supersedes", new["path"])
    assert f"\nsupersedes: {new['id']}\n" in (home / "memory" / single["path"]).read_text()
    assert run_cli("doctor").returncode == 0


@pytest.mark.parametrize("bad", ["no-such-note", "zzzzzzz"])
def test_new_with_a_bad_ref_writes_nothing(run_cli: RunCli, home: Path, bad: str) -> None:
    _init(run_cli)
    _new(run_cli, "Pool size is 20")
    files, log = _files(home), _log(home)
    result = run_cli("new", "Pool size is 40", "-G", "--body", "x", "--supersedes", bad)
    assert result.returncode == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("anamnesis: error:") and bad in lines[0]
    assert _files(home) == files and _log(home) == log


def test_new_with_an_ambiguous_ref_writes_nothing(run_cli: RunCli, home: Path) -> None:
    _init(run_cli)
    _new(run_cli, "Pool size is 20")
    _new(run_cli, "Pool size was 10")
    files, log = _files(home), _log(home)
    result = run_cli("new", "Pool size is 40", "-G", "--body", "x", "--supersedes", "pool-size")
    assert result.returncode == 2
    assert "matches 2 notes" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert _files(home) == files and _log(home) == log


def test_new_with_a_bad_ref_fails_before_the_editor(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    _init(run_cli)
    opened = tmp_path / "opened"
    editor = tmp_path / "ed.py"
    editor.write_text(f"open({str(opened)!r}, 'w').write('x')\n")
    result = run_cli(
        "new", "T", "-G", "--supersedes", "nothing-here", env={"EDITOR": f"{sys.executable} {editor}"}
    )
    assert result.returncode == 4 and not opened.exists()


def test_edit_adds_and_clears_links_without_an_editor(run_cli: RunCli, home: Path) -> None:
    _init(run_cli)
    old = _new(run_cli, "Pool size is 20")
    older = _new(run_cli, "Pool size is 10")
    new = _new(run_cli, "Pool size is 40")
    never = {"EDITOR": "false", "VISUAL": "false"}  # an editor that fails: it must not be run
    added = run_cli("edit", new["id"], "--supersedes", old["id"], env=never)
    assert added.returncode == 0, added.stderr
    assert old["id"] in added.stdout
    assert json.loads(run_cli("show", new["id"], "--json").stdout)["supersedes"] == [old["id"]]
    again = run_cli("edit", new["id"], "--supersedes", older["path"], "--supersedes", old["id"], env=never)
    assert again.returncode == 0, again.stderr
    assert json.loads(run_cli("show", new["id"], "--json").stdout)["supersedes"] == [old["id"], older["id"]]
    replaced = run_cli("edit", new["id"], "--no-supersedes", "--supersedes", older["id"], env=never)
    assert replaced.returncode == 0, replaced.stderr
    assert json.loads(run_cli("show", new["id"], "--json").stdout)["supersedes"] == [older["id"]]
    cleared = run_cli("edit", new["id"], "--no-supersedes", env=never)
    assert cleared.returncode == 0, cleared.stderr
    shown = json.loads(run_cli("show", new["id"], "--json").stdout)
    assert shown["supersedes"] == [] and shown["body"].strip() == "About Pool size is 40."
    assert "supersedes" not in (home / "memory" / new["path"]).read_text()
    log = _log(home)
    assert sum(f"update {new['path']}" in line for line in log) == 4
    status = subprocess.run(
        ["git", "-C", str(home / "memory"), "status", "--porcelain"], capture_output=True, text=True
    )
    assert status.stdout == ""


def test_edit_refuses_a_bad_ref_and_a_self_link(run_cli: RunCli, home: Path) -> None:
    _init(run_cli)
    new = _new(run_cli, "Pool size is 40")
    before, log = (home / "memory" / new["path"]).read_text(), _log(home)
    missing = run_cli("edit", new["id"], "--supersedes", "no-such-note")
    assert missing.returncode == 4 and "no-such-note" in missing.stderr
    itself = run_cli("edit", new["id"], "--supersedes", new["id"])
    assert itself.returncode == 2 and "itself" in itself.stderr
    assert (home / "memory" / new["path"]).read_text() == before and _log(home) == log


def test_edit_without_supersedes_still_opens_the_editor(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    _init(run_cli)
    note = _new(run_cli, "Editable")
    editor = tmp_path / "ed.py"
    editor.write_text("import sys\np=sys.argv[1]\nt=open(p).read()\nopen(p,'w').write(t + 'more\\n')\n")
    result = run_cli("edit", note["id"], env={"EDITOR": f"{sys.executable} {editor}"})
    assert result.returncode == 0, result.stderr
    assert "more" in (home / "memory" / note["path"]).read_text()


# -- MCP -------------------------------------------------------------------------------


def test_mcp_write_and_update_with_supersedes(store: Store, tmp_path: Path) -> None:
    async def script(session: ClientSession, call: Call) -> None:
        old = _data(await call("write", {"title": "Pool size is 20", "body": "20.", "global_note": True}))
        other = _data(await call("write", {"title": "Pool timeout", "body": "5s.", "global_note": True}))
        new = _data(
            await call(
                "write",
                {
                    "title": "Pool size is 40",
                    "body": "40.",
                    "global_note": True,
                    "supersedes": [old["written"]],
                },
            )
        )
        assert new["supersedes"] == [old["id"]]
        assert _data(await call("read", {"ref": new["id"]}))["supersedes"] == [old["id"]]

        updated = _data(await call("update", {"ref": new["id"], "supersedes": [old["id"], other["id"][:6]]}))
        assert updated["supersedes"] == [old["id"], other["id"]]
        read = _data(await call("read", {"ref": new["id"]}))
        assert read["supersedes"] == [old["id"], other["id"]] and read["body"].strip() == "40."
        cleared = _data(await call("update", {"ref": new["id"], "supersedes": []}))
        assert cleared["supersedes"] == []
        assert _data(await call("read", {"ref": new["id"]}))["supersedes"] == []

        status = _data(await call("status", {}))
        assert "no note matches" in _error(
            await call("write", {"title": "T", "body": "b", "global_note": True, "supersedes": ["nope-nope"]})
        )
        assert "nope-nope" in _error(await call("update", {"ref": new["id"], "supersedes": ["nope-nope"]}))
        assert "itself" in _error(await call("update", {"ref": new["id"], "supersedes": [new["id"]]}))
        assert "empty" in _error(await call("update", {"ref": new["id"], "supersedes": [" "]}))
        assert "at most" in _error(await call("update", {"ref": new["id"], "supersedes": ["x"] * 50}))
        assert _data(await call("status", {}))["notes"] == status["notes"]  # nothing was written
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "supersedes" in tools["write"].input_schema["properties"]
        assert "supersedes" in tools["update"].input_schema["properties"]

    _drive(store, tmp_path, script)
    status = subprocess.run(
        ["git", "-C", str(store.memory), "status", "--porcelain"], capture_output=True, text=True
    )
    assert status.stdout.strip() == ""


# -- doctor ----------------------------------------------------------------------------


def test_doctor_suggests_look_alike_notes_without_failing(run_cli: RunCli, home: Path) -> None:
    _init(run_cli)
    a = _new(run_cli, "Deploy the API with make release", "-t", "procedural")
    b = _new(run_cli, "How to deploy the API: make release", "-t", "procedural")
    _new(run_cli, "Deploy the API with make release", "-t", "semantic")  # another type: not a pair
    _new(run_cli, "Rotate the database credentials", "-t", "procedural")
    doctor = run_cli("doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout
    report = json.loads(doctor.stdout)
    assert report["ok"] is True and report["findings"] == []
    assert len(report["suggestions"]) == 1
    suggestion = report["suggestions"][0]
    assert a["path"] in suggestion["where"] and b["path"] in suggestion["where"]
    assert f"anamnesis edit {b['id']} --supersedes {a['id']}" in suggestion["fix"]
    text = run_cli("doctor")
    assert text.returncode == 0 and "no problems found" in text.stdout and "suggestions" in text.stdout

    assert run_cli("edit", b["id"], "--supersedes", a["id"]).returncode == 0
    linked = run_cli("doctor", "--json")
    assert linked.returncode == 0 and json.loads(linked.stdout)["suggestions"] == []


def test_doctor_leaves_out_pairs_linked_through_another_note(run_cli: RunCli) -> None:
    _init(run_cli)
    a = _new(run_cli, "Orders table partitioned by month")
    b = _new(run_cli, "Orders table partitioned by week", "--supersedes", a["id"])
    _new(run_cli, "Orders table partitioned by day", "--supersedes", b["id"])  # like a: 3 of 5 words
    report = json.loads(run_cli("doctor", "--json").stdout)
    assert report["suggestions"] == []


def test_doctor_reports_a_link_to_no_note(run_cli: RunCli, home: Path) -> None:
    _init(run_cli)
    old = _new(run_cli, "Pool size is 20")
    new = _new(run_cli, "Pool size is 40", "--supersedes", old["id"])
    assert run_cli("rm", old["id"], "-y").returncode == 0
    doctor = run_cli("doctor", "--json")
    assert doctor.returncode == 1
    findings = json.loads(doctor.stdout)["findings"]
    dangling = [f for f in findings if f["where"] == new["path"]]
    assert len(dangling) == 1 and old["id"] in dangling[0]["problem"]
    assert f"anamnesis edit {new['id']} --no-supersedes" in dangling[0]["fix"]
    assert run_cli("edit", new["id"], "--no-supersedes").returncode == 0
    assert run_cli("doctor").returncode == 0


def test_doctor_reports_a_malformed_or_self_supersedes(run_cli: RunCli, home: Path) -> None:
    _init(run_cli)
    facts = home / "memory" / "global" / "facts"
    facts.mkdir(parents=True)
    (facts / "odd-bbbbbbbbbb.md").write_text(_fm("supersedes: {id: x}").replace("aaaaaaaaaa", "bbbbbbbbbb"))
    (facts / "self-aaaaaaaaaa.md").write_text(_fm("supersedes: aaaaaaaaaa"))
    doctor = run_cli("doctor", "--json")
    assert doctor.returncode == 1
    found = {f["where"]: f for f in json.loads(doctor.stdout)["findings"]}
    assert "not a note id" in found["global/facts/odd-bbbbbbbbbb.md"]["problem"]
    assert "supersedes" in found["global/facts/odd-bbbbbbbbbb.md"]["fix"]
    assert "its own id" in found["global/facts/self-aaaaaaaaaa.md"]["problem"]


def test_similar_pairs_needs_most_words_in_common() -> None:
    from anamnesis.store.supersede import similar_pairs, title_words

    assert title_words("How to deploy the API: make_release") == {"deploy", "api", "make", "release"}
    items = [
        (("p", "semantic"), "Use pg_bouncer in transaction mode"),
        (("p", "semantic"), "Use PgBouncer transaction mode"),
        (("p", "semantic"), "Use pg_bouncer in session mode"),  # 4 of 6 words: a pair
        (("q", "semantic"), "Use pg_bouncer in transaction mode"),  # another project
        (("p", "semantic"), "The"),  # nothing but stop words
        (("p", "semantic"), "the"),
    ]
    pairs = {(i, j) for i, j, _ in similar_pairs(items)}
    assert pairs == {(0, 2)}
    assert similar_pairs(items, skip=lambda i, j: True) == []
