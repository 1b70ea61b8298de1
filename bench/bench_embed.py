"""Embedding speed of anamnesis.search.embed (the semantic extra). Run by hand:

python bench/bench_embed.py --model DIR             # 500 notes of ~220 tokens
python bench/bench_embed.py --model DIR --notes 2000 --batch-size 32
python bench/bench_embed.py --model DIR --long 100  # also: notes of ~700 tokens, cut vs four windows
python bench/bench_embed.py --model DIR --corpus 300 --chunks 4,1 --rounds 3
    # what `semantic enable` does: bench/corpus.py notes as the index embeds them, 32 a call,
    # with each window cap in turn (alternating, run for run), in wall time and CPU time
python bench/bench_embed.py --model DIR --corpus 300 --chunks 4,1 --recall-notes
    # the same with the recall sets' hand-written notes (bench/recall/*/notes)
git show 95ccf38:anamnesis/embed.py > /tmp/embed_before.py
python bench/bench_embed.py --model DIR --corpus 96 --rounds 4 --against /tmp/embed_before.py
    # this embed.py against another version of the file, run for run (cap 1)
python bench/bench_embed.py --model DIR --recall-caps 256,224,192,160,128
    # recall on every set (bench_recall.py --hybrid) with notes cut at each token cap

DIR is a model folder, e.g. the one `scripts/test-model DIR` makes. Targets: at least
20 notes/s, start to first vector at most 0.5 s, one short query at most 10 ms.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import percentile

WORDS = (
    "the a to of and in is for on that with it this we was be as at by not but when after service request "
    "cache database migration deploy rollback latency timeout retry queue worker schema index query "
    "connection pool thread lock config environment secret token session user account billing invoice "
    "payment webhook endpoint handler router middleware test fixture release branch commit review merge "
    "conflict build pipeline container image cluster replica shard backup restore metric alert dashboard "
    "trace error exception crash memory leak disk network certificate proxy gateway balancer feature flag "
    "rollout canary hotfix because should must never always usually fixed broke changed decided measured"
).split()
CODE_WORDS = (
    "parse_config pg_bouncer.pool_size src/app/main.py HttpClient RetryPolicy user_id tests/test_api.py "
    "ConnectionPool settings.DATABASE_URL docker-compose.yml cache.ttl_seconds retry_with_backoff"
).split()
QUERIES = (
    "how do we roll back a failed deploy",
    "connection pool timeout",
    "why is checkout slow",
    "retry with backoff",
    "where are the billing webhooks handled",
    "certificate expired on the proxy",
    "flaky test in the pipeline",
    "memory leak in the worker",
)

START_CHILD = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from pathlib import Path
from anamnesis.search.embed import load_embedder
embedder = load_embedder(Path({model!r}))
embedder.embed_query("how do we roll back a failed deploy")
print(time.perf_counter() - t0)
"""


def make_notes(count: int, words: int, seed: int = 7) -> list[str]:
    """`count` notes of `words` words of engineering prose with code words mixed in."""
    rng = random.Random(seed)
    notes = []
    for _ in range(count):
        out = []
        for _ in range(words):
            out.append(rng.choice(CODE_WORDS) if rng.random() < 0.06 else rng.choice(WORDS))
            if rng.random() < 0.08:
                out[-1] += "."
        notes.append(" ".join(out))
    return notes


def start_to_first_vector(model: Path, runs: int) -> tuple[list[float], list[float]]:
    """(in-process seconds from before the import to the first vector, whole-process seconds)."""
    root = str(Path(__file__).resolve().parent.parent)
    inner, whole = [], []
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", START_CHILD.format(root=root, model=str(model))],
            capture_output=True,
            text=True,
            check=True,
        )
        whole.append(time.perf_counter() - started)
        inner.append(float(out.stdout.strip().splitlines()[-1]))
    return inner, whole


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    return ", ".join(
        f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} x{i.get('num_threads')}"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    )


