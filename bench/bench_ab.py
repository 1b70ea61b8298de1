"""Before and after: `anamnesis search` of two checkouts, interleaved, on the same kind of store. By hand:

mkdir /tmp/before && git archive HEAD~3 anamnesis hooks templates | tar -x -C /tmp/before
mv /tmp/before/hooks /tmp/before/anamnesis/hooks              # where an installed package has them
python bench/bench_ab.py --before /tmp/before                 # 50,000 notes, 40 runs each
python bench/bench_ab.py --before /tmp/before --notes 10000 --watch
python bench/bench_ab.py --before /tmp/before --notes 10000 --startup   # --help and the hooks
python bench/bench_ab.py --before /tmp/before --notes 10000 --query "where is it kept up after the deploy"

With `--startup`, each round times, side by side, `--help`, the SessionStart
and UserPromptSubmit hooks exactly as `init` registers them (`python -P -m
anamnesis.hooks EVENT`, the event's JSON on stdin, run in a checkout of one
of the corpus projects) and `search`: what a package layout could make slower.

On a shared machine the speed of the whole host drifts by a fifth within
minutes, so two runs of `bench_speed.py` an hour apart do not say which code
is faster. Here each run of the "before" package is followed (or preceded,
turn about) by one of this checkout's, with the same query, so both see the
same machine. Each side searches its own copy of one corpus store (the two
may keep index.db in different schemas); with `--watch`, an `anamnesis
watch` of its own runs on each copy.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_speed import QUERIES, Timing, Watching, run_timed, store_for  # noqa: E402
from bench.stats import percentile  # noqa: E402


def side_env(source: Path, home: Path, base: Path) -> dict[str, str]:
    """What one side's processes add to the environment: its package first on the path, bytecode cached."""
    return {
        "PYTHONPATH": str(source),
        "PYTHONPYCACHEPREFIX": str(base / "pycache"),
        "ANAMNESIS_HOME": str(home),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--before", type=Path, required=True, help="a folder holding the other `anamnesis` package"
    )
    parser.add_argument("--notes", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=40, help="runs of each side")
    parser.add_argument("--watch", action="store_true", help="with `anamnesis watch` running on each store")
    parser.add_argument("--keep", type=Path, help="build the stores here and reuse them on later runs")
    parser.add_argument("--startup", action="store_true", help="time --help and the hooks, not only search")
    parser.add_argument(
        "--query", action="append", help="search for this instead of bench_speed's queries (repeatable)"
    )
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode is cached, as an installed package has it
    before = args.before.resolve()
    if not (before / "anamnesis" / "__init__.py").exists():
        raise SystemExit(f"{before} holds no anamnesis package")
    base = args.keep.resolve() if args.keep else Path(os.environ.get("TMPDIR", "/tmp")) / "anamnesis-bench-ab"
    base.mkdir(parents=True, exist_ok=True)
    sides = {"before": before, "after": ROOT}
    homes: dict[str, Path] = {}
    for name, source in sides.items():
        os.environ["PYTHONPATH"] = str(source)  # store_for reindexes with this side's package
        home = base / name / f"home{args.notes // 1000}k"
        if not home.exists():
            shutil.copytree(store_for(base, args.notes), home, symlinks=True)
        subprocess.run(
            [sys.executable, "-m", "anamnesis", "reindex"],
            env={**os.environ, **side_env(source, home, base)},
            cwd=source,
            check=True,
            capture_output=True,
        )
        homes[name] = home
    os.environ.pop("PYTHONPATH", None)
    if args.startup:
        if not (before / "anamnesis" / "hooks" / "__main__.py").exists():
            raise SystemExit(f"{before}/anamnesis/hooks is missing: move the archived hooks/ folder there")
        startup(sides, homes, base, args.runs, args.notes)
        return
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    results: dict[str, Timing] = {name: ([], []) for name in sides}
    queries = args.query or QUERIES
    watchers = [Watching(homes[name]) for name in sides] if args.watch else []
    here = Path.cwd()
    try:
        for watcher, source in zip(watchers, sides.values(), strict=False):
            os.environ["PYTHONPATH"] = str(source)
            os.chdir(source)  # `python -m` puts the working folder first on sys.path
            watcher.__enter__()
        os.environ.pop("PYTHONPATH", None)
        os.chdir(here)
        for run in range(args.runs + 1):
            order = list(sides) if run % 2 == 0 else list(reversed(sides))
            for name in order:
                run_timed(
                    [sys.executable, "-m", "anamnesis", "search", queries[run % len(queries)]],
                    side_env(sides[name], homes[name], base),
                    # the first round warms caches (and lets a watch vouch): not counted
                    results[name] if run else ([], []),
                    cwd=sides[name],
                )
    finally:
        for watcher in watchers:
            watcher.__exit__(None, None, None)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    label = f"`search`, {args.notes:,} notes" + (", watch running" if args.watch else "")
    for name, (walls, cpus) in results.items():
        print(
            f"{label:<42} {name:<7} p50 {percentile(walls, 50) * 1000:5.0f} ms, p95 {percentile(walls, 95) * 1000:5.0f} ms"
            f" (CPU p50 {percentile(cpus, 50) * 1000:4.0f} ms, n={len(walls)})"
        )


