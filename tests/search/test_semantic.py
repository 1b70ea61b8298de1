"""Semantic search with the real model: enable, embed, hybrid ranking, status, disable.

The model comes from the `model_dir` fixture (scripts/test-model into the test
cache), as `anamnesis semantic enable --model-dir` takes it on an air-gapped
machine. Nothing here reaches the model hub.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli
from test_embed import model_dir  # noqa: F401  (the session fixture: the real model folder)

from anamnesis.base.paths import Store
from anamnesis.search.engine import search
from anamnesis.search.index import open_index
from anamnesis.search.ranking import KeywordRanker
from anamnesis.search.semantic import SemanticError, engine_for, pending, update_vectors
from anamnesis.search.semantic import enable_semantic as enable
from anamnesis.search.semantic import semantic_status as status
from anamnesis.store.operations import create_note, update_note

PARAPHRASE = "who gets woken up when the site goes down at night"  # shares no word with its note
NOTES = [
    (
        "procedural",
        "Ephemeral Postgres in CI",
        "Every CI job gets its own short-lived PostgreSQL container: started before the suite, migrated,"
        " and destroyed afterwards, so no state leaks between runs.",
    ),
    (
        "semantic",
        "Frontend bundle size budget",
        "The web bundle must stay under 250 kB gzip; vite reports it.",
    ),
    ("procedural", "Rotating TLS certificates", "certbot renew on the load balancer, then reload nginx."),
    ("semantic", "Test naming", "Tests live in tests/ and are named after the module they check."),
    ("semantic", "Database backups", "Nightly pg_dump to object storage, kept 30 days."),
    (
        "semantic",
        "On-call rota",
        "The person on call is paged by PagerDuty when production alerts fire; hand-over is on Mondays.",
    ),
]


def _fill(store: Store) -> dict[str, str]:
    return {title: create_note(store, type=t, title=title, body=body).path for t, title, body in NOTES}


def test_hybrid_finds_a_paraphrase_that_keyword_search_misses(store: Store, model_dir: Path) -> None:
    paths = _fill(store)
    enable(store, model_dir)
    assert update_vectors(store) == len(NOTES)
    target = paths["On-call rota"]
    with open_index(store) as index:
        keyword = [h.path for h in search(index, PARAPHRASE, ranker=KeywordRanker())]
        hybrid = [h.path for h in search(index, PARAPHRASE)]
        exact = [h.path for h in search(index, "pg_dump")]
    assert target not in keyword[:1]
    assert hybrid[0] == target
    assert exact[0] == paths["Database backups"]  # meaning does not push out an exact code word


def test_a_code_word_the_model_reads_as_noise_still_finds_its_note_first(
    store: Store, model_dir: Path
) -> None:
    """`selfHeal` is no word the model knows: every note sits far from it, the ones about recovering
    from failures a little less far. Counting the least far as full meaning put those above the one
    note that holds the word; meaning is scaled to the closest note only when that is a real match."""
    _fill(store)
    for title, body in (
        (
            "Crashed workers recover on their own",
            "The supervisor restarts a worker that dies; no one is paged.",
        ),
        (
            "Liveness probes restart stuck pods",
            "A pod that stops answering /healthz is restarted by the kubelet.",
        ),
        ("Automatic failover of the primary", "Patroni promotes a replica when the primary is lost."),
    ):
        create_note(store, type="semantic", title=title, body=body)
    argo = create_note(
        store,
        type="procedural",
        title="Deploying ledger: GitOps through Argo CD",
        body="Merge to main, Argo CD syncs the ledger Application within three minutes; the"
        " Application sets syncPolicy.automated with prune and selfHeal, and image tags are"
        " bumped by the release pipeline in the deploy repository.",
    )
    enable(store, model_dir)
    update_vectors(store)
    with open_index(store) as index:
        hits = search(index, "selfHeal")
    assert hits[0].path == argo.path
    assert max(h.similarity or 0.0 for h in hits) < 0.3  # no note is close in meaning


def test_only_changed_notes_are_embedded_again_and_a_new_model_re_embeds(
    store: Store,
    model_dir: Path,
    tmp_path: Path,
) -> None:
    paths = _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    update_note(store, paths["Test naming"], body="Tests are named test_<module>.py.")
    engine = engine_for(store)
    assert engine is not None
    with open_index(store) as index:
        index.refresh()
        assert len(pending(index, engine.fingerprint)) == 1
    assert update_vectors(store) == 1
    other = _another_model(model_dir, tmp_path)
    enable(store, other)
    info = status(store)
    assert info["fingerprint"] != engine.fingerprint and info["pending"] == len(NOTES)


def test_a_missing_model_is_keyword_search_said_once(store: Store, model_dir: Path, tmp_path: Path) -> None:
    paths = _fill(store)
    with pytest.raises(SemanticError, match=r"model\.safetensors|missing|no model"):
        enable(store, tmp_path / "empty")
    moved = tmp_path / "moved"
    shutil.copytree(model_dir, moved)
    enable(store, moved)
    shutil.rmtree(moved)
    info = status(store)
    assert info["enabled"] and not info["active"] and "keyword search only" in info["reason"]
    assert engine_for(store) is None
    with open_index(store) as index:
        assert search(index, "certbot")[0].path == paths["Rotating TLS certificates"]


def test_cli_enable_status_search_reindex_disable(run_cli: RunCli, home: Path, model_dir: Path) -> None:
    run_cli("init", "--local-only")
    for kind, title, body in NOTES:
        run_cli("new", title, "-t", kind, "--body", body)
    enabled = json.loads(run_cli("semantic", "enable", "--model-dir", str(model_dir), "--json").stdout)
    assert enabled["enabled"] and enabled["embedded"] == len(NOTES)
    info = json.loads(run_cli("semantic", "status", "--json").stdout)
    assert (info["embedded"], info["pending"]) == (len(NOTES), 0)
    assert json.loads(run_cli("status", "--json").stdout)["semantic"]["active"] is True
    try:
        found = json.loads(run_cli("search", PARAPHRASE, "--json").stdout)
    finally:
        _stop_servers(home)  # the search started one for the searches after it (a test of its own)
    assert found[0]["title"] == "On-call rota"
    # notes written as files, then reindex: every vector is current when it returns
    extra = home / "memory" / "global" / "facts" / "hand-written.md"
    extra.parent.mkdir(parents=True, exist_ok=True)
    extra.write_text("---\ntitle: Cache warmup\ntype: semantic\n---\nPrime redis before traffic.\n")
    report = json.loads(run_cli("reindex", "--json").stdout)
    assert report["embedded"] >= 1
    assert json.loads(run_cli("semantic", "status", "--json").stdout)["pending"] == 0
    run_cli("semantic", "disable")
    assert "off" in run_cli("status").stdout
    assert json.loads(run_cli("semantic", "status", "--json").stdout)["active"] is False
    keyword = json.loads(run_cli("search", PARAPHRASE, "--json").stdout)
    assert not keyword or keyword[0]["title"] != "On-call rota"


def test_enable_refuses_a_folder_without_a_model(run_cli: RunCli, tmp_path: Path) -> None:
    run_cli("init", "--local-only")
    proc = run_cli("semantic", "enable", "--model-dir", str(tmp_path))
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and "anamnesis: error:" in proc.stderr
    assert json.loads(run_cli("semantic", "status", "--json").stdout)["enabled"] is False


def _when_embedded(run_cli: RunCli, within: float = 90) -> dict[str, Any]:
    """`semantic status --json` once no note waits for a vector (or `within` seconds have passed)."""
    deadline = time.monotonic() + within
    info: dict[str, Any] = json.loads(run_cli("semantic", "status", "--json").stdout)
    while info["pending"] and time.monotonic() < deadline:
        time.sleep(0.5)
        info = json.loads(run_cli("semantic", "status", "--json").stdout)
    return info


def _another_model(model_dir: Path, tmp_path: Path) -> Path:
    """A copy of the model with one byte of its weights changed: another model, as far as
    fingerprints go."""
    other = tmp_path / "other-model"
    shutil.copytree(model_dir, other)
    weights = other / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    return other


def test_new_notes_are_embedded_in_the_background(run_cli: RunCli, model_dir: Path) -> None:
    run_cli("init", "--local-only")
    run_cli("semantic", "enable", "--model-dir", str(model_dir))
    started = time.monotonic()
    proc = run_cli("new", "Ephemeral Postgres in CI", "-t", "procedural", "--body", NOTES[0][2])
    assert proc.returncode == 0 and time.monotonic() - started < 5  # `new` does not wait for the model
    info = _when_embedded(run_cli)
    assert (info["embedded"], info["pending"]) == (1, 0)


def test_prompt_recall_uses_meaning_and_stays_silent_off_topic(store: Store, model_dir: Path) -> None:
    """With semantic search on, UserPromptSubmit recall finds a note by meaning (the prompt shares
    no word with it) and says nothing for small talk or a question the memory has no note on."""
    from anamnesis.agents.recall import build_recall

    paths = _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    _text, shown = build_recall(store, PARAPHRASE, session_id="m1")
    assert shown[:1] == [paths["On-call rota"]]
    for prompt in ("good morning!", "what's the capital of Australia?", "write a haiku about autumn leaves"):
        assert build_recall(store, prompt, session_id="m2") == ("", []), prompt


def test_prompt_recall_needs_less_for_a_note_of_the_project_the_prompt_is_typed_in(
    store: Store, model_dir: Path, tmp_path: Path
) -> None:
    """A paraphrase whose note sits between the two gates (cosine 0.285, no shared word) is shown
    from a checkout of the note's project, and not from anywhere else."""
    import subprocess

    from anamnesis.agents.recall import EVIDENCE_ENOUGH, HERE_EASIER, build_recall

    project = "github.com/acme/events"
    retention = create_note(
        store,
        type="semantic",
        title="Event retention",
        body="Raw events are kept 90 days in the events table; older partitions move to cold object"
        " storage and are dropped after a year.",
        project=project,
    )
    _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    prompt = "how long do we hold onto customers' telemetry"
    with open_index(store) as index:
        (hit,) = [h for h in search(index, prompt, limit=3, snippets=False) if h.path == retention.path]
    assert hit.similarity is not None and EVIDENCE_ENOUGH - HERE_EASIER <= hit.similarity < EVIDENCE_ENOUGH
    checkouts = {}
    for key in (project, "github.com/acme/web"):
        folder = tmp_path / key.replace("/", "_")
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
        subprocess.run(
            ["git", "-C", str(folder), "remote", "add", "origin", f"https://{key}.git"], check=True
        )
        checkouts[key] = str(folder)
    assert build_recall(store, prompt, session_id="h1", cwd=checkouts[project])[1] == [retention.path]
    assert build_recall(store, prompt, session_id="h2", cwd=checkouts["github.com/acme/web"]) == ("", [])
    assert build_recall(store, prompt, session_id="h3", cwd=str(tmp_path)) == ("", [])


