"""Claude Code hook and MCP server speed, whole process as Claude Code runs it. By hand:

python bench/bench_hooks.py              # 10,000-note store, 5 MB transcripts
python bench/bench_hooks.py --runs 40
python bench/bench_hooks.py --only mcp   # just the MCP server start (no store to build)
python bench/bench_hooks.py --only summary   # SessionEnd with the model summary off and on
python bench/bench_hooks.py --only semantic --model-dir DIR
    # SessionStart, UserPromptSubmit and `search` with semantic search off, on with no query
    # server, and on with one (what `watch` or `semantic serve` runs), interleaved run for run

SessionEnd is also timed with the opt-in model summary off and on, runs
interleaved: on, it must only add the cost of starting the summary detached
(the model's answer arrives later, untimed).

Each hook figure is the wall time of the hook command exactly as `anamnesis
init` registers it (run through `sh -c`, in the project folder), from start
to exit, with the event JSON on stdin. The MCP figure is the time from
starting the server as registered to the answer of `tools/list` (the
official client: initialize, then list), next to the same for the smallest
server the SDK can make (one tool), which is the floor for any server built
on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
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

TARGET_MS = {"session-start": 150, "user-prompt-submit": 150, "pre-compact": 500, "session-end": 500}
# The smallest server the official SDK makes: what starting any server built on it costs at least.
SDK_FLOOR_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer(name="floor")


@server.tool()
def ping(text: str) -> str:
    return text


server.run("stdio")
"""
PROMPTS = (
    "why does the connection pool timeout under load in the worker?",
    "how do we deploy a rollback of the billing service",
    "rename this variable please",
    "what is our retry policy for webhook handlers and the payment endpoint",
    "fix the flaky test in tests/test_api.py",
)


def time_hook(
    home: Path, event: str, payloads: list[dict[str, object]], runs: int, cwd: Path
) -> tuple[list[float], list[str]]:
    """Wall times of `runs` hook processes (cycling through payloads) and their outputs.

    The command is the one `anamnesis init` registers, run through a shell in the project
    folder with $CLAUDE_PROJECT_DIR set, as Claude Code runs it."""
    from anamnesis.agents.claude import hook_command, python_path

    command = hook_command(python_path(), event, str(home))
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(cwd)}
    env.pop("ANAMNESIS_HOME", None)  # the registered command names the store itself
    times: list[float] = []
    outputs: list[str] = []
    for i in range(runs):
        stdin = json.dumps(payloads[i % len(payloads)])
        started = time.perf_counter()
        proc = subprocess.run(
            ["sh", "-c", command], input=stdin, capture_output=True, text=True, env=env, cwd=cwd
        )
        times.append(time.perf_counter() - started)
        outputs.append(proc.stdout)
    return times, outputs


