"""`anamnesis import`: CLAUDE.md files, Claude Code's auto-memory, markdown folders.

Real git, the real CLI as a subprocess, and Claude Code's own path rule taken
from the real Claude Code CLI's bundle (run in node). The anamnesis-memory
0.1.3 importer and the two-machine round trip are in test_import_e2e.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli

from anamnesis.base.notes import parse_note
from anamnesis.base.paths import Store
from anamnesis.importers.claude_auto_memory import memory_dir, sanitise
from anamnesis.importers.claude_md import imports_in, split_sections

TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"  # a fake GitHub token: capture redacts its shape


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout.strip()


def head(store: Store) -> str:
    return git(store.memory, "rev-parse", "HEAD")


def imported(store: Store) -> dict[str, Any]:
    """Every note an import made, by import key: {key: parsed note}."""
    out: dict[str, Any] = {}
    for path in store.memory.rglob("*.md"):
        rel = path.relative_to(store.memory).as_posix()
        note = parse_note(path.read_text(encoding="utf-8"), rel)
        if "import_key" in note.extra:
            out[note.extra["import_key"]] = note
    return out


def run_json(run_cli: RunCli, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = run_cli("import", *args, "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def make_project(folder: Path, remote: str = "git@github.com:Acme/API.git") -> Path:
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    git(folder, "remote", "add", "origin", remote)
    return folder


# -- claude-md ------------------------------------------------------------------------------


def test_sections_split_at_headings_outside_code_and_imports_outside_code() -> None:
    text = "intro line\n# Title\nabout\n```sh\n# not a heading @not/an/import.md\n```\n## Build\nmake\n### Deeper\nstays\n"
    sections = split_sections(text)
    assert [s.heading for s in sections] == [None, "Title", "Build"]
    assert "# not a heading" in sections[1].text and "### Deeper" in sections[2].text
    assert imports_in("See @docs/style.md and @~/shared/me.md, mail me@example.com, `@x/y.md`\n") == [
        "docs/style.md",
        "~/shared/me.md",
    ]


def test_claude_md_user_and_project_files_split_imported_once_redacted(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    config = tmp_path / "claude-config"  # CLAUDE_CONFIG_DIR of the `home` fixture
    config.mkdir()
    (config / "CLAUDE.md").write_text(
        "# Style\nAnswer in British English.\n\n# Tools\nUse uv, never pip. @shared.md\n", encoding="utf-8"
    )
    (config / "shared.md").write_text("## Shared rule\nKeep commits small. @CLAUDE.md @missing.md\n", encoding="utf-8")
    project = make_project(tmp_path / "work" / "api")
    (project / "CLAUDE.md").write_text(
        f"# API\nThe API service.\n\n## Testing\nRun `make test`; the CI token is {TOKEN}.\n\n"
        "## Testing\nA second section of the same name.\n",
        encoding="utf-8",
    )
    (project / "CLAUDE.local.md").write_text("## My sandbox\nThe sandbox database is on port 5433.\n", encoding="utf-8")

    before = head(store)
    plan = run_json(run_cli, "claude-md", "--print", cwd=project)
    assert plan["dry_run"] and plan["created"] == 7 and plan["commit"] is None
    assert head(store) == before and not imported(store)  # --print wrote nothing

    first = run_json(run_cli, "claude-md", cwd=project)
    assert first["created"] == 7 and first["updated"] == 0
    reasons = {s["origin"].rsplit(": ", 1)[-1]: s["reason"] for s in first["skipped"]}
    assert reasons == {"@missing.md": "imported file not found"}  # the loop back to CLAUDE.md is no error
    notes = imported(store)
    by_title = {n.title: n for n in notes.values()}
    assert by_title["Style"].type == "preference" and by_title["Style"].project is None
    assert by_title["Shared rule"].type == "preference"  # filed with the file that imported it
    assert by_title["Testing"].project == "github.com/acme/api" and by_title["Testing"].type == "semantic"
    assert by_title["My sandbox"].project == "github.com/acme/api"
    assert sum(1 for n in notes.values() if n.title == "Testing") == 2
    testing = next(n for n in notes.values() if "make test" in n.body)
    assert TOKEN not in (store.memory / testing.path).read_text() and "[REDACTED" in testing.body
    assert git(store.memory, "log", "-1", "--format=%s").endswith(f"import claude-md: 7 new, 0 updated notes from {plan['from']}")
    assert int(git(store.memory, "rev-list", "--count", f"{before}..HEAD")) == 1  # one commit

    again = run_json(run_cli, "claude-md", cwd=project)
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 7)
    assert again["commit"] is None and head(store) == git(store.memory, "rev-parse", "HEAD")

    sandbox = by_title["My sandbox"]
    (project / "CLAUDE.local.md").write_text("## My sandbox\nThe sandbox database moved to port 6543.\n", encoding="utf-8")
    changed = run_json(run_cli, "claude-md", cwd=project)
    assert (changed["created"], changed["updated"]) == (0, 1)
    after = imported(store)
    assert len(after) == 7
    moved = next(n for n in after.values() if n.title == "My sandbox")
    assert (moved.path, moved.id) == (sandbox.path, sandbox.id) and "6543" in moved.body
    assert git(store.memory, "status", "--porcelain") == ""


# -- claude-auto-memory ---------------------------------------------------------------------

MEMORIES = {
    "MEMORY.md": "- [User role](user_role.md) — who the user is\n- [Testing](feedback_testing.md) — how to test\n",
    "user_role.md": "---\nname: user-role\ndescription: The user is a data engineer who prefers terse answers\n"
    "metadata:\n  type: user\n---\n\nTerse answers, no summaries at the end.\n",
    "feedback_testing.md": "---\nname: feedback-testing\ndescription: Integration tests hit a real database\n"
    "metadata:\n  type: feedback\n---\n\nNever mock the database.\n**Why:** mocks hid a broken migration.\n"
    "**How to apply:** use the compose file. See [[project-deadline]].\n",
    "project_deadline.md": "---\nname: project-deadline\ndescription: Merge freeze starts on March 5\n"
    "type: project\n---\n\nMobile release branch is cut on March 5.\n",
    "team/reference_dash.md": "---\nname: reference-dash\ndescription: Latency dashboard\nmetadata:\n"
    "  type: reference\n---\n\nThe oncall latency dashboard is grafana/d/api-latency.\n",
    "broken.md": "---\nname: [unclosed\ndescription: x\n---\n\nbody\n",
}


def write_memories(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def test_auto_memory_folder_follows_claude_codes_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "cfg"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    project = make_project(tmp_path / "my.work" / "api_v2")
    (project / "src").mkdir()
    expected = config / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(project.resolve())) / "memory"
    assert memory_dir(project / "src") == expected  # named after the repo's top folder, not the subfolder
    worktree = tmp_path / "wt"
    git(project, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "--allow-empty", "-m", "one")
    git(project, "worktree", "add", "-q", str(worktree))
    assert memory_dir(worktree) == expected  # a worktree shares its main checkout's memory
    (config).mkdir(exist_ok=True)
    (config / "settings.json").write_text(json.dumps({"autoMemoryDirectory": "~/notes/claude-mem"}))
    assert memory_dir(project) == tmp_path / "userhome" / "notes" / "claude-mem"
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"autoMemoryDirectory": str(tmp_path / "local")}))
    assert memory_dir(project) == tmp_path / "local"  # the project's local setting wins over the user's


def _claude_sanitiser() -> str:
    """The JavaScript that names Claude Code's per-project folders, cut from the real CLI's bundle."""
    wanted = os.environ.get("ANAMNESIS_CLAUDE_BIN") or str(
        Path.home() / ".cache/anamnesis-test/claude/node_modules/.bin/claude"
    )
    binary = Path(wanted).resolve()
    node = shutil.which("node")
    if not binary.is_file() or node is None:
        message = f"the real Claude Code CLI ({wanted}) or node is missing; scripts/test installs them"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    data = binary.read_bytes()
    ident = rb"[A-Za-z0-9_$]+"
    main = re.search(
        rb"function (" + ident + rb")\(e\)\{let t=e\.replace\(/\[\^a-zA-Z0-9\]/g,\"-\"\);if\(t\.length<=(" + ident
        + rb")\)return t;return`\$\{t\.slice\(0," + ident + rb"\)\}-\$\{(" + ident + rb")\(e\)\}`\}",
        data,
    )
    assert main is not None, "the path sanitiser is no longer in the Claude Code bundle"
    limit = re.search(rb"[,; ]" + re.escape(main.group(2)) + rb"=(\d+)", data)
    suffix = re.search(rb"function " + re.escape(main.group(3)) + rb"\(e\)\{return ([^}]*)\}", data)
    assert limit is not None and suffix is not None
    hasher = re.search(rb"Math\.abs\((" + ident + rb")\(e\)\)", suffix.group(1))
    assert hasher is not None
    hash_fn = re.search(rb"function " + re.escape(hasher.group(1)) + rb"\(e\)\{[^}]*return t\}", data)
    assert hash_fn is not None
    return "\n".join(
        [
            f"const {main.group(2).decode()}={limit.group(1).decode()};",
            hash_fn.group(0).decode(),
            f"function {main.group(3).decode()}(e){{return {suffix.group(1).decode()}}}",
            main.group(0).decode(),
            f"const inputs=JSON.parse(require('fs').readFileSync(0,'utf8'));"
            f"console.log(JSON.stringify(inputs.map({main.group(1).decode()})));",
        ]
    )


def test_sanitised_names_match_the_real_claude_code_cli() -> None:
    script = _claude_sanitiser()
    inputs = [
        "/home/me/work/api",
        "/Users/me/My Projects/app.v2",
        "/srv/ünïcode/проект/🚀rocket",
        "/deep/" + "x" * 240,
        "/deep/" + "é😀" * 150,
    ]
    proc = subprocess.run(["node", "-e", script], input=json.dumps(inputs), capture_output=True, text=True, check=True)
    assert [sanitise(s) for s in inputs] == json.loads(proc.stdout)


def test_auto_memory_import_mirror_and_sync(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    project = make_project(tmp_path / "work" / "api")
    folder = tmp_path / "claude-config" / "projects" / sanitise(str(project.resolve())) / "memory"
    write_memories(folder, MEMORIES)

    first = run_json(run_cli, "claude-auto-memory", "--mirror", cwd=project)
    assert first["created"] == 4 and first["mirror"] is True
    skipped = {Path(s["origin"]).name: s["reason"] for s in first["skipped"]}
    assert set(skipped) == {"MEMORY.md", "broken.md"} and "YAML" in skipped["broken.md"]
    notes = {n.extra["claude_name"]: n for n in imported(store).values()}
    assert notes["user-role"].type == "preference" and notes["user-role"].project is None
    assert notes["feedback-testing"].type == "procedural"
    assert notes["feedback-testing"].project == "github.com/acme/api"
    assert notes["feedback-testing"].title == "Integration tests hit a real database"
    assert "[[project-deadline]]" in notes["feedback-testing"].body  # wikilinks kept as written
    assert notes["project-deadline"].type == "semantic" and "claude-auto-memory" in notes["project-deadline"].tags
    assert notes["reference-dash"].extra["claude_type"] == "reference"
    settings = json.loads(store.settings_path.read_text())
    assert settings["mirror"]["claude-auto-memory"] == [str(project)]

    again = run_json(run_cli, "claude-auto-memory", cwd=project)
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 4)

    # Claude Code edits one memory and writes a new one: the next sync imports both, before its commit.
    (folder / "feedback_testing.md").write_text(
        MEMORIES["feedback_testing.md"].replace("Never mock the database.", "Never mock the database or the queue."),
        encoding="utf-8",
    )
    write_memories(folder, {"project_owner.md": "---\nname: owner\ndescription: The billing team owns invoices\nmetadata:\n  type: project\n---\n\nAsk the billing team.\n"})
    before = head(store)
    proc = run_cli("sync", "--json")
    assert proc.returncode == 0, proc.stderr
    after = {n.extra["claude_name"]: n for n in imported(store).values()}
    assert len(after) == 5 and "or the queue" in after["feedback-testing"].body
    assert after["feedback-testing"].path == notes["feedback-testing"].path
    assert git(store.memory, "status", "--porcelain") == ""
    log = git(store.memory, "log", "--format=%s", f"{before}..HEAD")
    assert "import claude-auto-memory: 1 new, 1 updated notes" in log
    search = run_cli("search", "queue", "--json")
    assert after["feedback-testing"].path in search.stdout

    assert run_cli("sync").returncode == 0
    assert head(store) == git(store.memory, "rev-parse", "HEAD")  # nothing changed: no import commit

    off = run_json(run_cli, "claude-auto-memory", "--no-mirror", cwd=project)
    assert off["mirror"] is False
    assert json.loads(store.settings_path.read_text())["mirror"]["claude-auto-memory"] == []


def test_a_mirror_that_fails_never_fails_the_sync(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    settings = json.loads(store.settings_path.read_text())
    settings["mirror"] = {"claude-auto-memory": [str(tmp_path / "gone")]}
    store.settings_path.write_text(json.dumps(settings))
    proc = run_cli("sync", real_process=True)
    assert proc.returncode == 0, proc.stderr
    assert "mirroring claude-auto-memory" in proc.stderr and "gone" in proc.stderr


def test_a_mirrored_project_moved_away_is_a_doctor_finding_and_can_be_dropped(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    """A mirror whose project folder moved imports nothing and fails nothing: only doctor can
    tell, and `--no-mirror` on the old folder (gone, so nothing to import) forgets it."""
    project = tmp_path / "api"
    project.mkdir()
    on = run_json(run_cli, "claude-auto-memory", "--mirror", cwd=project)
    assert on["mirror"] is True
    assert "mirror of claude-auto-memory" not in run_cli("doctor").stdout
    project.rename(tmp_path / "api-renamed")
    doctor = run_cli("doctor", "--json")
    found = [f for f in json.loads(doctor.stdout)["findings"] if f["where"] == "mirror of claude-auto-memory"]
    assert len(found) == 1 and str(project) in found[0]["problem"] and "--no-mirror" in found[0]["fix"], found
    off = run_cli("import", "claude-auto-memory", "--no-mirror", str(project), "--json")
    assert off.returncode == 0, off.stderr
    assert json.loads(off.stdout) == {"mirror": False, "folder": str(project), "changed": True}
    assert json.loads(store.settings_path.read_text())["mirror"]["claude-auto-memory"] == []
    assert "mirror of claude-auto-memory" not in run_cli("doctor").stdout


# -- markdown -------------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def make_vault(root: Path) -> None:
    (root / ".obsidian").mkdir(parents=True)
    (root / ".obsidian" / "app.json").write_text("{}")
    (root / "attachments").mkdir()
    (root / "attachments" / "diagram.png").write_bytes(PNG)
    (root / "Deploys.md").write_text(
        "---\ntitle: How we deploy\ntags: [ops, deploy]\naliases: [shipping]\ncreated: 2024-03-01\n"
        "id: 42\n---\n\nBlue-green via [[Load balancer]]. ![[diagram.png]]\n",
        encoding="utf-8",
    )
    (root / "infra").mkdir()
    (root / "infra" / "Load balancer.md").write_text(
        "# Load balancer\n\nHAProxy drains in 30 s. Linked from [[Deploys]].\n", encoding="utf-8"
    )
    (root / "infra" / "Pinned.md").write_text(
        "---\nproject: github.com/acme/web\ntype: procedural\n---\n\nRestart the web tier with `make bounce`.\n",
        encoding="utf-8",
    )
    (root / "bad yaml.md").write_text("---\ntitle: [oops\n---\n\ntext\n", encoding="utf-8")
    (root / "latin1.md").write_bytes("caf\xe9 notes\n".encode("latin-1"))


def test_markdown_vault_front_matter_kept_attachments_reported(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    vault = tmp_path / "Vault"
    make_vault(vault)
    first = run_json(run_cli, "markdown", str(vault), "-p", "github.com/acme/api", "-g", "vault")
    assert first["created"] == 3
    skipped = {Path(s["origin"]).name: s["reason"] for s in first["skipped"]}
    assert set(skipped) == {"diagram.png", "bad yaml.md", "latin1.md"}
    assert "attachment" in skipped["diagram.png"] and "UTF-8" in skipped["latin1.md"]
    assert not list(store.memory.rglob("*.png"))  # attachments are not copied
    notes = {n.title: n for n in imported(store).values()}
    deploys = notes["How we deploy"]
    assert deploys.tags == ["ops", "deploy", "vault"] and deploys.project == "github.com/acme/api"
    assert deploys.extra["aliases"] == ["shipping"] and deploys.extra["source_id"] == 42
    assert deploys.created == "2024-03-01" and "[[Load balancer]]" in deploys.body
    assert notes["Load balancer"].project == "github.com/acme/api"
    pinned = next(n for n in notes.values() if n.type == "procedural")
    assert pinned.project == "github.com/acme/web"  # the note's own front matter wins over -p

    again = run_json(run_cli, "markdown", str(vault), "-p", "github.com/acme/api", "-g", "vault")
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 3)

    human = run_cli("import", "markdown", str(vault), "--print")
    assert human.returncode == 0
    assert "skipped" in human.stdout and "diagram.png" in human.stdout and "would import" in human.stdout


def test_bad_input_is_one_line_and_changes_nothing(store: Store, run_cli: RunCli, tmp_path: Path) -> None:
    before = head(store)
    for args, code, words in (
        (("nonsense",), 2, "unknown source 'nonsense'"),
        (("markdown", str(tmp_path / "missing")), 2, "is not a folder"),
        (("markdown",), 2, "give the folder"),
        (("markdown", str(store.memory)), 2, "is in this store"),
        (("anamnesis-memory", str(tmp_path)), 2, "holds no anamnesis-memory 0.1.3 store"),
        (("markdown", str(tmp_path), "-p", "/abs/path"), 2, "is a path, not a key"),
        (("claude-md", "--mirror"), 2, "--mirror works with claude-auto-memory only"),
        (("claude-auto-memory", "--mirror", "-p", "acme"), 2, "drop --project/--tag"),
    ):
        proc = run_cli("import", *args)
        assert proc.returncode == code, (args, proc.stderr)
        assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert head(store) == before


def test_watch_imports_a_mirrored_change_without_any_edit_in_memory(
    store: Store, tmp_path: Path
) -> None:
    import time

    from anamnesis.importers import set_mirror
    from anamnesis.sync.watch import Watcher, WatchOptions

    project = make_project(tmp_path / "work" / "api")
    folder = tmp_path / "claude-config" / "projects" / sanitise(str(project.resolve())) / "memory"
    write_memories(folder, {k: v for k, v in MEMORIES.items() if k != "broken.md"})
    set_mirror(store, "claude-auto-memory", project, True)
    syncs: list[str] = []

    def real_sync(reason: str) -> Any:
        from anamnesis.app import sync_store

        syncs.append(reason)
        return sync_store(store)  # the sync as the program runs it: with the mirrored sources' intake

    from anamnesis.app import with_intake

    opts = with_intake(WatchOptions(quiet=0.2, max_delay=5.0, interval=3600.0, discovery=False, beat=0.3, retry=0.3))
    watcher = Watcher(store, sync=real_sync, options=opts)
    watcher.start()
    try:
        deadline = time.monotonic() + 30
        while len(imported(store)) < 4 and time.monotonic() < deadline:  # the first sync imports them
            time.sleep(0.1)
        assert len(imported(store)) == 4
        write_memories(folder, {"project_owner.md": "---\nname: owner\ndescription: The billing team owns invoices\n---\n\nAsk the billing team.\n"})
        deadline = time.monotonic() + 30
        while len(imported(store)) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(imported(store)) == 5
        assert any("mirrored source changed" in reason for reason in syncs), syncs
        time.sleep(1.0)  # no sync loop: an unchanged source asks for no further sync
        count = len(syncs)
        time.sleep(1.5)
        assert len(syncs) == count
    finally:
        watcher.stop()
    assert git(store.memory, "status", "--porcelain") == ""