def test_prompt_recall_shows_the_note_holding_a_code_word_the_model_cannot_place(
    store: Store, model_dir: Path
) -> None:
    """An identifier the model never saw sits far from every note, the one that holds it too; the
    words it shares still show that note. A brand name in capitals (`JavaScript`) is no such word:
    a note that merely mentions it is not shown for a general question."""
    from anamnesis.agents.recall import EVIDENCE_ENOUGH, MEANING_FLOOR, WORDS_HELP, build_recall

    vitest = create_note(
        store,
        type="semantic",
        title="Unit tests moved to Vitest",
        body="Jest removed. `pnpm test` = `vitest run`, watch = `pnpm test:watch`.\n"
        "`vitest.config.ts` uses `vite-tsconfig-paths` so aliases come from tsconfig.\n"
        "env `jsdom` for components, `node` for `lib/**` via `environmentMatchGlobs`.\n"
        "`jest.fn()` -> `vi.fn()`; `jest.mock` hoisting works the same with `vi.mock`. ~40s for the suite.\n"
        "Coverage: `pnpm test --coverage` (v8 provider).",
    )
    scripts = create_note(
        store,
        type="semantic",
        title="Build scripts",
        body="Our build scripts are JavaScript run by node 20; the bundler config lives in build/.",
    )
    _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    with open_index(store) as index:
        (hit,) = [
            h
            for h in search(index, "environmentMatchGlobs", limit=5, snippets=False)
            if h.path == vitest.path
        ]
    assert hit.similarity is not None
    assert (
        hit.similarity < MEANING_FLOOR or hit.similarity + WORDS_HELP < EVIDENCE_ENOUGH
    )  # meaning alone: silent
    assert vitest.path in build_recall(store, "environmentMatchGlobs", session_id="c1")[1]
    assert (
        scripts.path not in build_recall(store, "how do I reverse a string in JavaScript", session_id="c2")[1]
    )