def time_mcp_start(command: str, args: list[str], env: dict[str, str], cwd: Path, runs: int) -> list[float]:
    """Seconds from starting an MCP server to the answer of its `tools/list`, over `runs` starts."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(cwd))

    async def once() -> float:
        with open(os.devnull, "w") as errlog:
            started = time.perf_counter()
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = (await session.list_tools()).tools
                took = time.perf_counter() - started
                if not tools:
                    raise SystemExit(f"{command} {args}: the server lists no tools")
                return took

    return [asyncio.run(asyncio.wait_for(once(), timeout=60)) for _ in range(runs)]


def bench_mcp(home: Path, cwd: Path, runs: int) -> None:
    """The MCP server's start to `tools/list`, as registered, against the SDK's own floor."""
    from anamnesis.agents.claude import python_path, server_entry

    entry = server_entry(python_path(), str(home))
    env = {**os.environ, **entry["env"]}
    floor_script = cwd.parent / "sdk_floor_server.py"
    floor_script.write_text(SDK_FLOOR_SERVER)
    floor = time_mcp_start(sys.executable, [str(floor_script)], dict(os.environ), cwd, runs)
    ours = time_mcp_start(entry["command"], list(entry["args"]), env, cwd, runs)
    report("MCP start to tools/list: the SDK's one-tool server (floor)", floor)
    report(f"MCP start to tools/list: {' '.join(['python', *entry['args']])}", ours)


def bench_summary(home: Path, folder: Path, repo: Path, runs: int, megabytes: float) -> None:
    """SessionEnd with the opt-in model summary off and on, interleaved so both see the same load.

    On, the "api" provider talks to a local Messages API stand-in that takes a
    second to answer; the hook only starts the summary detached. After each
    run with it on, the bench waits (untimed) for the summary to land, so the
    detached work never overlaps a timed hook."""
    from claude_standin import Reply, StandIn, text

    from anamnesis.agents import summarize_model
    from anamnesis.base.paths import open_store

    def slow_model(body: dict[str, object]) -> Reply:
        time.sleep(1.0)
        return text("**Done**\n- The handlers retry with backoff.")

    store = open_store(home)
    log = store.log_dir / "hooks.log"

    def logged(words: str) -> int:
        return log.read_text().count(words) if log.exists() else 0

    standin = StandIn(slow_model).start()
    os.environ["ANAMNESIS_BENCH_SUMMARY_KEY"] = "bench-not-a-key"  # the name is in settings, the value here
    times: dict[bool, list[float]] = {False: [], True: []}
    mb = 0.0
    try:
        for n in range(runs):
            for on in (False, True):
                if on:
                    summarize_model.enable(
                        store, "api", base_url=standin.url, key_env="ANAMNESIS_BENCH_SUMMARY_KEY"
                    )
                else:
                    summarize_model.disable(store)
                path = big_transcript(folder / f"summary-{n}-{on}.jsonl", repo, megabytes)
                mb = path.stat().st_size / 1_000_000
                payload: dict[str, object] = {
                    "session_id": "x",
                    "transcript_path": str(path),
                    "cwd": str(repo),
                }
                done = logged("summary: ")
                took, _ = time_hook(home, "session-end", [payload], 1, repo)
                times[on] += took
                deadline = time.monotonic() + 180
                while on and logged("summary: ") == done:
                    if time.monotonic() > deadline:
                        raise SystemExit("a model summary never finished; see logs/hooks.log")
                    time.sleep(0.2)
    finally:
        summarize_model.disable(store)
        standin.stop()
    for on in (False, True):
        state = "on (started detached)" if on else "off (the default)"
        report(
            f"SessionEnd, {mb:.1f} MB, model summary {state}",
            times[on],
            f"target ≤ {TARGET_MS['session-end']} ms",
        )
    written = logged("summary: written")
    print(
        f"model summaries written later: {written}/{runs} ({len(standin.requests)} requests to the stand-in)"
    )
    if written != runs:
        raise SystemExit("some model summaries were not written; see logs/hooks.log")


SEMANTIC_STATES = ("off", "on, no server", "on, query server")
SEARCHES = (
    "connection pool timeout",
    "how do we roll back a failed deploy?",
    "RetryPolicy",
    "why is checkout slow for some users",
)


def fill_vectors(home: Path, model_dir: Path) -> int:
    """Turn semantic search on and give every note a vector, fast: random unit vectors
    written straight into the index under the model's fingerprint. A hook's time does
    not depend on the vectors' values, and embedding 10,000 notes takes minutes."""
    import numpy as np

    from anamnesis.base.paths import open_store
    from anamnesis.search.index import open_index
    from anamnesis.search.semantic import enable_semantic as enable
    from anamnesis.search.semantic import engine_for

    store = open_store(home)
    enable(store, model_dir)
    engine = engine_for(store)
    assert engine is not None
    rng = np.random.default_rng(5)
    with open_index(store) as index:
        rows = index.conn.execute("SELECT rowid, sha FROM notes").fetchall()
        matrix = rng.standard_normal((len(rows), 384)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        blobs = matrix.astype(np.float16)
        index.conn.execute("BEGIN IMMEDIATE")
        index.conn.executemany(
            "INSERT OR REPLACE INTO vectors(note, sha, model, vec) VALUES (?, ?, ?, ?)",
            [(rowid, sha, engine.fingerprint, blobs[i].tobytes()) for i, (rowid, sha) in enumerate(rows)],
        )
        index.bump_generation()
        index.conn.execute("COMMIT")
    return len(rows)


def timed_process(args: list[str], stdin: str, env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process, stdout) of one process run to its exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(args, input=stdin, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return wall, cpu, proc.stdout


def bench_semantic(home: Path, repo: Path, model_dir: Path, runs: int) -> None:
    """The hooks and `search` with semantic search off, on alone, and on with a query server.

    Interleaved: every round runs each state once, so the three see the same load. The
    query server is started in this process for its rounds (after it has answered once,
    untimed) and stopped after them, so a round 'on, no server' really has none."""
    from anamnesis.agents.claude import hook_command, python_path
    from anamnesis.base.paths import open_store
    from anamnesis.search.ranking import Filters
    from anamnesis.search.semantic import SERVE_MARKER, ask_server, engine_for, server_answering
    from anamnesis.search.semantic import disable_semantic as disable
    from anamnesis.search.semantic import enable_semantic as enable
    from anamnesis.search.semantic_server import QueryServer

    store = open_store(home)
    started = time.perf_counter()
    count = fill_vectors(home, model_dir)
    print(f"vectors for {count} notes written ({time.perf_counter() - started:.1f}s)")
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(repo)}
    env.pop("ANAMNESIS_HOME", None)
    search_env = {**os.environ, "ANAMNESIS_HOME": str(home)}
    jobs: dict[str, tuple[list[str], str, dict[str, str]]] = {}
    for event, label in (("session-start", "SessionStart"), ("user-prompt-submit", "UserPromptSubmit")):
        jobs[label] = (["sh", "-c", hook_command(python_path(), event, str(home))], "", env)
    jobs["search"] = ([sys.executable, "-m", "anamnesis", "search"], "", search_env)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    recalled: dict[str, int] = dict.fromkeys(SEMANTIC_STATES, 0)
    for n in range(runs):
        for state in SEMANTIC_STATES:
            server = None
            if state == "off":
                disable(store)
            else:
                enable(store, model_dir)
            if state == "on, query server":
                server = QueryServer(store)
                if not server.start():
                    raise SystemExit("the query server did not start (is a watch running on this store?)")
                engine = engine_for(store)
                assert engine is not None
                deadline = time.monotonic() + 120
                while ask_server(store, engine.fingerprint, "warm", Filters(), 1, None) is None:
                    if time.monotonic() > deadline:
                        raise SystemExit("the query server never answered")
                    time.sleep(0.1)
            try:
                for label, (args, _, job_env) in jobs.items():
                    if state == "on, no server":
                        # a hook starts a detached server when none answers (the first prompt of a
                        # session); this state times the hooks that pay for the model themselves
                        (store.state_dir / SERVE_MARKER).touch()
                        if server_answering(store):
                            raise SystemExit("a query server answers during a round that must have none")
                    if label == "search":
                        run_args, stdin = [*args, SEARCHES[n % len(SEARCHES)], "--limit", "10"], ""
                    elif label == "SessionStart":
                        run_args = args
                        stdin = json.dumps(
                            {"session_id": str(uuid.uuid4()), "cwd": str(repo), "source": "startup"}
                        )
                    else:
                        run_args = args
                        stdin = json.dumps(
                            {
                                "session_id": str(uuid.uuid4()),
                                "cwd": str(repo),
                                "prompt": PROMPTS[n % len(PROMPTS)],
                            }
                        )
                    wall, cpu, out = timed_process(run_args, stdin, job_env, repo)
                    times.setdefault((label, state), []).append((wall, cpu))
                    if label == "UserPromptSubmit" and out.strip():
                        recalled[state] += 1
            finally:
                if server is not None:
                    server.stop()
    print(f"load average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    for label in jobs:
        base = statistics.median(w for w, _ in times[(label, "off")])
        for state in SEMANTIC_STATES:
            walls = [w for w, _ in times[(label, state)]]
            cpu = statistics.median(c for _, c in times[(label, state)]) * 1000
            ratio = statistics.median(walls) / base
            report(f"{label}, semantic {state}", walls, f"x{ratio:.2f} of off; CPU {cpu:.0f} ms")
    print(
        "UserPromptSubmit runs that recalled notes: "
        + ", ".join(f"{k}: {v}/{runs}" for k, v in recalled.items())
    )


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
    parser.add_argument(
        "--only",
        choices=["hooks", "mcp", "summary", "semantic"],
        help="run only the hook, the MCP, the model-summary or the semantic-search figures",
    )
    parser.add_argument("--model-dir", type=Path, help="the model folder, for --only semantic")
    args = parser.parse_args()
    if args.only == "semantic" and not args.model_dir:
        parser.error("--only semantic needs --model-dir DIR")

    with tempfile.TemporaryDirectory(prefix="anamnesis-bench-hooks-") as tmp:
        folder = Path(tmp)
        home = folder / "home"
        if args.only == "mcp":
            build_store(home, 0)
            bench_mcp(home, checkout(folder), max(5, args.runs // 2))
            return
        if args.only == "summary":
            build_store(home, args.notes)
            bench_summary(home, folder, checkout(folder), max(5, args.runs // 2), args.transcript_mb)
            return
        started = time.perf_counter()
        build_store(home, args.notes)
        from anamnesis.base.paths import open_store
        from anamnesis.search.index import open_index

        store = open_store(home)
        with open_index(store) as index:
            index.refresh()
            notes = index.counts()["notes"]
        print(f"store: {notes} notes ({time.perf_counter() - started:.1f}s to build)")
        repo = checkout(folder)
        if args.only == "semantic":
            bench_semantic(home, repo, args.model_dir, args.runs)
            return

        # a few captured sessions of this project, so SessionStart has recent files and sessions
        from anamnesis.agents.capture import capture_session as capture

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
        cold, _ = time_hook(home, "session-start", start_payloads, 1, repo)
        print(
            f"(first SessionStart after building the store, cold caches: {cold[0] * 1000:.0f} ms; not counted)"
        )
        times, outputs = time_hook(home, "session-start", start_payloads, args.runs, repo)
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
        times, outputs = time_hook(home, "user-prompt-submit", prompt_payloads, args.runs, repo)
        hits = sum(1 for o in outputs if o)
        report(
            f"UserPromptSubmit hook ({hits}/{len(outputs)} runs recalled notes)",
            times,
            f"target ≤ {TARGET_MS['user-prompt-submit']} ms",
        )

        end_runs = max(5, args.runs // 2)
        mb = 0.0
        for event, label, extra in (
            ("pre-compact", "PreCompact", {"trigger": "auto", "custom_instructions": ""}),
            ("session-end", "SessionEnd", {"reason": "prompt_input_exit"}),
        ):
            payloads: list[dict[str, object]] = []
            for n in range(end_runs):
                path = big_transcript(folder / f"{event}-{n}.jsonl", repo, args.transcript_mb)
                mb = path.stat().st_size / 1_000_000
                payloads.append({"session_id": "x", "transcript_path": str(path), "cwd": str(repo), **extra})
            times, _ = time_hook(home, event, payloads, end_runs, repo)
            report(f"{label} capture of a {mb:.1f} MB transcript", times, f"target ≤ {TARGET_MS[event]} ms")
        log = (store.log_dir / "hooks.log").read_text()
        failed = [line for line in log.splitlines() if "FAILED" in line]
        created = sum(
            1 for line in log.splitlines() if re.search(r"(session-end|pre-compact): created", line)
        )
        print(f"session notes created: {created}/{2 * end_runs}; hook failures: {len(failed)}")
        if failed or created != 2 * end_runs:
            raise SystemExit("some hook runs did not do their job; see the log above")
        bench_summary(home, folder, repo, end_runs, args.transcript_mb)
        if args.only != "hooks":
            bench_mcp(home, repo, max(5, args.runs // 2))


if __name__ == "__main__":
    main()
