"""Projects as a whole: list, rename, merge, and aliases for a repository that moved, across two machines."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from fleet import Fleet, Machine, fleet  # noqa: F401
from test_hooks import run_hook

from anamnesis.base.notes import parse_note
from anamnesis.store.operations import create_note

OLD = "github.com/acme/api"
NEW = "gitlab.com/newco/api-server"


def _checkout(where: Path, url: str) -> Path:
    """A real git checkout whose origin is `url` (a work repo, not the memory)."""
    where.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(where)], check=True)
    subprocess.run(["git", "-C", str(where), "remote", "add", "origin", url], check=True)
    return where


def _session_start(machine: Machine, cwd: Path) -> str:
    payload = {"session_id": "s1", "cwd": str(cwd), "source": "startup", "hook_event_name": "SessionStart"}
    proc = run_hook(
        machine.home, "session-start", {**payload, "transcript_path": "/x"}, cwd=cwd, **_env(machine)
    )
    assert proc.returncode == 0, proc.stderr
    return (
        str(json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]) if proc.stdout.strip() else ""
    )


def _prompt(machine: Machine, cwd: Path, prompt: str, session: str) -> str:
    payload: dict[str, Any] = {"session_id": session, "cwd": str(cwd), "prompt": prompt}
    payload |= {"hook_event_name": "UserPromptSubmit", "transcript_path": "/x"}
    proc = run_hook(machine.home, "user-prompt-submit", payload, cwd=cwd, **_env(machine))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _env(machine: Machine) -> dict[str, str]:
    env = machine.env()
    return {k: env[k] for k in ("CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME")}


def _here(machine: Machine, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    from procs import run_anamnesis

    return run_anamnesis(args, machine.env(), cwd=cwd)


def _two_machines(fleet: Fleet) -> tuple[Machine, Machine]:
    hub = fleet.hub()
    return fleet.machine("a", {"hub": fleet.url(hub)}), fleet.machine("b", {"hub": fleet.url(hub)})


def test_a_repository_moved_and_renamed_keeps_its_notes_on_both_machines(
    fleet: Fleet, tmp_path: Path
) -> None:
    a, b = _two_machines(fleet)
    old_checkout = _checkout(tmp_path / "a-src" / "api", "git@github.com:acme/api.git")
    assert _here(a, old_checkout, "project").stdout.strip() == OLD
    made = _here(a, old_checkout, "new", "Deploys use blue green rollout", "--body", "Blue green rollout.")
    assert made.returncode == 0, made.stderr
    other = create_note(
        a.store,
        type="semantic",
        title="Blue green rollout checklist",
        project="github.com/else/web",
        body="Blue green rollout checklist: blue green rollout, rollout blue green, every time.",
    )
    assert a.sync().exit_code == 0 and b.sync().exit_code == 0

    # On b the repository was moved to another host and organisation, and renamed; b clones it over https.
    moved = _checkout(tmp_path / "b-src" / "api-server", "https://gitlab.com/newco/api-server.git")
    assert _here(b, moved, "project").stdout.strip() == NEW
    assert "Deploys use blue green rollout" not in _session_start(b, moved)
    asked = _prompt(b, moved, "how do we do the blue green rollout checklist", "p1")
    assert other.path in asked  # a project with no note of its own weighs every project's notes alike

    aliased = _here(b, moved, "project", "alias", "--here", OLD)
    assert aliased.returncode == 0, aliased.stderr
    assert "Deploys use blue green rollout" in _session_start(b, moved)
    asked = _prompt(b, moved, "how do we do the blue green rollout checklist", "p2")
    assert "Deploys use blue green rollout" in asked  # now this project's own note
    listed = json.loads(_here(b, moved, "list", "--here", "--json").stdout)
    assert [n["title"] for n in listed] == ["Deploys use blue green rollout"]
    assert b.sync().exit_code == 0

    # a learns the alias by sync; its checkout's remote changes to the new place, over ssh this time.
    assert a.sync().exit_code == 0
    subprocess.run(
        ["git", "-C", str(old_checkout), "remote", "set-url", "origin", "git@gitlab.com:newco/api-server"]
    )
    assert _here(a, old_checkout, "project").stdout.strip() == OLD
    assert "Deploys use blue green rollout" in _session_start(a, old_checkout)

    # the project list shows the remotes seen for it
    projects = {p["project"]: p for p in json.loads(a.cli("project", "list", "--json").stdout)}
    assert (
        projects[OLD]["notes"] == 1 and NEW in projects[OLD]["remotes"] and projects[OLD]["aliases"] == [NEW]
    )


def test_rename_moves_notes_links_and_supersessions_in_one_commit_that_syncs(
    fleet: Fleet, tmp_path: Path
) -> None:
    a, b = _two_machines(fleet)
    first = create_note(a.store, type="semantic", title="Pool size is 20", body="pool 20", project=OLD)
    second = create_note(
        a.store,
        type="semantic",
        title="Pool size is 40",
        body="pool 40, was 20",
        project=OLD,
        supersedes=[first.id],
    )
    stem = first.path.rsplit("/", 1)[1][:-3]
    linker = create_note(
        a.store,
        type="semantic",
        title="Index",
        body=f"see [[{first.path[:-3]}]] and [[{stem}]]",
        project="else/x",
    )
    assert a.sync().exit_code == 0 and b.sync().exit_code == 0
    commits = int(b.git("rev-list", "--count", "HEAD"))

    done = b.cli("project", "rename", OLD, NEW, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert int(b.git("rev-list", "--count", "HEAD")) == commits + 1 and b.git("status", "--porcelain") == ""
    moves = {m["from"]: m["to"] for m in report["moved"]}
    assert set(moves) == {first.path, second.path}
    assert all(p.startswith("projects/gitlab.com-newco-api-server/facts/") for p in moves.values())
    assert report["updated"] == [linker.path]
    text = b.read(linker.path)
    assert (
        f"[[{moves[first.path][:-3]}]]" in text and f"[[{stem}]]" in text
    )  # by path follows, by name still works
    for path in moves.values():
        assert parse_note(b.read(path), path).project == NEW
    assert b.sync().exit_code == 0 and a.sync().exit_code == 0
    assert a.tree() == b.tree()
    assert not (a.memory / first.path).exists() and (a.memory / moves[first.path]).exists()
    shown = json.loads(a.cli("search", "pool size", "--json").stdout)
    old_hit = next(h for h in shown if h["id"] == first.id)
    assert old_hit["superseded_by"] == [second.id]  # the supersession followed the move
    # a checkout still on the old remote finds the notes under the new key
    old_checkout = _checkout(tmp_path / "src" / "api", "https://github.com/acme/api.git")
    assert _here(a, old_checkout, "project").stdout.strip() == NEW
    assert "Pool size is 40" in _session_start(a, old_checkout)


def test_merge_joins_two_projects_and_rename_refuses_an_existing_key(fleet: Fleet) -> None:
    a = fleet.machine("a")
    create_note(a.store, type="semantic", title="Old fact", body="old", project="api-old")
    create_note(a.store, type="procedural", title="Release", body="tag", project=OLD)
    head = a.git("rev-parse", "HEAD")
    refused = a.cli("project", "rename", "api-old", OLD)
    assert refused.returncode == 2 and "project merge api-old" in refused.stderr
    assert a.git("rev-parse", "HEAD") == head and a.git("status", "--porcelain") == ""
    missing = a.cli("project", "rename", "nothing-here", "x/y")
    assert missing.returncode != 0 and "has no notes" in missing.stderr
    bad = a.cli("project", "rename", "api-old", "/abs/path")
    assert bad.returncode == 2 and "refused" in bad.stderr
    merged = a.cli("project", "merge", "api-old", OLD)
    assert merged.returncode == 0, merged.stderr
    listed = json.loads(a.cli("list", "-p", OLD, "--json").stdout)
    assert sorted(n["title"] for n in listed) == ["Old fact", "Release"]
    by_alias = json.loads(a.cli("list", "-p", "api-old", "--json").stdout)  # the old key is an alias now
    assert sorted(n["title"] for n in by_alias) == ["Old fact", "Release"]
    projects = {p["project"]: p for p in json.loads(a.cli("project", "list", "--json").stdout)}
    assert "api-old" not in projects and projects[OLD]["aliases"] == ["api-old"]
    unaliased = a.cli("project", "unalias", "api-old")
    assert unaliased.returncode == 0 and a.git("status", "--porcelain") == ""
    assert a.cli("project", "unalias", "api-old").returncode != 0


def test_an_alias_never_hides_a_projects_own_notes(fleet: Fleet) -> None:
    a = fleet.machine("a")
    create_note(a.store, type="semantic", title="Web fact", body="web", project="github.com/acme/web")
    create_note(a.store, type="semantic", title="Front fact", body="front", project="github.com/acme/frontend")
    create_note(a.store, type="semantic", title="Infra fact", body="infra", project="infra")
    head = a.git("rev-parse", "HEAD")
    # A key with notes of its own cannot become an alias: its checkouts would lose them.
    refused = a.cli("project", "alias", "github.com/acme/web", "github.com/acme/frontend")
    assert refused.returncode == 2 and "project merge github.com/acme/web" in refused.stderr, refused.stderr
    assert a.git("rev-parse", "HEAD") == head
    # Renamed, web becomes an alias of its new key; another project cannot then take that key over.
    assert a.cli("project", "rename", "github.com/acme/web", "github.com/acme/site").returncode == 0
    taken = a.cli("project", "rename", "infra", "github.com/acme/web")
    assert taken.returncode == 2 and "is an alias of github.com/acme/site" in taken.stderr, taken.stderr
    aliases = {p["project"]: p["aliases"] for p in json.loads(a.cli("project", "list", "--json").stdout)}
    assert aliases["github.com/acme/site"] == ["github.com/acme/web"]
    by_old_key = a.cli("list", "-p", "github.com/acme/web", "--json")  # the old key finds the notes
    assert [n["title"] for n in json.loads(by_old_key.stdout)] == ["Web fact"]
    assert "is an alias of github.com/acme/site" in by_old_key.stderr
    # Renaming back onto the key's own alias is fine: the alias goes, the notes come back.
    assert a.cli("project", "rename", "github.com/acme/site", "github.com/acme/web").returncode == 0
    assert [n["title"] for n in json.loads(a.cli("list", "-p", "github.com/acme/web", "--json").stdout)] == ["Web fact"]


def test_archived_notes_move_with_their_project(fleet: Fleet) -> None:
    a = fleet.machine("a")
    create_note(a.store, type="semantic", title="Worker fact", body="w", project="gitlab.com/beta/worker")
    archived = a.memory / ".archive" / "projects" / "gitlab.com-beta-worker" / "sessions" / "old-session.md"
    archived.parent.mkdir(parents=True)
    archived.write_text("---\ntitle: Old session\ntype: episodic\nproject: gitlab.com/beta/worker\n---\nDone.\n")
    a.git("add", "-A")
    a.git("commit", "-q", "-m", "tidy: archive")
    assert a.cli("project", "rename", "gitlab.com/beta/worker", "infra").returncode == 0
    moved = a.memory / ".archive" / "projects" / "infra" / "sessions" / "old-session.md"
    assert not archived.exists() and moved.exists()
    assert parse_note(moved.read_text(), "projects/infra/sessions/old-session.md").project == "infra"
    assert a.git("status", "--porcelain") == ""


def test_project_list_shows_each_key_whole_and_only_remotes_other_than_the_key(
    run_cli: Any, home: Path
) -> None:
    assert run_cli("init", "--local-only").returncode == 0
    keys = ("github.com/kestrel-io/checkout-api", "gitlab.com/tidewater/observability")
    for key in keys:
        assert run_cli("new", f"Deploys of {key}", "--project", key, "--body", "x").returncode == 0
    listed = run_cli("project", "list", env={"COLUMNS": "100"})
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    for key in keys:
        (row,) = [line for line in lines if key in line]  # on one line, and once: not again as a remote
        assert row.split()[0] == key and row.rstrip().endswith("-"), row


def test_notes_written_under_a_key_renamed_meanwhile_are_named_by_doctor(fleet: Fleet) -> None:
    """Machine b writes under the old key before the rename reaches it: after sync the notes sit
    under a key that is now an alias, where checkouts never look. doctor says so, and how to fix."""
    a, b = _two_machines(fleet)
    create_note(a.store, type="semantic", title="On a", body="a", project="github.com/acme/api")
    a.sync()
    b.sync()
    create_note(b.store, type="semantic", title="Written on b", body="b wrote this", project="github.com/acme/api")
    assert a.cli("project", "rename", "github.com/acme/api", "github.com/acme/api-renamed").returncode == 0
    a.sync()
    b.sync()
    doctor = b.cli("doctor")
    assert doctor.returncode != 0
    text = " ".join(doctor.stdout.split())
    assert "filed under github.com/acme/api, which is now an alias of github.com/acme/api-renamed" in text, text
    assert "anamnesis project merge github.com/acme/api github.com/acme/api-renamed" in text
    assert b.cli("project", "merge", "github.com/acme/api", "github.com/acme/api-renamed").returncode == 0
    assert "now an alias" not in b.cli("doctor").stdout


def test_an_alias_never_takes_the_file_of_another_keys_alias(fleet: Fleet) -> None:
    a = fleet.machine("a")
    create_note(a.store, type="semantic", title="n", body="x", project="github.com/acme/my-api")
    create_note(a.store, type="semantic", title="m", body="y", project="github.com/other/proj")
    assert a.cli("project", "rename", "github.com/acme/my-api", "github.com/acme/api-v2").returncode == 0
    clash = a.cli("project", "alias", "github.com/acme-my/api", "github.com/other/proj")
    assert clash.returncode == 2 and "share the alias file" in clash.stderr, clash.stderr
    assert [n["title"] for n in json.loads(a.cli("list", "-p", "github.com/acme/my-api", "--json").stdout)] == ["n"]