# --- the query server -------------------------------------------------------------------

ASK_IN_A_FRESH_PROCESS = """
import json, sys, time
from anamnesis.search.index import open_index
from anamnesis.base.paths import open_store
from anamnesis.search.engine import search
store = open_store()
out = {}
with open_index(store) as index:
    for query, project in json.loads(sys.argv[1]):
        started = time.monotonic()
        hits = search(index, query, project=project, limit=6, snippets=False)
        out[query + "|" + str(project)] = [[h.path, round(h.score, 4)] for h in hits]
        out["took|" + query + "|" + str(project)] = time.monotonic() - started
out["numpy loaded"] = "numpy" in sys.modules
print(json.dumps(out))
"""
QUESTIONS = [[PARAPHRASE, None], ["pg_dump", None], ["postgres tests in continuous integration", None]]


def _semantic_store(store: Store, model_dir: Path) -> dict[str, str]:
    paths = _fill(store)
    enable(store, model_dir)
    assert update_vectors(store) == len(NOTES)
    return paths


def _ask_in_a_fresh_process(store: Store, questions: list[list[object]]) -> dict[str, object]:
    import os
    import subprocess
    import sys

    env = {**os.environ, "ANAMNESIS_HOME": str(store.home)}
    proc = subprocess.run(
        [sys.executable, "-c", ASK_IN_A_FRESH_PROCESS, json.dumps(questions)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, object] = json.loads(proc.stdout)
    return answer


def _rankings(answer: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in answer.items() if "|" in key and not key.startswith("took|")}


def test_a_running_query_server_answers_searches_without_loading_the_model(
    store: Store, model_dir: Path
) -> None:
    from anamnesis.search.semantic_server import QueryServer

    paths = _semantic_store(store, model_dir)
    _ENGINES_clear()
    alone = _ask_in_a_fresh_process(store, QUESTIONS)
    assert alone["numpy loaded"] is True  # no server: the process loads the model itself
    server = QueryServer(store)
    assert server.start()
    try:
        served = _ask_in_a_fresh_process(store, QUESTIONS)
        assert server.answered == len(QUESTIONS)
        assert QueryServer(store).start() is False  # one server per store
    finally:
        server.stop()
    assert served["numpy loaded"] is False
    assert _rankings(served) == _rankings(alone)  # the same notes, the same scores
    assert served[f"{PARAPHRASE}|None"][0][0] == paths["On-call rota"]  # type: ignore[index]
    assert not server.path.exists()


def _ENGINES_clear() -> None:
    from anamnesis.search import semantic

    semantic._ENGINES.clear()


def test_filters_reach_the_query_server(store: Store, model_dir: Path) -> None:
    from anamnesis.search.ranking import Filters
    from anamnesis.search.semantic import ask_server
    from anamnesis.search.semantic_server import QueryServer

    _semantic_store(store, model_dir)
    engine = engine_for(store)
    assert engine is not None
    server = QueryServer(store)
    assert server.start()
    try:
        with open_index(store) as index:
            for filters in (Filters(), Filters(type="procedural"), Filters(project="github.com/x/none")):
                local = engine.local_similarity(index, PARAPHRASE, filters, 3, also={1, 2})
                asked = ask_server(store, engine.fingerprint, PARAPHRASE, filters, 3, {1, 2})
                assert asked is not None
                assert asked == pytest.approx(local, abs=1e-6)
    finally:
        server.stop()


def test_a_server_that_never_answers_costs_the_deadline_at_most(store: Store, model_dir: Path) -> None:
    import socket

    from anamnesis.search.semantic import ASK_TIMEOUT, socket_path

    _semantic_store(store, model_dir)
    alone = _rankings(_ask_in_a_fresh_process(store, QUESTIONS[:1]))
    path = socket_path(store)
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hung.bind(str(path))
    hung.listen(8)  # accepts connections into its backlog, never reads, never answers
    try:
        answer = _ask_in_a_fresh_process(store, QUESTIONS[:1])
    finally:
        hung.close()
    assert _rankings(answer) == alone  # answered in process after the deadline
    took = answer[f"took|{PARAPHRASE}|None"]
    assert isinstance(took, float) and ASK_TIMEOUT <= took < ASK_TIMEOUT + 60
    # the socket file a killed server left behind: the next server takes its place
    from anamnesis.search.semantic_server import QueryServer

    server = QueryServer(store)
    assert server.start()
    server.stop()


def test_a_server_running_another_model_is_not_believed(store: Store, model_dir: Path) -> None:
    from anamnesis.search.ranking import Filters
    from anamnesis.search.semantic import ask_server
    from anamnesis.search.semantic_server import QueryServer

    _semantic_store(store, model_dir)
    server = QueryServer(store)
    assert server.start()
    try:
        assert ask_server(store, "other-model:0:fp32:256x4", PARAPHRASE, Filters(), 3, None) is None
        with pytest.raises(ValueError, match="bad pool"):
            server.reply(json.dumps({"text": "x", "pool": 0}).encode())
    finally:
        server.stop()


def test_watch_answers_semantic_queries_while_semantic_search_is_on(store: Store, model_dir: Path) -> None:
    from anamnesis.search.semantic import disable_semantic as disable
    from anamnesis.search.semantic import socket_path
    from anamnesis.sync.watch import Watcher, WatchOptions

    _semantic_store(store, model_dir)
    watcher = Watcher(
        store, sync=lambda reason: None, options=WatchOptions(discovery=False, initial_sync=False, beat=0.2)
    )
    watcher.start()
    try:
        assert socket_path(store).exists()
        served = _ask_in_a_fresh_process(store, QUESTIONS[:1])
        assert served["numpy loaded"] is False
        disable(store)  # turned off while watch runs: its server stops, and no new one starts
        deadline = time.monotonic() + 30
        while _watch_serves(store) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _watch_serves(store) is False
        time.sleep(1.0)  # a few more beats: still none
        assert not socket_path(store).exists() and _watch_serves(store) is False
    finally:
        watcher.stop()


def _watch_serves(store: Store) -> bool | None:
    """Whether watch's last heartbeat says it answers semantic queries."""
    from anamnesis.sync.watch import read_heartbeat

    beat = read_heartbeat(store)
    return None if beat is None else bool(beat.get("semantic_queries"))


def test_watch_starts_a_new_query_server_when_its_socket_is_taken_away(store: Store, model_dir: Path) -> None:
    """Removing the socket is how `stop_query_server` (enable, uninstall) stops a server; watch's
    own then counts as stopped, and with semantic search still on watch starts a fresh one
    (it kept answering on a socket nobody could reach, and never started another)."""
    from anamnesis.search.semantic import server_answering, socket_path, stop_query_server
    from anamnesis.sync.watch import Watcher, WatchOptions

    _semantic_store(store, model_dir)
    watcher = Watcher(
        store, sync=lambda reason: None, options=WatchOptions(discovery=False, initial_sync=False, beat=0.2)
    )
    watcher.start()
    try:
        assert server_answering(store)
        assert stop_query_server(store) and not socket_path(store).exists()
        deadline = time.monotonic() + 30
        while not server_answering(store) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server_answering(store)  # nothing but watch could have started one here
        served = _ask_in_a_fresh_process(store, QUESTIONS[:1])
        assert served["numpy loaded"] is False  # answered by watch's new server
    finally:
        watcher.stop()


SESSION_START_IN_A_FRESH_PROCESS = """
import json, sys
from anamnesis.agents.inject import build_context
from anamnesis.base.paths import open_store
text, shown = build_context(open_store(), sys.argv[1])
print(json.dumps({"shown": shown, "numpy loaded": "numpy" in sys.modules}))
"""


def test_session_start_ranks_by_keywords_and_never_loads_the_model(
    store: Store, model_dir: Path, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    repo = tmp_path / "api"
    subprocess.run(["git", "init", "-q", "-b", "feature/postgres-ci", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:acme/api.git"], check=True
    )
    _semantic_store(store, model_dir)
    note = create_note(
        store,
        type="procedural",
        title="Ephemeral Postgres in CI",
        body=NOTES[0][2],
        project="github.com/acme/api",
    )
    assert update_vectors(store) == 1
    proc = subprocess.run(
        [sys.executable, "-c", SESSION_START_IN_A_FRESH_PROCESS, str(repo)],
        capture_output=True,
        text=True,
        env={**os.environ, "ANAMNESIS_HOME": str(store.home)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert note.path in answer["shown"]
    assert answer["numpy loaded"] is False


def test_status_says_whether_the_vectors_are_complete(store: Store, model_dir: Path, run_cli: RunCli) -> None:
    _fill(store)
    enable(store, model_dir)  # on, nothing embedded yet
    line = next(
        line for line in run_cli("status").stdout.splitlines() if line.lstrip().startswith("semantic")
    )
    assert "vectors incomplete" in line and f"0 of {len(NOTES)} notes embedded, {len(NOTES)} pending" in line
    info = json.loads(run_cli("status", "--json").stdout)["semantic"]
    assert (info["complete"], info["pending"], info["query_server"]) == (False, len(NOTES), False)
    assert update_vectors(store) == len(NOTES)
    line = next(
        line for line in run_cli("status").stdout.splitlines() if line.lstrip().startswith("semantic")
    )
    assert "vectors complete" in line and "pending" not in line
    assert json.loads(run_cli("semantic", "status", "--json").stdout)["complete"] is True


def test_semantic_serve_answers_until_idle_and_refuses_when_off(
    store: Store, model_dir: Path, run_cli: RunCli
) -> None:
    import os
    import subprocess
    import sys

    from anamnesis.search.ranking import Filters
    from anamnesis.search.semantic import ask_server, socket_path

    _fill(store)
    off = run_cli("semantic", "serve")
    assert off.returncode == 7 and off.stderr.count("\n") == 1 and "semantic search is off" in off.stderr
    enable(store, model_dir)
    assert update_vectors(store) == len(NOTES)
    engine = engine_for(store)
    assert engine is not None
    server = subprocess.Popen(
        [sys.executable, "-m", "anamnesis", "semantic", "serve", "--idle", "3"],
        env={**os.environ, "ANAMNESIS_HOME": str(store.home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        answer = None
        while answer is None and time.monotonic() < deadline and server.poll() is None:
            answer = ask_server(store, engine.fingerprint, PARAPHRASE, Filters(), 3, None)
            time.sleep(0.1)
        assert answer is not None and len(answer) == 3
        assert json.loads(run_cli("semantic", "status", "--json").stdout)["query_server"] is True
        assert server.wait(timeout=60) == 0  # three seconds without a question: it exits
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert not socket_path(store).exists()


def _servers_of(home: Path) -> list[int]:
    """Pids of `anamnesis semantic serve` processes working in this store home (spawn's cwd)."""
    import os

    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            if b"semantic" in words and b"serve" in words and Path(os.readlink(entry / "cwd")) == home:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _stop_servers(home: Path) -> None:
    """End the query servers this test started: a server exits when its socket is gone."""
    import os
    import signal

    from anamnesis.base.paths import open_store
    from anamnesis.search.semantic import socket_path

    path = socket_path(open_store(home))
    deadline = time.monotonic() + 90  # a loaded machine can take that long to load the model
    quiet_since: float | None = None  # none seen since: done once that lasts two seconds
    while time.monotonic() < deadline:
        if _servers_of(home):
            path.unlink(missing_ok=True)  # again and again: one still loading makes its socket later
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= 2.0:  # one was seen to appear after a first look found none
            break
        time.sleep(0.2)
    for pid in _servers_of(home):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60  # SIGKILL waits for a process in uninterruptible I/O
    while _servers_of(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: _state_of(pid) for pid in _servers_of(home)}
    assert not left, f"query servers still running after SIGKILL: {left}"


def _state_of(pid: int) -> str:
    try:
        return next(
            line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State")
        )
    except (OSError, StopIteration):
        return "gone"


def test_session_start_keeps_the_model_loaded_for_the_sessions_prompts(store: Store, model_dir: Path) -> None:
    """A session starting with semantic search on and no query server starts one (detached, idle
    timeout), so its prompts do not each load the model; a second session finds it and starts none."""
    import os
    import subprocess
    import sys

    from anamnesis.search.semantic import server_answering

    _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    env = {**os.environ, "ANAMNESIS_HOME": str(store.home)}
    event = json.dumps(
        {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup", "cwd": str(store.home)}
    )

    def session_start() -> None:
        proc = subprocess.run(
            [sys.executable, "-P", "-m", "anamnesis.hooks", "session-start"],
            input=event,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr

    try:
        session_start()
        deadline = time.monotonic() + 90
        while not server_answering(store) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server_answering(store)
        assert len(_servers_of(store.home)) == 1
        session_start()
        time.sleep(1.0)
        assert len(_servers_of(store.home)) == 1  # the running one answers: no second server
    finally:
        _stop_servers(store.home)


def test_session_start_starts_no_server_while_semantic_search_is_off(store: Store) -> None:
    import os
    import subprocess
    import sys

    _fill(store)
    event = json.dumps(
        {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup", "cwd": str(store.home)}
    )
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "anamnesis.hooks", "session-start"],
        input=event,
        env={**os.environ, "ANAMNESIS_HOME": str(store.home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    time.sleep(1.0)
    assert not _servers_of(store.home) and not (store.state_dir / "semantic-serve.started").exists()


def test_a_search_that_loaded_the_model_leaves_a_query_server_for_the_next(
    run_cli: RunCli, store: Store, model_dir: Path
) -> None:
    """`anamnesis search` with semantic search on and no server answering loads the model itself,
    then starts one detached server (idle timeout) so the searches after it do not; `--all`
    (no ranking by meaning) and keyword-only search start none."""
    from anamnesis.search.semantic import SEARCH_SERVE_IDLE, server_answering

    paths = _fill(store)
    try:
        assert json.loads(run_cli("search", "certbot", "--all", "--json").stdout)
        time.sleep(1.0)
        assert not _servers_of(store.home)  # semantic search is still off
        enable(store, model_dir)
        update_vectors(store)
        assert json.loads(run_cli("search", "certbot", "--all", "--json").stdout)
        time.sleep(1.0)
        assert not _servers_of(store.home)  # --all ranks by words alone: no model was loaded
        found = json.loads(run_cli("search", PARAPHRASE, "--json").stdout)
        assert found[0]["path"] == paths["On-call rota"]
        deadline = time.monotonic() + 90
        while not server_answering(store) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server_answering(store)
        [pid] = _servers_of(store.home)
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert words[words.index(b"--idle") + 1] == str(SEARCH_SERVE_IDLE).encode()
        # the next search is answered by it (same result), and starts no second one
        again = json.loads(run_cli("search", PARAPHRASE, "--json").stdout)
        assert [hit["path"] for hit in again] == [hit["path"] for hit in found]
        time.sleep(1.0)
        assert _servers_of(store.home) == [pid]
    finally:
        _stop_servers(store.home)


def test_prompt_recall_shows_a_note_not_embedded_yet_by_its_words(store: Store, model_dir: Path) -> None:
    """A note written moments ago (last session's capture, say) has no vector until the background
    update embeds it; with semantic search on, the prompt hook still shows it on the keyword gate."""
    from anamnesis.agents.recall import build_recall

    _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    fresh = create_note(
        store,
        type="procedural",
        title="Rotating the Grafana admin password",
        body="Run scripts/grafana-rotate.sh, then update the vault entry grafana/admin.",
    )
    engine = engine_for(store)
    assert engine is not None
    with open_index(store) as index:
        index.refresh()
        assert len(pending(index, engine.fingerprint)) == 1  # the new note has no vector yet
    _text, shown = build_recall(store, "how do I rotate the grafana admin password?", session_id="p1")
    assert shown[:1] == [fresh.path]


@contextmanager
def _serving(store: Store) -> Iterator[subprocess.Popen[bytes]]:
    """`anamnesis semantic serve` for this store, answering; killed afterwards if still running."""
    from anamnesis.search.semantic import server_answering

    server = subprocess.Popen(
        [sys.executable, "-P", "-m", "anamnesis", "semantic", "serve", "--idle", "300"],
        env={**os.environ, "ANAMNESIS_HOME": str(store.home)},
        cwd=store.home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while not server_answering(store) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server_answering(store)
        yield server
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_uninstall_stops_the_query_server(store: Store, model_dir: Path, run_cli: RunCli) -> None:
    """With the hooks gone nothing would ask a running query server again: uninstall stops it
    (--print says it would), instead of leaving it to its idle timeout."""
    from anamnesis.search.semantic import server_answering

    _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    with _serving(store) as server:
        planned = run_cli("uninstall", "--print")
        assert planned.returncode == 0 and "stop the semantic query server" in planned.stdout
        assert server_answering(store) and server.poll() is None  # --print changed nothing
        done = run_cli("uninstall", "--json")
        assert done.returncode == 0, done.stderr
        assert "stopped the semantic query server of this store" in json.loads(done.stdout)["done"]
        assert server.wait(timeout=30) == 0
        assert not server_answering(store)
        again = run_cli("uninstall", "--json")  # nothing left to stop
        assert not any("query server" in line for line in json.loads(again.stdout)["done"])


def test_semantic_disable_stops_the_query_server(store: Store, model_dir: Path, run_cli: RunCli) -> None:
    """Nothing asks a query server while semantic search is off: `semantic disable` stops it."""
    from anamnesis.search.semantic import server_answering

    _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    with _serving(store) as server:
        assert run_cli("semantic", "disable").returncode == 0
        assert server.wait(timeout=30) == 0
        assert not server_answering(store)


def test_enabling_another_model_stops_the_query_server_running_the_old_one(
    store: Store, model_dir: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    """A server keeps the model it loaded: after `semantic enable` with another one it would answer
    every question with "this server runs model X", and each hook would load the model itself
    while it stood in the way of a new server. Enabling stops it."""
    from anamnesis.search.semantic import server_answering

    _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    other = _another_model(model_dir, tmp_path)
    with _serving(store) as server:
        assert run_cli("semantic", "enable", "--model-dir", str(other), "--background").returncode == 0
        assert server.wait(timeout=30) == 0
        assert not server_answering(store)


def test_a_note_written_while_the_model_was_away_is_embedded_at_the_next_search(
    run_cli: RunCli, home: Path, model_dir: Path, tmp_path: Path
) -> None:
    model, away = tmp_path / "model", tmp_path / "away"
    shutil.copytree(model_dir, model)
    run_cli("init", "--local-only")
    assert run_cli("semantic", "enable", "--model-dir", str(model)).returncode == 0
    model.rename(away)  # the folder moved: nothing can be embedded
    assert run_cli("new", "Office printer", "--body", "The printer on floor 2 jams often.").returncode == 0
    away.rename(model)
    time.sleep(1)
    assert (
        json.loads(run_cli("semantic", "status", "--json").stdout)["pending"] == 1
    )  # nothing retried by itself
    try:
        assert run_cli("search", "paper stuck in the copier").returncode == 0
        info = _when_embedded(run_cli)
        assert info["pending"] == 0, info
    finally:
        _stop_servers(home)


def test_prompt_recall_leaves_out_notes_far_less_close_than_the_closest(
    store: Store, model_dir: Path, tmp_path: Path
) -> None:
    """Notes of the same project that pass the gate only because they sit next to the prompt's
    subject (Stripe, a handler) are not shown beside the note that answers it."""
    from anamnesis.agents.recall import build_recall

    project = "github.com/acme/payments-api"
    checkout = tmp_path / "payments-api"
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run(["git", "-C", str(checkout), "remote", "add", "origin", f"git@github.com:{project.split('/', 1)[1]}.git"], check=True)
    webhooks = create_note(
        store, type="procedural", title="Testing Stripe webhooks locally", project=project,
        body="Run `stripe listen --forward-to localhost:8000/webhooks/stripe` and copy the signing secret it "
        "prints into .env. Trigger events with `stripe trigger payment_intent.succeeded`. The endpoint rejects "
        "events older than 5 minutes, so replaying old fixtures fails the signature check.",
    )
    for title, body in (
        ("How to issue a manual refund for a customer", "Support asks for manual refunds when the automatic path "
         "failed. Use `make shell` then RefundService(order_id).refund(). Never refund from the Stripe dashboard "
         "directly: our ledger would not know and the nightly reconciliation job flags a mismatch."),
        ("Never log card data or full PANs", "PCI scope: we only ever see Stripe tokens, but the request logger "
         "masks anything matching a PAN pattern anyway. Do not add request body logging to the /charges handlers."),
        ("Nightly reconciliation job runs at 03:15 UTC", "The reconcile_ledger job compares our ledger to Stripe "
         "balance transactions for the previous day. Mismatches go to #payments-alerts."),
    ):
        create_note(store, type="semantic", title=title, body=body, project=project)
    enable(store, model_dir)
    update_vectors(store)
    _text, shown = build_recall(store, "how do I test the stripe webhook handler on my laptop", session_id="p1", cwd=str(checkout))
    assert shown == [webhooks.path], shown


def test_a_query_of_stop_words_alone_is_not_answered_by_meaning(store: Store, model_dir: Path) -> None:
    """"the a of" has words to look for (notes holding them, as keyword search finds them) and no
    meaning: the model would place it near some notes, which would then come back for no reason."""
    _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    with open_index(store) as index:
        found = search(index, "the a of")
        assert all(hit.similarity is None for hit in found), found
        assert all(" of " in f" {hit.title} {hit.snippet} ".lower() or "the" in hit.snippet.lower() for hit in found)
        assert search(index, "who gets woken up at night")[0].similarity is not None  # meaning still ranks questions
