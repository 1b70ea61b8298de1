"""The CLI as a user runs it: its own `main` in-process (a real process where that matters), real store, real git."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli, cli_env
from mounts import without_root_powers

from anamnesis.base.paths import Store


def init(run_cli: RunCli) -> None:
    result = run_cli("init", "--local-only")
    assert result.returncode == 0, result.stderr


def test_help_lists_every_command(run_cli: RunCli) -> None:
    result = run_cli("--help", real_process=True)  # `python -m anamnesis` itself starts
    assert result.returncode == 0
    for command in (
        "init",
        "new",
        "search",
        "show",
        "list",
        "edit",
        "rm",
        "reindex",
        "status",
        "doctor",
        "project",
    ):
        assert command in result.stdout
    for command in ("new", "search", "show", "list", "edit", "rm", "reindex", "status", "doctor", "project"):
        assert "Examples" in run_cli(command, "--help").stdout, command


def test_init_is_idempotent_and_print_writes_nothing(run_cli: RunCli, home: Path) -> None:
    planned = run_cli("init", "--local-only", "--print", "--json")
    assert planned.returncode == 0
    assert "create store" in json.loads(planned.stdout)["planned"][0]
    assert not home.exists()
    init(run_cli)
    assert (home / "memory" / ".git").is_dir()
    assert stat.S_IMODE((home / "settings.json").stat().st_mode) == 0o600
    settings = json.loads((home / "settings.json").read_text())
    head = subprocess.run(
        ["git", "-C", str(home / "memory"), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    again = run_cli("init", "--local-only", "--json")
    assert again.returncode == 0
    assert json.loads((home / "settings.json").read_text()) == settings
    head2 = subprocess.run(
        ["git", "-C", str(home / "memory"), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    assert head.stdout == head2.stdout


def test_new_search_show_list_rm_round_trip(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    init(run_cli)
    made = run_cli(
        "new",
        "Pool sizing",
        "-t",
        "semantic",
        "-p",
        "github.com/acme/api",
        "-g",
        "postgres,perf",
        "--body",
        "Set pg_bouncer.pool_size to 20 for the api.",
        "--json",
    )
    assert made.returncode == 0, made.stderr
    note = json.loads(made.stdout)
    assert note["project"] == "github.com/acme/api" and note["tags"] == ["postgres", "perf"]
    piped = run_cli(
        "new", "Lint first", "-t", "procedural", "--global", input="Run make lint before pushing.\n"
    )
    assert piped.returncode == 0, piped.stderr

    hits = json.loads(run_cli("search", "pg_bouncer.pool_size", "--json").stdout)
    assert [h["id"] for h in hits] == [note["id"]]
    assert "**pg_bouncer.pool_size**" in hits[0]["snippet"]
    assert (
        json.loads(run_cli("search", "lint", "--type", "procedural", "--json").stdout)[0]["title"]
        == "Lint first"
    )
    assert json.loads(run_cli("search", "lint", "--project", "github.com/acme/api", "--json").stdout) == []

    shown = run_cli("show", note["id"][:6])
    assert shown.returncode == 0 and "pool_size to 20" in shown.stdout and shown.stdout.startswith("---")
    assert json.loads(run_cli("show", note["id"], "--json").stdout)["title"] == "Pool sizing"

    listed = json.loads(run_cli("list", "--json").stdout)
    assert {n["title"] for n in listed} == {"Pool sizing", "Lint first"}
    assert len(json.loads(run_cli("list", "--tag", "perf", "--json").stdout)) == 1

    removed = run_cli("rm", note["id"], "--json")
    assert removed.returncode == 0, removed.stderr
    assert not (home / "memory" / note["path"]).exists()
    assert json.loads(run_cli("search", "pool_size", "--json").stdout) == []
    log = subprocess.run(
        ["git", "-C", str(home / "memory"), "log", "--format=%s"], capture_output=True, text=True
    ).stdout
    assert "delete" in log and "new semantic note" in log


def test_new_from_editor_uses_template(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    init(run_cli)
    editor = tmp_path / "fake-editor.py"
    editor.write_text(
        "import sys\np = sys.argv[1]\nseed = open(p).read()\n"
        "open(p, 'w').write(seed + '\\nwritten in the editor edword\\n')\n"
    )
    env = {"EDITOR": f"{sys.executable} {editor}"}
    made = run_cli("new", "From editor", "-t", "procedural", "--json", env=env)
    assert made.returncode == 0, made.stderr
    text = (home / "memory" / json.loads(made.stdout)["path"]).read_text()
    assert "edword" in text and "## Steps" in text  # seeded from templates/note-procedural.md
    for bad_env, words in (({"EDITOR": "", "VISUAL": ""}, "no terminal"), ({"EDITOR": '"unclosed'}, "$EDITOR")):
        refused = run_cli("new", "No editor", env=bad_env, timeout=30)  # vi without a terminal would hang
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
    untouched = run_cli("new", "Quit at once", env={"EDITOR": "true"})
    assert untouched.returncode == 2 and "empty body" in untouched.stderr
    assert not list((home / "memory").rglob("quit-at-once-*.md"))


def test_edit_reindexes_and_commits(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    init(run_cli)
    note = json.loads(run_cli("new", "Editable", "--body", "oldword", "--json").stdout)
    editor = tmp_path / "ed.py"
    editor.write_text(
        "import sys\np=sys.argv[1]\nt=open(p).read()\nopen(p,'w').write(t.replace('oldword','newword'))\n"
    )
    result = run_cli("edit", note["id"], env={"EDITOR": f"{sys.executable} {editor}"})
    assert result.returncode == 0, result.stderr
    assert json.loads(run_cli("search", "newword", "--json").stdout)[0]["id"] == note["id"]
    assert json.loads(run_cli("search", "oldword", "--json").stdout) == []
    status = subprocess.run(
        ["git", "-C", str(home / "memory"), "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    assert status == ""
    shown = json.loads(run_cli("show", note["id"], "--json").stdout)
    assert shown["updated"] >= note["updated"]


def test_a_hand_edit_in_crlf_with_a_bom_is_stamped_and_keeps_its_line_endings(store: Store) -> None:
    from anamnesis.cli.notes import record_hand_edit

    relpath = "global/facts/windows-aaaaaaaaaa.md"
    path = store.memory / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xef\xbb\xbf---\r\ntitle: Win\r\nupdated: '2000-01-01T00:00:00Z'\r\n---\r\nbody\r\n")
    record_hand_edit(store, relpath)
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf---\r\n")
    assert b"2000-01-01" not in data
    assert data.count(b"\n") == data.count(b"\r\n")


def test_errors_are_one_line_with_nonzero_exit(run_cli: RunCli, home: Path) -> None:
    missing = run_cli("search", "x", real_process=True)  # the exit code and the one line as a shell sees them
    assert missing.returncode == 3 and "anamnesis init" in missing.stderr
    assert missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr
    init(run_cli)
    for args, code in (
        (("show", "nope-nothing"), 4),
        (("new", "T", "-t", "diary", "--body", "x"), 2),
        (("new", "T", "--body", "   "), 2),
        (("show", "../../etc/passwd"), 2),
        (("search", "x", "--since", "yesterday-ish"), 2),
        (("search", "x", "-t", "diary"), 2),
        (("list", "-t", "diary"), 2),
        (("hook", "bogus-event"), 2),
        (("capture", str(home / "settings.json")), 2),  # a file, but no transcript
        (("peers", "add", "p", "ext::sh -c touch% /tmp/x"), 2),  # would run a command on each sync
        (("peers", "add", "p", "ssh:///srv/memory.git"), 2),  # no host
        (("project", "lsit"), 2),  # a typo of a subcommand, not a folder
        (("new", "t" * 201, "--body", "x"), 2),  # was cut to 200 without a word
        (("new", "T", "-p", "acme/api", "--global", "--body", "x"), 2),
        (("schedule", "install", "--every", "100000000", "--print"), 2),  # three years between syncs
        (("import", "claude-md", "/nonexistent"), 2),  # a progress bar's blank line came first
    ):
        result = run_cli(*args)
        assert result.returncode == code, (args, result.stderr)
        assert result.stderr.startswith("anamnesis: error:") and result.stderr.count("\n") == 1, result.stderr
        assert "Traceback" not in result.stderr
    for args in (("search",), ("search", "x", "-n", "0"), ("nosuch",), ("list", "--bogus")):
        result = run_cli(*args)  # usage errors from the parser are one line too
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("anamnesis: error:") and result.stderr.count("\n") == 1, result.stderr
    assert run_cli("doctor").returncode == 0 and run_cli("--help").returncode == 0
    assert run_cli("peers", "list", "--json").stdout.strip() in ("[]", '{"peers": []}'), "a refused peer was saved"
    assert "project list" in run_cli("project", "lsit").stderr
    assert not list((home / "memory").rglob("t" * 60 + "*")), "a refused title was written"


def test_broken_settings_index_and_home_are_one_line_errors(run_cli: RunCli, home: Path, tmp_path: Path) -> None:
    def one_line(result: subprocess.CompletedProcess[str], code: int, words: str) -> None:
        assert result.returncode == code, result.stderr
        assert result.stderr.startswith("anamnesis: error:") and result.stderr.count("\n") == 1, result.stderr
        assert words in result.stderr

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    one_line(run_cli("init", "--local-only", home_dir=a_file), 1, "not a folder")
    one_line(run_cli("init", "--local-only", home_dir=a_file / "sub"), 1, "a-file is a file, not a folder")
    init(run_cli)
    settings = home / "settings.json"
    good = json.loads(settings.read_text())
    settings.write_text(json.dumps({**good, "peers": ["desk", "laptop"]}))
    one_line(run_cli("peers", "list"), 1, '"peers" must be a JSON object, not a list')
    one_line(run_cli("peers", "add", "hub", str(tmp_path)), 1, '"peers" must be a JSON object')
    doctor = run_cli("doctor", "--json")
    problems = [f["problem"] for f in json.loads(doctor.stdout)["findings"]]
    assert doctor.returncode == 1 and any('"peers" must be' in p for p in problems)
    settings.write_text(json.dumps({**good, "recall": {"budget": "lots"}}))
    one_line(run_cli("status"), 1, '"recall.budget" must be a number, not a string')
    settings.write_text(json.dumps({**good, "peers": {"b": {"url": None}}}))
    for command in (("peers", "list"), ("sync",), ("status",)):
        one_line(run_cli(*command), 1, 'peer "b" has no URL')
    # the bounds a typo or a script's arithmetic crosses: one line, exit 2, never a traceback
    settings.write_text(json.dumps(good))
    one_line(run_cli("list", "-n", "9223372036854775808"), 2, "--limit")
    one_line(run_cli("web", "--no-open", "--port", "70000"), 2, "--port")
    one_line(run_cli("watch", "--no-discovery", "--interval", "inf"), 2, "--interval must be between")
    settings.write_text(json.dumps(good))
    (home / "index.db").unlink()
    (home / "index.db").mkdir()
    one_line(run_cli("list"), 1, "index.db")


def test_json_results_have_the_same_keys_whatever_the_note(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    run_cli("new", "Clean note", "--body", "kiwi fruit", "-G")
    (home / "memory" / "global" / "facts" / "hand.md").write_text("---\ntitle: [broken\n---\n# Kiwi\n")
    found = json.loads(run_cli("search", "kiwi", "--json").stdout)
    listed = json.loads(run_cli("list", "--json").stdout)
    assert len(found) == 2 and len(listed) == 2
    assert {frozenset(r) for r in found} == {frozenset(found[0])}
    assert {"snippet", "score", "problems"} <= set(found[0])
    assert {frozenset(r) for r in listed} == {frozenset(listed[0])} and "problems" in listed[0]
    shown = [json.loads(run_cli("show", r["id"], "--json").stdout) for r in listed]
    assert all("problems" in s for s in shown)


def test_reindex_status_doctor(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    run_cli("new", "A note", "--body", "alpha")
    assert run_cli("doctor").returncode == 0
    (home / "memory" / "global" / "facts").mkdir(parents=True, exist_ok=True)
    (home / "memory" / "global" / "facts" / "bad.md").write_text("---\ntitle: [x\n---\nbody\n")
    (home / "memory" / "global" / "facts" / "what?.md").write_text("---\ntitle: q\n---\nbody\n")
    (home / "memory" / "global" / "facts" / "plain.md").write_text("# Plain\n\nbody\n")  # a note like any other
    os.chmod(home / "settings.json", 0o644)
    doctor = run_cli("doctor", "--json")
    assert doctor.returncode == 1
    found = {f["where"]: f["problem"] for f in json.loads(doctor.stdout)["findings"]}
    assert "not valid YAML" in found["global/facts/bad.md"]
    fixes = {f["where"]: f["fix"] for f in json.loads(doctor.stdout)["findings"]}
    assert "fix the front matter" in fixes["global/facts/bad.md"]  # not "add a front matter block"
    assert "Windows" in found["global/facts/what?.md"]
    assert not any("share the id" in p for p in found.values())
    assert "600" in found[str(home / "settings.json")]
    reindexed = run_cli("reindex", "--json")
    assert reindexed.returncode == 0
    assert json.loads(reindexed.stdout)["added"] == 4
    assert "global/facts/plain.md" not in found
    status = json.loads(run_cli("status", "--json").stdout)
    # bad.md, which doctor lists too; not plain.md, which doctor does not (it counted as one)
    assert status["notes"] == 4 and status["problems"] == 1 and status["memory"] == str(home / "memory")


def test_doctor_reports_a_note_file_copied_by_hand(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    made = json.loads(run_cli("new", "Original", "--body", "x", "-G", "--json").stdout)
    original = home / "memory" / made["path"]
    (original.parent / "original copy.md").write_text(original.read_text())
    doctor = run_cli("doctor", "--json")
    assert doctor.returncode == 1
    assert any(made["id"] in f["problem"] for f in json.loads(doctor.stdout)["findings"])


def test_status_counts_projects_without_the_global_notes(run_cli: RunCli) -> None:
    init(run_cli)
    run_cli("new", "Global one", "--body", "x", "-G")
    run_cli("new", "Project one", "--body", "x", "-p", "acme/api")
    lines = {line.split()[0]: line.split()[1] for line in run_cli("status").stdout.splitlines() if line.strip()}
    assert lines["projects"] == "1" and lines["notes"] == "2"


def test_brackets_in_notes_are_shown_literally_not_as_markup(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    facts = home / "memory" / "global" / "facts"
    facts.mkdir(parents=True, exist_ok=True)
    (facts / "[draft] x.md").write_text('---\ntitle: "[/b] t"\nproject: "[/red]"\n---\nmarkupword [/x]\n')
    found = run_cli("search", "markupword")
    assert found.returncode == 0, found.stderr
    assert "[/b] t" in found.stdout and "[/red]" in found.stdout and "[draft] x.md" in found.stdout
    listed = run_cli("list")
    assert listed.returncode == 0 and "[/red]" in listed.stdout, listed.stderr
    (facts / "[draft] y.md").write_text("---\ntitle: [oops\n---\nx\n")
    assert "[draft] y.md" in run_cli("doctor").stdout


def test_project_command(run_cli: RunCli, tmp_path: Path) -> None:
    repo = tmp_path / "checkout"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:Acme/Api.git"], check=True
    )
    assert run_cli("project", cwd=repo).stdout.strip() == "github.com/acme/api"
    assert json.loads(run_cli("project", str(repo), "--json").stdout)["project"] == "github.com/acme/api"
    (repo / "README.md").write_text("x")
    assert run_cli("project", str(repo / "README.md")).stdout.strip() == "github.com/acme/api"
    missing = run_cli("project", str(tmp_path / "no-such-folder"))
    assert missing.returncode == 2 and "no such folder" in missing.stderr and missing.stdout == ""
    # Outside any project the folder's name stands in, and it says where notes written from there go.
    plain = tmp_path / "Plain"
    plain.mkdir()
    outside = run_cli("project", str(plain))
    assert outside.returncode == 0 and outside.stdout.strip() == "plain"
    assert "file notes as global" in outside.stderr and "'plain'" in outside.stderr, outside.stderr
    assert json.loads(run_cli("project", str(plain), "--json").stdout)["in_a_project"] is False
    assert json.loads(run_cli("project", str(repo), "--json").stdout)["in_a_project"] is True
    assert run_cli("project", cwd=repo).stderr == ""


def test_here_outside_any_project_is_an_error_not_every_note(run_cli: RunCli, tmp_path: Path) -> None:
    init(run_cli)
    plain = tmp_path / "plain-folder"
    plain.mkdir()
    assert run_cli("new", "Made here", "--body", "x", cwd=plain).returncode == 0  # filed as global
    for args in (("list", "--here"), ("search", "x", "--here")):
        result = run_cli(*args, cwd=plain)
        assert result.returncode == 2 and "no project" in result.stderr, result.stderr


def test_doctor_reports_a_stale_git_lock_and_a_save_clears_it(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    lock = home / "memory" / ".git" / "index.lock"
    lock.write_text("")  # what a git killed mid-write leaves
    doctor = run_cli("doctor", "--json")
    assert doctor.returncode == 1
    assert any("index.lock" in f["where"] for f in json.loads(doctor.stdout)["findings"])
    made = run_cli("new", "After a crash", "--global", "--body", "writes still work")
    assert made.returncode == 0, made.stderr
    assert not lock.exists()
    assert run_cli("doctor").returncode == 0


def test_doctor_explains_a_rebase_left_by_hand(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    (home / "memory" / ".git" / "rebase-merge").mkdir()
    doctor = run_cli("doctor", "--json")
    assert doctor.returncode == 1
    problems = " ".join(f["problem"] for f in json.loads(doctor.stdout)["findings"])
    assert "rebase --abort" in problems


def test_the_in_process_runner_gives_what_a_real_process_gives(run_cli: RunCli, home: Path) -> None:
    """Most CLI tests run `main` in-process (tests/procs.py): it must give the same exit codes and
    the same text on stdout and stderr as `python -m anamnesis`, or those tests prove nothing."""

    def same(*args: str) -> None:
        inside, real = run_cli(*args), run_cli(*args, real_process=True)
        assert (inside.returncode, inside.stdout, inside.stderr) == (real.returncode, real.stdout, real.stderr), args

    same("search", "x")  # no store yet: exit 3
    same("nosuch")  # a usage error from the parser: exit 2
    same("--version")
    init(run_cli)
    made = run_cli("new", "Runner check", "-G", "--body", "same either way", "--json")
    assert made.returncode == 0, made.stderr
    note_id = json.loads(made.stdout)["id"]
    for args in (
        ("list", "--json"),
        ("show", note_id),
        ("show", "nope-nothing"),  # exit 4
        ("search", "either", "--json"),
        ("new", "T", "-t", "diary", "--body", "x"),  # a bad type: exit 2, nothing written
        ("status", "--json"),
    ):
        same(*args)


def _blocked_signals(tid: int) -> set[int]:
    """The signals a thread of this process blocks (its SigBlk mask in /proc)."""
    for line in Path(f"/proc/self/task/{tid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            mask = int(line.split()[1], 16)
            return {number for number in range(1, 65) if mask >> (number - 1) & 1}
    raise AssertionError(f"no SigBlk line for thread {tid}")


def test_a_progress_bars_thread_leaves_ctrl_c_to_the_main_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel gives a process's SIGINT to any thread not blocking it; taken by the bar's refresh
    thread, it would not interrupt a main thread waiting on a FIFO or a hung mount (an import
    ignored Ctrl-C that way). The bar's thread blocks the stop signals; the main thread does not."""
    import signal
    import threading

    from anamnesis.cli._common import counting

    monkeypatch.setenv("FORCE_COLOR", "1")  # stderr taken as a terminal: off one, no bar is drawn

    main = threading.get_native_id()
    stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    before = set(Path("/proc/self/task").iterdir())
    with counting("testing") as progress:
        progress(1, 2)
        helpers = [int(t.name) for t in set(Path("/proc/self/task").iterdir()) - before]
        assert helpers, "the bar started no thread: nothing to check"
        for tid in helpers:
            assert stops <= _blocked_signals(tid), tid
        assert not stops & _blocked_signals(main)
    assert not stops & _blocked_signals(main)


