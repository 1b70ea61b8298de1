"""Search speed, keyword and hybrid, on a seeded store (issue 9 targets). By hand:

python bench/bench_search.py                                  # keyword only, 10,000 notes
python bench/bench_search.py --model-dir DIR                  # also semantic: embed, hybrid, hooks
python bench/bench_search.py --notes 2000 --runs 10 --model-dir "$(scripts/test-model ~/.cache/anamnesis-test/model | tail -1)"

Whole-process figures run `python -m anamnesis ...` start to exit, as a user
does; "in process" figures call `search()` in a warm process, as the MCP
server does. Embedding throughput is measured on a sample of the store's
notes; hybrid search is then timed over random vectors for every note (search
cost does not depend on what they say). `--full-embed` instead times
`anamnesis semantic enable --model-dir DIR` embedding every note for real.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.corpus import build_store  # noqa: E402
from bench.stats import report, time_call, time_process  # noqa: E402

QUERIES = (
    "how do we handle a connection pool timeout in the worker?",
    "retry_with_backoff",
    "docker-compose.yml",
    "why did the billing webhook deploy roll back",
    "pg_bouncer.pool_size",
    "rate limit canary rollout",
    "what did we decide about the session token cache",
    "RetryPolicy HttpClient",
)


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANAMNESIS_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "anamnesis", *args], env=env, capture_output=True, text=True, check=True
    )


def time_cli_searches(home: Path, runs: int) -> list[float]:
    env = {"ANAMNESIS_HOME": str(home)}
    out: list[float] = []
    for i in range(runs):
        query = QUERIES[i % len(QUERIES)]
        out += time_process([sys.executable, "-m", "anamnesis", "search", query, "--json"], 1, env)
    return out


def time_in_process(home: Path, runs: int) -> list[float]:
    from anamnesis.base.paths import open_store
    from anamnesis.search.engine import search
    from anamnesis.search.index import open_index

    store = open_store(home)
    out: list[float] = []
    with open_index(store) as index:
        search(index, QUERIES[0])  # warm: model and vectors loaded once, as in a running MCP server
        for i in range(runs):
            query = QUERIES[i % len(QUERIES)]
            out += time_call(lambda q=query: search(index, q, near_project="github.com/acme/api"), 1)
    return out


def time_hook(home: Path, event: str, payload: dict[str, object], runs: int) -> list[float]:
    out: list[float] = []
    env = {**os.environ, "ANAMNESIS_HOME": str(home)}
    for _ in range(runs):
        data = json.dumps({**payload, "session_id": str(uuid.uuid4())})
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "anamnesis.hooks", event], input=data, text=True, env=env, capture_output=True
        )
        out.append(time.perf_counter() - started)
    return out


def embed_sample(home: Path, model_dir: Path, count: int) -> float:
    """Turn semantic search on and time embedding `count` of the store's notes (model load included)."""
    from anamnesis.base.paths import open_store
    from anamnesis.search.index import open_index
    from anamnesis.search.semantic import enable_semantic as enable
    from anamnesis.search.semantic import engine_for, note_text

    store = open_store(home)
    enable(store, model_dir)
    engine = engine_for(store)
    assert engine is not None
    with open_index(store) as index:
        rows = index.conn.execute("SELECT title, tags, body FROM fts LIMIT ?", (count,)).fetchall()
    started = time.perf_counter()
    engine.embed_notes([note_text(t or "", g or "", b or "") for t, g, b in rows])
    return time.perf_counter() - started


def fill_random_vectors(home: Path) -> None:
    """Vectors for every note, random but of the right model and shape: search speed does not
    depend on what the vectors say, and embedding 10,000 notes first would take many minutes."""
    import numpy as np

    from anamnesis.base.paths import open_store
    from anamnesis.search.index import open_index
    from anamnesis.search.semantic import engine_for

    store = open_store(home)
    engine = engine_for(store)
    assert engine is not None
    rng = np.random.default_rng(7)
    with open_index(store) as index:
        rows = index.conn.execute("SELECT rowid, sha FROM notes").fetchall()
        vectors = rng.standard_normal((len(rows), engine.embedder.dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index.conn.execute("BEGIN IMMEDIATE")
        index.conn.executemany(
            "INSERT OR REPLACE INTO vectors(note, sha, model, vec) VALUES (?, ?, ?, ?)",
            [
                (rowid, sha, engine.fingerprint, vectors[i].astype(np.float16).tobytes())
                for i, (rowid, sha) in enumerate(rows)
            ],
        )
        index.bump_generation()
        index.conn.execute("COMMIT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--model-dir", type=Path, help="the model folder; measures semantic search too")
    parser.add_argument(
        "--full-embed", action="store_true", help="embed every note with `semantic enable` (minutes at 10,000)"
    )
    parser.add_argument("--sample", type=int, default=300, help="notes embedded to measure throughput")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anamnesis-bench-search-") as tmp:
        home = Path(tmp) / "home"
        started = time.perf_counter()
        build_store(home, args.notes)
        cli(home, "reindex")
        print(f"store: {args.notes} notes ({time.perf_counter() - started:.1f}s to build)")
        cwd = Path(tmp)
        prompt = {"cwd": str(cwd), "hook_event_name": "UserPromptSubmit", "prompt": QUERIES[3]}
        start = {"cwd": str(cwd), "hook_event_name": "SessionStart", "source": "startup"}
        report("keyword: CLI `search` whole process", time_cli_searches(home, args.runs), "target ≤ 250 ms")
        report("keyword: search in process (MCP server)", time_in_process(home, args.runs * 5))
        report("keyword: SessionStart hook", time_hook(home, "session-start", start, args.runs // 2), "≤ 150 ms")
        report("keyword: UserPromptSubmit hook", time_hook(home, "user-prompt-submit", prompt, args.runs // 2))
        if args.model_dir is None:
            return
        if args.full_embed:
            started = time.perf_counter()
            cli(home, "semantic", "enable", "--model-dir", str(args.model_dir))
            seconds = time.perf_counter() - started
            info = json.loads(cli(home, "semantic", "status", "--json").stdout)
            print(
                f"semantic enable: {info['embedded']} notes embedded in {seconds:.1f}s"
                f" ({info['embedded'] / seconds:.1f} notes/s, model load included)"
            )
        else:
            sample = embed_sample(home, args.model_dir, args.sample)
            print(
                f"embedding: {args.sample} notes of this store in {sample:.1f}s"
                f" ({args.sample / sample:.1f} notes/s); {args.notes} notes would take"
                f" about {args.notes * sample / args.sample / 60:.1f} min (--full-embed measures it)"
            )
            fill_random_vectors(home)
        report("hybrid: CLI `search` whole process (cold)", time_cli_searches(home, args.runs), "target ≤ 600 ms")
        report("hybrid: search in process (MCP server)", time_in_process(home, args.runs * 5), "target p50 ≤ 20 ms")
        report("hybrid: SessionStart hook", time_hook(home, "session-start", start, args.runs // 2))
        report("hybrid: UserPromptSubmit hook", time_hook(home, "user-prompt-submit", prompt, args.runs // 2))


if __name__ == "__main__":
    main()
