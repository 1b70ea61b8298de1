"""Ranked search: natural-language queries, command lines, project-aware ranking, supersession."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from conftest import RunCli
from mcp.client.session import ClientSession
from test_mcp import Call, _data, _drive

from anamnesis.agents.inject import build_context
from anamnesis.base.paths import Store
from anamnesis.search.engine import search
from anamnesis.search.index import open_index
from anamnesis.search.query import parse_query
from anamnesis.store.operations import create_note

API = "github.com/acme/api"
WEB = "github.com/acme/web"


def ranked(store: Store, text: str, **options: Any) -> list[str]:
    with open_index(store) as index:
        index.refresh()
        return [hit.path for hit in search(index, text, **options)]


# -- the query parser ---------------------------------------------------------------------


def test_stop_words_are_never_required() -> None:
    query = parse_query("how do we rotate the staging certificates?")
    assert [t.text for t in query.terms] == ["rotate", "staging", "certificates"]
    assert parse_query("how to").terms  # only stop words: search for them rather than nothing


def test_flags_are_terms_not_exclusions() -> None:
    query = parse_query("docker run --rm -it")
    assert not query.excluded
    assert [t.text for t in query.terms] == ["docker", "run", "rm", "it"]
    assert query.command is not None and query.command.text == "docker run rm it"
    assert [t.text for t in parse_query("pip install --no-deps").terms] == ["pip", "install", "no deps"]
    assert not parse_query("ls -la").excluded and not parse_query("tar -xzvf x.tgz").excluded


def test_explicit_exclusion_and_phrases() -> None:
    assert [t.text for t in parse_query("redis NOT cluster").excluded] == ["cluster"]
    assert [t.text for t in parse_query("redis -cluster").excluded] == ["cluster"]
    quoted = parse_query('"connection pool" pg_bouncer.pool_size conf*')
    assert [(t.text, t.quoted, t.prefix) for t in quoted.terms] == [
        ("connection pool", True, False),
        ("pg bouncer pool size", False, True),  # a code word also finds its longer forms
        ("conf", False, True),
    ]


# -- ranking ------------------------------------------------------------------------------


def test_a_plain_question_finds_the_note(store: Store) -> None:
    note = create_note(
        store,
        type="procedural",
        title="Rotating staging TLS certificates",
        body="certbot renew on the staging load balancer, then reload nginx.",
        project=API,
    )
    create_note(store, type="semantic", title="Staging database", body="Postgres 16 on db1.internal.", project=API)
    assert ranked(store, "how do we rotate the staging certificates?")[0] == note.path


def test_a_command_line_finds_the_note_that_holds_it(store: Store) -> None:
    note = create_note(
        store,
        type="procedural",
        title="Throwaway shells",
        body="For a clean shell use `docker run --rm -it debian:12 bash`; nothing is kept.",
    )
    create_note(store, type="semantic", title="It runs", body="The docker daemon must run; rm the old image.")
    create_note(store, type="semantic", title="Docker", body="We use docker for it all. Run it daily.")
    assert ranked(store, "docker run --rm -it")[0] == note.path
    pip = create_note(store, type="procedural", title="Installing torch-free", body="pip install --no-deps mylib")
    assert ranked(store, "pip install --no-deps")[0] == pip.path


def test_notes_with_every_keyword_come_first(store: Store) -> None:
    both = create_note(store, type="semantic", title="Notes", body="The redis cache holds sessions.")
    for i in range(3):
        create_note(store, type="semantic", title=f"Redis {i}", body="redis redis redis tuning and more redis")
    assert ranked(store, "redis sessions")[0] == both.path
    assert ranked(store, "redis sessions", require_all=True) == [both.path]


def test_project_ranks_but_does_not_filter(store: Store) -> None:
    here = create_note(store, type="procedural", title="Deploy", body="Deploy with make deploy.", project=API)
    there = create_note(store, type="procedural", title="Deploy", body="Deploy with make deploy.", project=WEB)
    glob = create_note(store, type="semantic", title="Deploy freeze", body="No deploy on Fridays.")
    assert ranked(store, "deploy", near_project=API)[0] == here.path
    assert ranked(store, "deploy", near_project=WEB)[0] == there.path
    assert set(ranked(store, "deploy", near_project=API)) == {here.path, there.path, glob.path}
    assert ranked(store, "deploy", project=API) == [here.path]


def test_a_superseded_note_ranks_below_its_replacement_and_is_marked(store: Store, tmp_path: Path) -> None:
    old = create_note(
        store,
        type="semantic",
        title="Staging database host and port",
        body="The staging database host is db1.internal, port 5432, staging database.",
        project=API,
    )
    new = create_note(
        store,
        type="semantic",
        title="Staging DB moved",
        body="Moved to db2.internal.",
        project=API,
        supersedes=[old.id],
    )
    with open_index(store) as index:
        hits = search(index, "staging database host")
    assert [h.path for h in hits] == [new.path, old.path]
    assert hits[1].superseded_by == [new.id] and hits[0].supersedes == [old.id]
    repo = tmp_path / "api"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:acme/api.git"], check=True)
    text, shown = build_context(store, repo, budget=4000)
    assert new.path in shown and old.path not in shown and "db1.internal" not in text


def test_exclusion_is_a_hard_rule(store: Store) -> None:
    keep = create_note(store, type="semantic", title="Redis sentinel", body="redis sentinel setup")
    create_note(store, type="semantic", title="Redis cluster", body="redis cluster setup")
    assert ranked(store, "redis NOT cluster") == [keep.path]


def test_cli_search_json_ranks_a_question(run_cli: RunCli, tmp_path: Path) -> None:
    run_cli("init", "--local-only")
    run_cli("new", "Ephemeral Postgres in CI", "-t", "procedural", "--body", "docker run --rm -it postgres:16 per job")
    run_cli("new", "Frontend build", "--body", "vite build --mode production")
    found = json.loads(run_cli("search", "what do we run postgres with in CI?", "--json").stdout)
    assert found and found[0]["title"] == "Ephemeral Postgres in CI" and found[0]["superseded_by"] == []
    assert json.loads(run_cli("search", "docker run --rm -it", "--json").stdout)[0]["title"] == (
        "Ephemeral Postgres in CI"
    )


def test_mcp_search_answers_a_plain_question(store: Store, tmp_path: Path) -> None:
    note = create_note(
        store,
        type="procedural",
        title="Release the API",
        body="Tag vX.Y.Z, then `make publish` uploads the wheel.",
        project=API,
    )
    create_note(store, type="semantic", title="Release notes style", body="Keep a changelog.", project=WEB)

    async def script(session: ClientSession, call: Call) -> None:
        found = _data(await call("search", {"query": "how do I release a new version of the api?"}))
        assert found["count"] >= 1 and found["results"][0]["path"] == note.path

    _drive(store, tmp_path, script)


def test_the_replacement_comes_with_an_old_note_found_by_its_old_words(store: Store) -> None:
    old = create_note(
        store, type="procedural", title="OTA updates", body="appcenter codepush release-react ships JS fixes."
    )
    new = create_note(
        store, type="procedural", title="OTA updates now", body="eas update --branch production.", supersedes=[old.id]
    )
    assert ranked(store, "appcenter codepush release-react") == [new.path, old.path]


def test_abbreviations_find_the_long_form_and_back(store: Store) -> None:
    long_form = create_note(store, type="semantic", title="Kubernetes upgrades", body="The production cluster.")
    short_form = create_note(store, type="semantic", title="k8s notes", body="prod db lives in k8s.")
    assert set(ranked(store, "k8s production")[:2]) == {long_form.path, short_form.path}
    assert ranked(store, "kubernetes database")[0] == short_form.path


def test_a_code_word_as_written_ranks_above_its_longer_forms(store: Store) -> None:
    longer = [
        create_note(store, type="semantic", title="Proxy listens on port8080", body="The dev proxy uses port8080 for http."),
        create_note(store, type="semantic", title="Admin on port8000", body="port8000 serves the admin app."),
    ]
    exact = create_note(store, type="semantic", title="Legacy port80 redirect", body="The nginx port80 block redirects to https.")
    found = ranked(store, "port80")
    assert found[0] == exact.path and set(found[1:]) == {n.path for n in longer}, found