def startup(sides: dict[str, Path], homes: dict[str, Path], base: Path, runs: int, notes: int) -> None:
    """`--help`, the SessionStart and UserPromptSubmit hooks and `search` of both sides, run for run."""
    from bench.bench_hooks import PROMPTS, checkout

    project = base / "project"
    if not project.exists():
        project.mkdir()
        checkout(project)
    repo = project / "api"
    commands: dict[str, tuple[list[str], list[dict[str, object]]]] = {
        "`--help`": ([sys.executable, "-m", "anamnesis", "--help"], [{}]),
        "SessionStart hook": (
            [sys.executable, "-P", "-m", "anamnesis.hooks", "session-start"],
            [{"session_id": f"ab-{n}", "cwd": str(repo), "source": "startup"} for n in range(4)],
        ),
        "UserPromptSubmit hook": (
            [sys.executable, "-P", "-m", "anamnesis.hooks", "user-prompt-submit"],
            [{"session_id": f"ab-{n}", "cwd": str(repo), "prompt": prompt} for n, prompt in enumerate(PROMPTS)],
        ),
        f"`search`, {notes:,} notes": ([sys.executable, "-m", "anamnesis", "search", QUERIES[0]], [{}]),
    }
    times: dict[tuple[str, str], list[float]] = {(label, name): [] for label in commands for name in sides}
    cpus: dict[tuple[str, str], list[float]] = {key: [] for key in times}  # barely moves with the load
    printed: dict[tuple[str, str], int] = dict.fromkeys(times, 0)  # a hook that failed prints nothing, fast
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for run in range(runs + 1):
        order = list(sides) if run % 2 == 0 else list(reversed(sides))
        for label, (command, payloads) in commands.items():
            for name in order:
                payload = payloads[run % len(payloads)]
                used = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                proc = subprocess.run(
                    command,
                    input=json.dumps(payload) if payload else None,
                    env={**os.environ, **side_env(sides[name], homes[name], base)},
                    cwd=repo,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                if run:  # the first round warms caches: not counted
                    times[(label, name)].append(time.perf_counter() - started)
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpus[(label, name)].append(
                        after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime
                    )
                    printed[(label, name)] += bool(proc.stdout.strip())
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for label in commands:
        for name in sides:
            walls = times[(label, name)]
            print(
                f"{label:<28} {name:<7} p50 {percentile(walls, 50) * 1000:5.0f} ms,"
                f" p95 {percentile(walls, 95) * 1000:5.0f} ms, CPU p50 {percentile(cpus[(label, name)], 50) * 1000:4.0f} ms"
                f" (n={len(walls)}, {printed[(label, name)]} printed)"
            )


if __name__ == "__main__":
    main()
