"""Index and CLI speed (issue 2 and issue 12 targets). Run by hand:

python bench/bench_index.py            # 10,000 notes
python bench/bench_index.py --big      # also 100,000 notes (build time and peak memory)

`bench/bench_speed.py` prints issue 12's table (whole-process reindex, search
at 10,000 and 50,000 notes with and without watch, --help).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import build_store, generate
from bench.stats import report, time_process

QUERIES = (
    "parse_config",
    "pg_bouncer.pool_size",
    "src/app/main.py",
    "deploy rollback",
    "connection pool timeout",
    "RetryPolicy",
    "migration",
    "redis cache latency",
    "token",
    '"load balancer"',
    "webhook -payment",
    "metrics",
    "deploying",
    "worker concurrency",
    "certificate proxy",
)

BUILD_CHILD = """
import resource, sys, time
sys.path.insert(0, {root!r})
from anamnesis.base.paths import open_store
from anamnesis.search.index import open_index
store = open_store({home!r})
store.index_path.unlink(missing_ok=True)
t = time.perf_counter()
with open_index(store) as index:
    n = index.counts()["notes"]
print(time.perf_counter() - t, n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def build_in_child(home: Path) -> tuple[float, int, float]:
    """Full build in a fresh process: (seconds, notes, peak RSS in MB)."""
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", BUILD_CHILD.format(root=root, home=str(home))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]) / 1024


def bench_store(home: Path, count: int, runs: int) -> None:
    from anamnesis.base.paths import open_store
    from anamnesis.search.engine import search as search_notes
    from anamnesis.search.index import open_index

    builds = [build_in_child(home) for _ in range(runs)]
    report(
        f"full index build, {count:,} notes",
        [b[0] for b in builds],
        "target <= 2 s" if count <= 10_000 else "target <= 25 s",
    )
    print(f"{'':<58} notes indexed {builds[0][1]:,}, peak RSS {max(b[2] for b in builds):.0f} MB")
    if count > 10_000:
        return
    store = open_store(home)
    rng = random.Random(3)
    with open_index(store) as index:
        index.refresh()
        paths = sorted(p.relative_to(store.memory).as_posix() for p in store.memory.rglob("*.md"))
        samples, named = [], []
        for round_ in range(20):
            changed = rng.sample(paths, 10)
            for rel in changed:
                path = store.memory / rel
                path.write_text(path.read_text() + f"\nedit {round_} incrementalword{round_}\n")
            time.sleep(2.1)  # let the edits age past the index's same-second guard
            started = time.perf_counter()
            result = index.refresh()
            samples.append(time.perf_counter() - started)
            assert result.updated == 10, result
            for rel in changed:
                path = store.memory / rel
                path.write_text(path.read_text() + "\nagain\n")
            started = time.perf_counter()
            result = index.refresh(changed)
            named.append(time.perf_counter() - started)
            assert result.updated == 10, result
        report("incremental update, 10 changed notes of 10,000 (full scan)", samples, "target <= 50 ms")
        report("incremental update, 10 changed notes named (as sync does)", named, "target <= 50 ms")
        searches = []
        for _ in range(20):
            for query in QUERIES:
                started = time.perf_counter()
                search_notes(index, query, limit=10)
                searches.append(time.perf_counter() - started)
        report("search in process, 10,000 notes", searches, "target p50 <= 2 ms, p95 <= 10 ms")
    env = {"ANAMNESIS_HOME": str(home)}
    report(
        "`anamnesis search` whole process, 10,000 notes",
        time_process([sys.executable, "-m", "anamnesis", "search", "connection pool"], 20, env),
        "target p95 <= 200 ms",
    )
    report(
        "`anamnesis --help` whole process",
        time_process([sys.executable, "-m", "anamnesis", "--help"], 20, env),
        "target <= 120 ms",
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--big", action="store_true", help="also build and index 100,000 notes")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anamnesis-bench-") as tmp:
        home = Path(tmp) / "home10k"
        build_store(home, 10_000)
        bench_store(home, 10_000, args.runs)
        if args.big:
            big = Path(tmp) / "home100k"
            build_store(big, 0)
            generate(big / "memory", 100_000)
            bench_store(big, 100_000, 1)


if __name__ == "__main__":
    main()
