"""Semantic search with the real model: enable, embed, hybrid ranking, status, disable.

The model comes from the `model_dir` fixture (scripts/test-model into the test
cache), as `anamnesis semantic enable --model-dir` takes it on an air-gapped
machine. Nothing here reaches the model hub.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from conftest import RunCli
from test_embed import model_dir  # noqa: F401  (the session fixture: the real model folder)

from anamnesis.index import open_index
from anamnesis.paths import Store
from anamnesis.ranking import KeywordRanker
from anamnesis.search import search
from anamnesis.semantic import SemanticError, enable, engine_for, pending, status, update_vectors
from anamnesis.store import create_note, update_note

PARAPHRASE = "who gets woken up when the site goes down at night"  # shares no word with its note
NOTES = [
    (
        "procedural",
        "Ephemeral Postgres in CI",
        "Every CI job gets its own short-lived PostgreSQL container: started before the suite, migrated,"
        " and destroyed afterwards, so no state leaks between runs.",
    ),
    ("semantic", "Frontend bundle size budget", "The web bundle must stay under 250 kB gzip; vite reports it."),
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
    other = tmp_path / "other-model"
    shutil.copytree(model_dir, other)
    weights = other / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # another model, as far as fingerprints go
    weights.write_bytes(bytes(data))
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
    found = json.loads(run_cli("search", PARAPHRASE, "--json").stdout)
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


def test_new_notes_are_embedded_in_the_background(run_cli: RunCli, model_dir: Path) -> None:
    run_cli("init", "--local-only")
    run_cli("semantic", "enable", "--model-dir", str(model_dir))
    started = time.monotonic()
    proc = run_cli("new", "Ephemeral Postgres in CI", "-t", "procedural", "--body", NOTES[0][2])
    assert proc.returncode == 0 and time.monotonic() - started < 5  # `new` does not wait for the model
    deadline = time.monotonic() + 90
    info = json.loads(run_cli("semantic", "status", "--json").stdout)
    while info["pending"] and time.monotonic() < deadline:
        time.sleep(0.5)
        info = json.loads(run_cli("semantic", "status", "--json").stdout)
    assert (info["embedded"], info["pending"]) == (1, 0)


def test_prompt_recall_uses_meaning_and_stays_silent_off_topic(store: Store, model_dir: Path) -> None:
    """With semantic search on, UserPromptSubmit recall finds a note by meaning (the prompt shares
    no word with it) and says nothing for small talk or a question the memory has no note on."""
    from anamnesis.recall import build_recall

    paths = _fill(store)
    enable(store, model_dir)
    update_vectors(store)
    _text, shown = build_recall(store, PARAPHRASE, session_id="m1")
    assert shown[:1] == [paths["On-call rota"]]
    for prompt in ("good morning!", "what's the capital of Australia?", "write a haiku about autumn leaves"):
        assert build_recall(store, prompt, session_id="m2") == ("", []), prompt
