"""The speed table of issue 12, whole processes as a user runs them. By hand:

python bench/bench_speed.py                    # 10,000 notes (and 50,000 for search)
python bench/bench_speed.py --no-big           # 10,000 notes only
python bench/bench_speed.py --keep DIR         # build the stores in DIR once, reuse them later

Every figure is a fresh `python -m anamnesis ...` process, start to exit:

- `reindex` on a store that has an index.db, and on one whose index.db was
  just deleted (the index must be built once, not twice: both take as long);
- `search QUERY` with the index current, cycling through realistic queries,
  at 10,000 and 50,000 notes: once with nothing else running (each search
  checks every file's size and mtime) and once with `anamnesis watch`
  running on the store (its fresh heartbeat lets a search skip that scan;
  the first search after watch starts still scans, and is not counted);
- `--help`.

The machine may be shared: the load average is printed with the table, each
figure is the median (p50) and p95 of `--runs` runs of wall time, and the
median CPU time (user + system) of the process is printed beside it, since
that barely moves with what else runs. Compiled bytecode
is cached (in the benchmark's folder, not the checkout) as an installed
package has it, whatever PYTHONDONTWRITEBYTECODE says; `--source DIR` times
another checkout's `anamnesis` package (say, the last commit's, for a before
and after).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.corpus import build_store  # noqa: E402
from bench.stats import percentile  # noqa: E402

QUERIES = (
    "connection pool timeout",
    "parse_config",
    "how do we roll back a failed deploy?",
    "RetryPolicy",
    "redis cache latency",
    "pg_bouncer.pool_size",
    "webhook -payment",
    "certificate proxy",
)
WATCH_WAIT = 30.0  # seconds to wait for a started watch to write its first heartbeat


def anamnesis(*args: str) -> list[str]:
    return [sys.executable, "-m", "anamnesis", *args]


def process_env(base: Path, source: Path | None) -> None:
    """Every process below: bytecode cached under `base`, `anamnesis` from `source` if given."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    if source is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))
        os.chdir(source)  # `python -m` puts the working folder first on sys.path: it must be that checkout


def store_for(base: Path, count: int) -> Path:
    """A store with `count` corpus notes under `base` (built once) and a current index."""
    home = base / f"home{count // 1000}k"
    if not (home / "memory" / ".git").exists():
        started = time.perf_counter()
        build_store(home, count)
        print(f"(built a store of {count:,} notes in {time.perf_counter() - started:.0f} s)", flush=True)
    subprocess.run(anamnesis("reindex"), env={**os.environ, "ANAMNESIS_HOME": str(home)}, check=True, capture_output=True)
    return home


Timing = tuple[list[float], list[float]]  # wall seconds, CPU seconds (user + system) per run


def run_timed(args: list[str], env: dict[str, str], out: Timing, cwd: Path | None = None) -> None:
    """Run one process to its end; add its wall time and the CPU time it used to `out`.

    CPU time barely moves with what else runs on the machine; wall time does.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(args, env={**os.environ, **env}, cwd=cwd, check=True, capture_output=True)
    out[0].append(time.perf_counter() - started)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out[1].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def time_help(runs: int) -> Timing:
    out: Timing = ([], [])
    for _ in range(runs):
        run_timed(anamnesis("--help"), {}, out)
    return out


def time_searches(home: Path, runs: int) -> Timing:
    out: Timing = ([], [])
    for i in range(runs):
        run_timed(anamnesis("search", QUERIES[i % len(QUERIES)]), {"ANAMNESIS_HOME": str(home)}, out)
    return out


def time_reindex(home: Path, runs: int, *, drop_index: bool) -> Timing:
    out: Timing = ([], [])
    for _ in range(runs):
        if drop_index:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{home}/index.db{suffix}").unlink(missing_ok=True)
        run_timed(anamnesis("reindex"), {"ANAMNESIS_HOME": str(home)}, out)
    return out


class Watching:
    """`anamnesis watch` running on a store for the duration of a `with` block."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Watching:
        beat = self.home / "state" / "watch.json"
        beat.unlink(missing_ok=True)
        env = {**os.environ, "ANAMNESIS_HOME": str(self.home)}
        self.proc = subprocess.Popen(
            anamnesis("watch", "--quiet", "--no-discovery"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + WATCH_WAIT
        while not beat.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"watch did not start: {self.proc.stderr.read().decode() if self.proc.stderr else ''}")
            time.sleep(0.2)
        time.sleep(1.0)  # let its first sync finish
        # the first reader after watch starts scans once (files may have changed before it ran)
        subprocess.run(anamnesis("search", "warm up"), env=env, capture_output=True, check=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def row(rows: list[tuple[str, str, str]], name: str, timing: Timing, goal: str) -> None:
    wall, cpu = timing
    med, p95 = sorted(wall)[len(wall) // 2] * 1000, percentile(wall, 95) * 1000
    cpu_med = sorted(cpu)[len(cpu) // 2] * 1000
    figure = f"p50 {med:5.0f} ms, p95 {p95:5.0f} ms (CPU p50 {cpu_med:5.0f} ms, n={len(wall)})"
    rows.append((name, figure, goal))
    print(f"{name:<44} {figure}   goal {goal}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="runs of each quick command (default 20)")
    parser.add_argument("--reindex-runs", type=int, default=5)
    parser.add_argument("--no-big", action="store_true", help="skip the 50,000-note store")
    parser.add_argument("--keep", type=Path, help="build the stores here and reuse them on later runs")
    parser.add_argument("--source", type=Path, help="a checkout whose `anamnesis` package to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anamnesis-bench-speed-") as tmp:
        base = args.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        process_env(base, args.source.resolve() if args.source else None)
        rows: list[tuple[str, str, str]] = []
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        small = store_for(base, 10_000)
        row(rows, "`--help`", time_help(args.runs), "<= 120 ms")
        row(rows, "`reindex`, 10,000 notes", time_reindex(small, args.reindex_runs, drop_index=False), "<= 2 s")
        row(rows, "`reindex`, 10,000 notes, no index.db", time_reindex(small, args.reindex_runs, drop_index=True), "as above (built once)")
        row(rows, "`search`, 10,000 notes", time_searches(small, args.runs), "p95 <= 200 ms")
        with Watching(small):
            row(rows, "`search`, 10,000 notes, watch running", time_searches(small, args.runs), "p95 <= 200 ms")
        if not args.no_big:
            big = store_for(base, 50_000)
            row(rows, "`search`, 50,000 notes", time_searches(big, args.runs), "p95 <= 300 ms")
            with Watching(big):
                row(rows, "`search`, 50,000 notes, watch running", time_searches(big, args.runs), "p95 <= 300 ms")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
        print("| figure | measured | goal |\n|---|---|---|")
        for name, figure, goal in rows:
            print(f"| {name} | {figure} | {goal} |")


if __name__ == "__main__":
    main()