def load_other_embed(path: Path) -> Any:
    """Another version of anamnesis/search/embed.py (a file on its own: it imports only the
    standard library at the top), loaded as a module of its own."""
    spec = importlib.util.spec_from_file_location("embed_against", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"bench_embed: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def corpus_throughput(
    model: Path, count: int, caps: list[int], rounds: int, sets: bool = False, against: Path | None = None
) -> None:
    """Notes a second as `semantic enable` embeds bench/corpus.py notes (or, with `sets`, the
    recall sets' hand-written notes, repeated up to `count`), per window cap, or (`against`)
    this embed.py against another version of it, alternating run for run.

    CPU time (all threads of this process) barely moves with what else runs on the machine;
    notes per CPU-second times the cores is what an idle machine does."""
    from anamnesis.search.embed import load_embedder
    from anamnesis.search.semantic import BATCH, note_text
    from bench.corpus import make_note

    if sets:
        from anamnesis.base.notes import parse_note

        root = Path(__file__).resolve().parent / "recall"
        files = sorted(root.glob("*/notes/**/*.md"))
        notes = [parse_note(f.read_text(encoding="utf-8"), str(f.relative_to(root))) for f in files]
        notes = (notes * (count // max(1, len(notes)) + 1))[:count]
    else:
        rng = random.Random(7)
        notes = [make_note(rng, i) for i in range(count)]
    texts = [note_text(n.title, " ".join(n.tags), n.body) for n in notes]
    models: dict[str, Any] = {f"cap {cap}": load_embedder(model, max_chunks=cap) for cap in caps}
    if against is not None:
        models = {"this": load_embedder(model), against.name: load_other_embed(against).load_embedder(model)}
    cores = os.cpu_count() or 1
    print(
        f"{count} corpus notes, mean {statistics.mean(len(t) for t in texts):.0f} characters; {cores} cores"
    )
    for cap, embedder in models.items():
        windows = embedder._windows(texts)
        print(
            f"  {cap}: {statistics.mean(len(w) for w in windows):.2f} windows,"
            f" {statistics.mean(sum(len(x) for x in w) for w in windows):.0f} tokens a note"
        )
        for _ in range(3):  # warm up: past the windows after which onnxruntime takes over
            embedder.embed(texts[:BATCH])
    if against is not None:
        first, other = (m.embed(texts[:BATCH]) for m in models.values())
        print(f"largest difference between the two versions' vectors: {abs(first - other).max():.2e}")
    results: dict[str, list[tuple[float, float]]] = {cap: [] for cap in models}
    for turn in range(rounds):
        # Alternate who goes first, so neither always runs in the other's wake.
        for cap, embedder in list(models.items())[:: 1 if turn % 2 == 0 else -1]:
            load = os.getloadavg()[0]
            wall, cpu = time.perf_counter(), time.process_time()
            for start in range(0, len(texts), BATCH):
                embedder.embed(texts[start : start + BATCH])
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            results[cap].append((wall, cpu))
            print(
                f"  {cap}: {count / wall:6.1f} notes/s wall, {count / cpu:6.1f} notes per CPU-second"
                f" (load {load:.1f})",
                flush=True,
            )
    for cap, runs in results.items():
        per_cpu = count / statistics.median(cpu for _, cpu in runs)
        print(
            f"{cap}: median {count / statistics.median(w for w, _ in runs):.1f} notes/s wall,"
            f" {per_cpu:.1f} notes per CPU-second -> 10,000 notes on {cores} idle cores"
            f" ~ {10_000 / (per_cpu * cores) / 60:.1f} min"
        )


# Put on PYTHONPATH as sitecustomize.py, this sets the token cap in every Python process of
# a bench_recall.py run (its CLI subprocesses too): the fingerprint names the cap, so a run
# whose report does not show it did not take effect.
CAP_SITECUSTOMIZE = """
import os
cap = os.environ.get("BENCH_EMBED_TOKEN_CAP")
if cap:
    import anamnesis.search.embed
    anamnesis.search.embed.MAX_TOKENS = int(cap)
"""


def recall_by_cap(model: Path, caps: list[int]) -> None:
    """Hybrid recall on every recall set with notes cut at each token cap in turn: a shorter
    cap embeds long notes for less, and is worth it only where no set loses by it."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="bench-embed-caps-") as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(CAP_SITECUSTOMIZE, encoding="utf-8")
        path = os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")]))
        for cap in caps:
            command = [sys.executable, str(root / "bench" / "bench_recall.py"), "--hybrid", "--in-process"]
            proc = subprocess.run(
                [*command, "--model-dir", str(model), "--json"],
                env={**os.environ, "BENCH_EMBED_TOKEN_CAP": str(cap), "PYTHONPATH": path},
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                raise SystemExit(f"bench_embed: bench_recall.py failed at cap {cap}:\n{proc.stderr.strip()}")
            for found in json.loads(proc.stdout)["sets"]:
                fingerprint = found["semantic"]["fingerprint"]
                if f":{cap}x" not in fingerprint:
                    raise SystemExit(f"bench_embed: cap {cap} did not take effect ({fingerprint})")
                every, paraphrase = found["metrics"]["all"], found["metrics"]["paraphrase"]
                print(
                    f"cap {cap:3d}  {found['set']:5s}  recall@5 {every['r@5']:.4f}  MRR {every['mrr']:.4f}"
                    f"  paraphrase recall@5 {paraphrase['r@5']:.4f}",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, required=True, help="model folder")
    parser.add_argument("--notes", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--starts", type=int, default=5, help="fresh processes timed for start to first vector"
    )
    parser.add_argument(
        "--long", type=int, default=0, help="also time this many ~700-token notes, cut and chunked"
    )
    parser.add_argument(
        "--corpus",
        type=int,
        default=0,
        help="only time this many notes as `semantic enable` embeds them (bench/corpus.py's)",
    )
    parser.add_argument("--chunks", default="1", help="with --corpus: window caps to compare, e.g. 4,1")
    parser.add_argument(
        "--rounds", type=int, default=3, help="with --corpus: rounds of each cap, alternating"
    )
    parser.add_argument(
        "--recall-notes", action="store_true", help="with --corpus: the recall sets' notes, not corpus.py's"
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="with --corpus: another version of anamnesis/search/embed.py to time against this one",
    )
    parser.add_argument(
        "--recall-caps", help="only run the recall sets with notes cut at these token caps, e.g. 256,192,128"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    if args.recall_caps:
        recall_by_cap(args.model.resolve(), [int(c) for c in args.recall_caps.split(",")])
        return
    if args.corpus:
        caps = [int(c) for c in args.chunks.split(",")]
        corpus_throughput(args.model, args.corpus, caps, args.rounds, args.recall_notes, args.against)
        return

    import numpy as np

    from anamnesis.search.embed import load_embedder

    print(
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')} "
        f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')} cores={os.cpu_count()}"
    )
    figures: dict[str, float] = {}

    inner, whole = start_to_first_vector(args.model, args.starts)
    figures["start_first_vector_s"] = statistics.median(inner)
    figures["process_first_vector_s"] = statistics.median(whole)
    print(
        f"start -> first vector (import + load + one query)  median {statistics.median(inner):.3f} s"
        f"   (whole process, interpreter included: {statistics.median(whole):.3f} s; n={args.starts})"
    )

    embedder = load_embedder(args.model)
    print(f"blas: {blas_info()}")
    print(f"model: {embedder.fingerprint}")
    notes = make_notes(args.notes, 140)
    lengths = [len(e.ids) for e in embedder._tokenizer.encode_batch(notes, add_special_tokens=False)]
    embedder.embed(notes[:4])  # warm up
    started = time.perf_counter()
    vectors = embedder.embed(notes, batch_size=args.batch_size)
    took = time.perf_counter() - started
    assert vectors.shape == (len(notes), embedder.dim)
    figures["notes_per_s"] = len(notes) / took
    print(
        f"embed {len(notes)} notes (mean {statistics.mean(lengths):.0f} tokens, batch {args.batch_size})"
        f"   {took:.2f} s = {len(notes) / took:.1f} notes/s"
    )

    rng = random.Random(3)
    latencies = []
    for i in range(args.queries):
        query = QUERIES[i % len(QUERIES)] + ("" if i < len(QUERIES) else f" {rng.choice(WORDS)}")
        started = time.perf_counter()
        embedder.embed_query(query)
        latencies.append(time.perf_counter() - started)
    figures["query_p50_ms"] = statistics.median(latencies) * 1000
    figures["query_p95_ms"] = percentile(latencies, 95) * 1000
    print(
        f"one query ({args.queries} short queries)   p50 {figures['query_p50_ms']:.2f} ms"
        f"   p95 {figures['query_p95_ms']:.2f} ms"
    )

    if args.long:
        long_notes = make_notes(args.long, 540, seed=11)
        mean_tokens = statistics.mean(
            len(e.ids) for e in embedder._tokenizer.encode_batch(long_notes, add_special_tokens=False)
        )
        for chunks in (1, 4):
            model = load_embedder(args.model, max_chunks=chunks)
            started = time.perf_counter()
            model.embed(long_notes, batch_size=args.batch_size)
            took = time.perf_counter() - started
            figures[f"long_notes_per_s_x{chunks}"] = len(long_notes) / took
            print(
                f"embed {len(long_notes)} long notes (mean {mean_tokens:.0f} tokens), max_chunks={chunks}"
                f"   {took:.2f} s = {len(long_notes) / took:.1f} notes/s"
            )
    np.asarray(vectors)
    if args.json:
        print(json.dumps({k: round(v, 4) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
