"""How long a note written on machine A takes to be searchable on machine B, both running `watch`.

python bench/bench_propagation.py            # 10 runs, network namespaces when root, else the host network
python bench/bench_propagation.py --runs 20 --network host

A and B are two stores on this host with each other as peers (file paths,
so no ssh), each running `anamnesis watch` with its default settings. With
root and `ip netns`, each runs in its own network namespace joined by a veth
pair, so the LAN announcement that tells B to sync really crosses an
interface. Each run writes a new note file on A the way an editor saves it,
then runs `anamnesis search WORD` on B back to back until it finds the note;
the figure is from the write to the end of the first search that finds it.
Targets (issue 5): median <= 2 s, p95 <= 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from lan import Lan, netns_unavailable  # noqa: E402

from bench.stats import percentile, report  # noqa: E402

TARGET_MEDIAN_S, TARGET_P95_S = 2.0, 5.0


def env_for(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ANAMNESIS_HOME"] = str(home)
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    return env


def make_pair(root: Path) -> tuple[Path, Path]:
    """Stores a and b of one memory, each the other's peer, each announcing its memory path."""
    from anamnesis.base.paths import open_store
    from anamnesis.base.settings import load_settings, save_settings
    from anamnesis.store.operations import init_store
    from anamnesis.sync.engine import sync
    from anamnesis.sync.peers import add_peer

    homes = {}
    for name in ("a", "b"):
        home = root / name
        home.mkdir(parents=True)
        (home / "settings.json").write_text(json.dumps({"machine_id": f"bench-{name}"}))
        init_store(open_store(home))
        homes[name] = home
    a, b = open_store(homes["a"]), open_store(homes["b"])
    add_peer(a, "b", str(b.memory))
    add_peer(b, "a", str(a.memory))
    sync(a)
    sync(b)  # b takes a's history
    sync(a)
    for store in (a, b):
        settings = load_settings(store)
        settings["advertise_url"] = str(store.memory)
        save_settings(store, settings)
    return homes["a"], homes["b"]


def start_watch(home: Path, prefix: list[str]) -> subprocess.Popen[bytes]:
    log = open(home / "watch.out", "ab")  # noqa: SIM115 - the child keeps it
    return subprocess.Popen(
        [*prefix, sys.executable, "-m", "anamnesis", "watch"],
        cwd=ROOT,
        env=env_for(home),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def heartbeat(home: Path) -> dict[str, object]:
    try:
        data = json.loads((home / "state" / "watch.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def searchable(home: Path, word: str) -> bool:
    proc = subprocess.run(
        [sys.executable, "-m", "anamnesis", "search", word, "--json"],
        cwd=ROOT,
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode == 0 and bool(json.loads(proc.stdout or "[]"))


def one_run(a: Path, b: Path, timeout: float) -> float:
    word = "x" + uuid.uuid4().hex[:12]
    path = a / "memory" / "global" / "facts" / f"bench-{word}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f"---\ntype: semantic\ntitle: Propagation {word}\n---\nRemember {word}.\n"
    started = time.perf_counter()
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # an editor's atomic save
    while time.perf_counter() - started < timeout:
        if searchable(b, word):
            return time.perf_counter() - started
    raise SystemExit(f"run timed out: B never found {word} within {timeout}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--network", choices=("auto", "netns", "host"), default="auto")
    parser.add_argument("--timeout", type=float, default=30.0, help="give up on a run after this many seconds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()

    reason = netns_unavailable()
    use_netns = args.network == "netns" or (args.network == "auto" and reason is None)
    if use_netns and reason is not None:
        raise SystemExit(f"cannot use network namespaces: {reason}")
    network = Lan(netns=use_netns)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="anamnesis-bench-propagation-") as tmp:
        try:
            network.setup()
            a, b = make_pair(Path(tmp))
            procs = [start_watch(a, network.prefix("a")), start_watch(b, network.prefix("b"))]
            wait(
                lambda: "bench-b" in (heartbeat(a).get("peers_seen") or {})  # type: ignore[operator]
                and "bench-a" in (heartbeat(b).get("peers_seen") or {}),  # type: ignore[operator]
                30,
                "the two watchers to see each other on the LAN",
            )
            print(f"network: {'two network namespaces joined by a veth pair' if use_netns else 'host network'}")
            samples = []
            for i in range(args.runs):
                seconds = one_run(a, b, args.timeout)
                samples.append(seconds)
                print(f"  run {i + 1:2}: {seconds * 1000:7.0f} ms")
                time.sleep(1.0)  # let both sides settle (b's own follow-up sync) before the next note
            figures = report(
                "note written on A -> `anamnesis search` on B finds it",
                samples,
                f"(target: median <= {TARGET_MEDIAN_S * 1000:.0f} ms, p95 <= {TARGET_P95_S * 1000:.0f} ms)",
            )
            if args.json:
                print(json.dumps({**figures, "samples_ms": [round(s * 1000, 1) for s in samples]}))
            ok = sorted(samples)[len(samples) // 2] <= TARGET_MEDIAN_S and percentile(samples, 95) <= TARGET_P95_S
            if not ok:
                print("target missed")
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            network.cleanup()


if __name__ == "__main__":
    main()
