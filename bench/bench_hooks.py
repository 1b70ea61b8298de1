"""Claude Code hook speed (issue 4 targets), whole process as Claude Code runs it. By hand:

python bench/bench_hooks.py              # 10,000-note store, 5 MB transcript
python bench/bench_hooks.py --runs 40

Each figure is the wall time of `python -m anamnesis.hooks EVENT` from start
to exit, with the event JSON on stdin, as Claude Code starts it.
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
sys.path.insert(0, str(ROOT / "tests"))

from bench.corpus import build_store  # noqa: E402
from bench.stats import report  # noqa: E402

TARGET_MS = {"session-start": 150, "user-prompt-submit": 150, "session-end": 500}
PROMPTS = (
    "why does the connection pool timeout under load in the worker?",
    "how do we deploy a rollback of the billing service",
    "rename this variable please",
    "what is our retry policy for webhook handlers and the payment endpoint",
    "fix the flaky test in tests/test_api.py",
)


def time_hook(
    home: Path, event: str, payloads: list[dict[str, object]], runs: int
) -> tuple[list[float], list[str]]:
    """Wall times of `runs` hook processes (cycling through payloads) and their outputs."""
    env = {**os.environ, "ANAMNESIS_HOME": str(home)}
    times: list[float] = []
    outputs: list[str] = []
    for i in range(runs):
        stdin = json.dumps(payloads[i % len(payloads)])
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "anamnesis.hooks", event],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
        )
        times.append(time.perf_counter() - started)
        outputs.append(proc.stdout)
    return times, outputs


def checkout(folder: Path) -> Path:
    """A project checkout whose key is one of the corpus projects, on a topic branch."""
    repo = folder / "api"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "feature/retry-policy", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:acme/api.git"], check=True
    )
    return repo


def big_transcript(path: Path, cwd: Path, megabytes: float) -> Path:
    """A realistic transcript of about `megabytes` MB: prompts, reads, edits, commands, replies."""
    from transcripts import Transcript

    t = Transcript(str(uuid.uuid4()), cwd=str(cwd), branch="feature/retry-policy")
    t.prompt("Refactor the retry policy of the webhook handlers and make the tests pass")
    i = 0
    while True:
        t.prompt(f"now step {i}: handle the error case in module {i}")
        t.tool("Read", {"file_path": f"{cwd}/src/mod_{i}.py"}, "def handler():\n    pass\n" * 400)
        t.edit_file(f"{cwd}/src/mod_{i % 40}.py", "pass", "return retry()")
        t.bash(f"pytest -q tests/test_mod_{i}.py", [{"type": "text", "text": "." * 2000 + "\n12 passed"}])
        t.say(f"Step {i} done: the handler retries with backoff now.")
        i += 1
        if i % 50 == 0 and len(t.text()) >= megabytes * 1_000_000:
            break
    return t.write(path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--transcript-mb", type=float, default=5.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="anamnesis-bench-hooks-") as tmp:
        folder = Path(tmp)
        home = folder / "home"
        started = time.perf_counter()
        build_store(home, args.notes)
        from anamnesis.index import open_index
        from anamnesis.paths import open_store

        store = open_store(home)
        with open_index(store) as index:
            index.refresh()
            notes = index.counts()["notes"]
        print(f"store: {notes} notes ({time.perf_counter() - started:.1f}s to build)")
        repo = checkout(folder)

        # a few captured sessions of this project, so SessionStart has recent files and sessions
        from anamnesis.capture import capture

        for n in range(3):
            small = big_transcript(folder / f"warm-{n}.jsonl", repo, 0.05)
            capture(store, small)

        start_payloads: list[dict[str, object]] = [
            {
                "session_id": str(uuid.uuid4()),
                "cwd": str(repo),
                "source": source,
                "hook_event_name": "SessionStart",
            }
            for source in ("startup", "resume", "clear", "compact")
        ]
        cold, _ = time_hook(home, "session-start", start_payloads, 1)
        print(f"(first SessionStart after building the store, cold caches: {cold[0] * 1000:.0f} ms; not counted)")
        times, outputs = time_hook(home, "session-start", start_payloads, args.runs)
        size = len(json.loads(outputs[0])["hookSpecificOutput"]["additionalContext"]) if outputs[0] else 0
        report(
            f"SessionStart hook ({size} chars injected)", times, f"target ≤ {TARGET_MS['session-start']} ms"
        )

        prompt_payloads: list[dict[str, object]] = [
            {
                "session_id": str(uuid.uuid4()),
                "cwd": str(repo),
                "prompt": p,
                "hook_event_name": "UserPromptSubmit",
            }
            for p in PROMPTS
        ]
        times, outputs = time_hook(home, "user-prompt-submit", prompt_payloads, args.runs)
        hits = sum(1 for o in outputs if o)
        report(
            f"UserPromptSubmit hook ({hits}/{len(outputs)} runs recalled notes)",
            times,
            f"target ≤ {TARGET_MS['user-prompt-submit']} ms",
        )

        end_runs = max(5, args.runs // 2)
        end_payloads: list[dict[str, object]] = []
        mb = 0.0
        for n in range(end_runs):
            path = big_transcript(folder / f"session-{n}.jsonl", repo, args.transcript_mb)
            mb = path.stat().st_size / 1_000_000
            end_payloads.append(
                {
                    "session_id": "x",
                    "transcript_path": str(path),
                    "cwd": str(repo),
                    "reason": "prompt_input_exit",
                }
            )
        times, _ = time_hook(home, "session-end", end_payloads, end_runs)
        report(
            f"SessionEnd capture of a {mb:.1f} MB transcript",
            times,
            f"target ≤ {TARGET_MS['session-end']} ms",
        )
        log = (store.log_dir / "hooks.log").read_text()
        failed = [line for line in log.splitlines() if "FAILED" in line]
        created = sum(1 for line in log.splitlines() if "session-end: created" in line)
        print(f"session notes created: {created}/{end_runs}; hook failures: {len(failed)}")
        if failed or created != end_runs:
            raise SystemExit("some hook runs did not do their job; see the log above")


if __name__ == "__main__":
    main()
