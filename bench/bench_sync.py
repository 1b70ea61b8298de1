"""Sync speed (issue 3 targets). Run by hand:

    python bench/bench_sync.py [--notes 10000] [--runs 15]

Two machines (stores) and a bare hub on this host, file-path peers, a
10,000-note corpus. Measures whole `anamnesis sync` processes, start to exit:

- nothing to do                              target <= 300 ms
- bringing in 10 notes changed elsewhere     target <= 1 s
- the index update inside that sync          target <= 50 ms
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import build_store
from bench.stats import report, time_process


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "ANAMNESIS_HOME": str(home)}


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anamnesis", *args], env=_env(home), capture_output=True, text=True
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    from anamnesis.base.paths import open_store
    from anamnesis.store.operations import init_store
    from anamnesis.sync.engine import join, sync
    from anamnesis.sync.peers import add_peer

    root = Path(tempfile.mkdtemp(prefix="anamnesis-bench-sync-"))
    try:
        started = time.perf_counter()
        hub = root / "hub.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)
        a = open_store(build_store(root / "a", args.notes))
        add_peer(a, "hub", str(hub))
        sync(a)
        b = open_store(root / "b")
        init_store(b)
        join(b, str(hub), "hub")
        sync(b)
        print(f"setup: {args.notes} notes on two machines and a hub in {time.perf_counter() - started:.1f}s")
        assert len(list((b.memory).rglob("*.md"))) == args.notes

        command = [sys.executable, "-m", "anamnesis", "sync"]
        _cli(b.home, "sync")  # warm the page cache
        noop = time_process(command, args.runs, env={"ANAMNESIS_HOME": str(b.home)})
        report(f"sync, nothing to do, 1 file peer, {args.notes} notes (process)", noop, "target <= 300 ms")

        whole: list[float] = []
        index_part: list[float] = []
        inproc: list[float] = []
        notes = sorted(p for p in a.memory.rglob("*.md"))
        for run in range(args.runs):
            for path in notes[run * 10 : run * 10 + 10]:
                path.write_text(path.read_text(encoding="utf-8") + f"\nedited in run {run}\n", encoding="utf-8")
            sync(a)
            t = time.perf_counter()
            proc = _cli(b.home, "sync", "--json")
            whole.append(time.perf_counter() - t)
            if proc.returncode != 0:
                raise SystemExit(f"sync failed: {proc.stderr}")
            result = json.loads(proc.stdout)
            assert len(result["changed"]) == 10, result["changed"]
            index_part.append(result["index_seconds"])
            inproc.append(result["seconds"])
        report("sync bringing 10 changed notes, index included (process)", whole, "target <= 1 s")
        report("  of which inside sync() (no interpreter start-up)", inproc)
        report("  of which the index update", index_part, "target <= 50 ms")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