def _new_into_a_read_only(folder: Path, home: Path) -> None:
    """`anamnesis new` (root's powers dropped) while `folder` of the store cannot be written: one
    line naming the folder and the fix, and nothing written."""
    folder.chmod(0o555)
    try:
        ran = subprocess.run(
            without_root_powers([sys.executable, "-m", "anamnesis", "new", "Second", "-G", "--body", "more"]),
            capture_output=True, text=True, env=cli_env(home), timeout=60,
        )
    finally:
        folder.chmod(0o755)
    assert ran.returncode != 0 and ran.stderr.count("\n") == 1, (ran.returncode, ran.stderr)
    assert f"{folder} cannot be written" in ran.stderr and f"chmod u+w {folder}" in ran.stderr, ran.stderr
    assert "nothing was written" in ran.stderr


def test_a_note_folder_that_cannot_be_written_is_named_with_its_fix(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    assert run_cli("new", "First", "-G", "--body", "words").returncode == 0
    facts = home / "memory" / "global" / "facts"
    before = sorted(p.name for p in facts.iterdir())
    _new_into_a_read_only(facts, home)
    assert sorted(p.name for p in facts.iterdir()) == before


def test_a_git_folder_that_cannot_be_written_is_named_with_its_fix_by_new(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    _new_into_a_read_only(home / "memory" / ".git" / "objects", home)
    assert run_cli("list", "--json").stdout.strip() == "[]"


def test_text_that_looks_like_an_emoji_code_prints_as_typed(run_cli: RunCli) -> None:
    # A title (or a path, or ssh's words: `host:abc: Name or service not known`) can hold
    # `:word:`; it must not come out as an emoji.
    init(run_cli)
    title = "Port syntax host:abc: explained :fire:"
    assert run_cli("new", title, "-t", "semantic", "--body", "x").returncode == 0
    listed = run_cli("list")
    assert listed.returncode == 0, listed.stderr
    assert ":fire:" in listed.stdout and "host:abc:" in listed.stdout, listed.stdout
    assert "\U0001f525" not in listed.stdout and "\U0001f524" not in listed.stdout


def test_an_ambiguous_reference_counts_the_notes_it_does_not_list(run_cli: RunCli, home: Path) -> None:
    init(run_cli)
    for n in range(7):
        assert run_cli("new", "Same title", "--body", f"b{n}").returncode == 0
    shown = run_cli("show", "same-title")
    assert shown.returncode == 2 and "matches 7 notes" in shown.stderr and "and 2 more" in shown.stderr, shown.stderr


def test_supersedes_on_a_hand_written_note_without_front_matter_dates_it_from_its_file(
    run_cli: RunCli, home: Path
) -> None:
    init(run_cli)
    old = json.loads(run_cli("new", "Pool size is 20", "--body", "x", "--json").stdout)["id"]
    path = home / "memory" / "global" / "facts" / "plain.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("written by hand, no front matter\n", encoding="utf-8")
    os.utime(path, (1767323045, 1767323045))  # 2026-01-02T03:04:05Z
    assert run_cli("edit", "global/facts/plain.md", "--supersedes", old).returncode == 0
    text = path.read_text(encoding="utf-8")
    assert "created: '2026-01-02T03:04:05Z'" in text and f"supersedes: {old}" in text, text


def test_a_store_this_process_may_not_write_can_still_be_read(run_cli: RunCli, home: Path) -> None:
    """A read-only mount or another user's store: status, search, show and list answer from an index
    kept in memory; writing still says why it cannot."""
    init(run_cli)
    assert run_cli("new", "Pool size is forty", "-G", "--body", "raised for the sale").returncode == 0
    modes = {path: path.stat().st_mode for path in [home, *home.rglob("*")] if not path.is_symlink()}
    for path in modes:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                without_root_powers([sys.executable, "-m", "anamnesis", *args]),
                capture_output=True, text=True, env=cli_env(home), timeout=60,
            )

        found = run("search", "pool size", "--json")
        assert found.returncode == 0 and "Pool size is forty" in found.stdout, found.stderr
        assert run("show", "pool-size-is-forty").returncode == 0
        assert "Pool size is forty" in run("list").stdout
        status = run("status", "--json")
        assert status.returncode == 0 and json.loads(status.stdout)["index_in_memory"] is True, status.stderr
        refused = run("new", "More", "-G", "--body", "x")
        assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


def test_every_command_and_group_shows_examples_in_its_help() -> None:
    """`--help` teaches by example: every command, subcommand and group, not only the common ones."""
    import typer.main

    from anamnesis.cli import app

    def walk(command: Any, path: str) -> list[tuple[str, Any]]:  # typer's own click: a group has `commands`
        found = [(path, command)]
        for name, sub in getattr(command, "commands", {}).items():
            if not sub.hidden:
                found += walk(sub, f"{path} {name}")
        return found

    commands = walk(typer.main.get_command(app), "anamnesis")[1:]
    lacking = [path for path, command in commands if "Examples" not in (command.help or "")]
    assert len(commands) > 40 and lacking == [], lacking


def test_what_was_typed_for_a_new_note_is_kept_when_the_note_cannot_be_written(
    run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    """The store became unwritable while the editor was open (here: a rebase left behind; a sync
    holding the store for a minute does the same): the error names the copy of the text."""
    init(run_cli)
    editor = tmp_path / "ed.py"
    editor.write_text(
        "import os, sys\n"
        f"os.makedirs({str(home / 'memory' / '.git' / 'rebase-merge')!r}, exist_ok=True)\n"
        "open(sys.argv[1], 'a').write('\\nten minutes of typing: quokka\\n')\n"
    )
    made = run_cli("new", "Typed", env={"EDITOR": f"{sys.executable} {editor}"})
    assert made.returncode == 12, made.stderr
    kept = Path(made.stderr.rsplit("your text is kept in ", 1)[1].strip())
    assert "quokka" in kept.read_text(encoding="utf-8")
