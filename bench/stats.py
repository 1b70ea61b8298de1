"""Timing helpers shared by the benchmarks: run something N times, report median and p95."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable


def percentile(values: list[float], pct: float) -> float:
    """The nearest-rank percentile of `values`."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def report(name: str, seconds: list[float], target: str = "") -> dict[str, float]:
    """Print one line: median and p95 in ms; return them."""
    med, p95 = statistics.median(seconds) * 1000, percentile(seconds, 95) * 1000
    print(f"{name:<58} median {med:9.1f} ms   p95 {p95:9.1f} ms   (n={len(seconds)}) {target}")
    return {"median_ms": med, "p95_ms": p95}


def time_call(func: Callable[[], object], runs: int) -> list[float]:
    """Wall time of `func()` over `runs` runs."""
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        func()
        out.append(time.perf_counter() - started)
    return out


def time_process(args: list[str], runs: int, env: dict[str, str] | None = None) -> list[float]:
    """Wall time of a whole process, start to exit, over `runs` runs."""
    full_env = {**os.environ, **(env or {})}
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(args, env=full_env, capture_output=True)
        out.append(time.perf_counter() - started)
        if proc.returncode not in (0, 1):
            sys.stderr.write(proc.stderr.decode(errors="replace"))
            raise SystemExit(f"{args} failed with {proc.returncode}")
    return out
