"""Prompt-time recall benchmark: what the agent sees without asking. Run by hand:

python bench/bench_inject.py                          # every set under bench/recall/, keyword only
python bench/bench_inject.py --model-dir DIR          # keyword and semantic, run for run
python bench/bench_inject.py --set dev --misses       # one set, and the prompts whose note was not shown
python bench/bench_inject.py --in-process             # faster: build_recall in this process, no timing
python bench/bench_inject.py --json > out.json

Each query of a recall set (see bench_recall.py for the format) is sent as a prompt to the
UserPromptSubmit hook exactly as Claude Code runs it (`python -P -m anamnesis.hooks
user-prompt-submit`, the event JSON on stdin), in a fresh session, from a git checkout whose
remote is the gold note's project (a plain folder for a global note). A prompt counts when the
hook's output names one of its relevant notes. The off-topic prompts below (small talk,
arithmetic, general knowledge, other people's code questions) must print nothing, each sent
from a checkout of every project of the set and from a plain folder. The hook's wall time is measured with semantic
search off and on, alternating prompt by prompt, so a drifting host does not decide which is
faster.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recall import (
    KINDS,
    RecallSet,
    Sandbox,
    available_sets,
    build_store,
    load_set,
)

RECALL = Path(__file__).resolve().parent / "recall"

# Prompts no note of any set bears on: the hook must stay silent for each.
OFF_TOPIC = (
    "good morning!",
    "thanks, that's all for today",
    "what is 17 times 23",
    "hi there, how are you doing?",
    "can you tell me a joke",
    "what's the capital of Australia?",
    "who wrote Pride and Prejudice",
    "translate 'good night' into French",
    "how many days are there in a leap year",
    "ok",
    "sounds good, go ahead",
    "what time zone is Tokyo in",
    "write a haiku about autumn leaves",
    "explain photosynthesis like I'm five",
    "what's the boiling point of water in fahrenheit",
    "recommend a good science fiction novel",
    "how tall is Mount Everest",
    "convert 5 miles to kilometres",
    "what is the square root of 144",
    "give me a synonym for happy",
    "what's the plural of cactus",
    "summarise the plot of Hamlet in two sentences",
    "how do I make a cup of green tea",
    "who painted the Mona Lisa",
    "what year did the first moon landing happen",
    "sort these numbers: 5, 3, 9, 1",
    "is a tomato a fruit or a vegetable",
    "how many legs does a spider have",
    "what does 'carpe diem' mean",
    "please wait a moment",
    "never mind, ignore my last message",
    "what's 2 to the power of 10",
    "name three primary colours",
    "how do you say thank you in Japanese",
    "what is the speed of light",
    "tell me a fun fact about octopuses",
    "what rhymes with orange",
    "how long should I boil an egg",
    "what's the difference between weather and climate",
    "spell 'necessary' backwards",
)

# Coding questions about nobody's project in particular (no note of any set is about them): a memory of
# one's own code should mostly stay quiet on these too. Reported apart: some brush a note's topic.
OFF_TOPIC_CODE = (
    "how do I reverse a string in JavaScript",
    "what's the difference between a list and a tuple in Python",
    "explain big O notation with an example",
    "write a function that checks whether a number is prime",
    "what does the yield keyword do",
    "how do I center a div with CSS",
    "what is a closure",
    "explain recursion to a beginner",
    "how do I read a CSV file with pandas",
    "what's the difference between let and const",
    "how do I undo my last git commit",
    "write a regex that matches an email address",
    "what is the difference between TCP and UDP",
    "how does a hash map work under the hood",
    "implement binary search in Go",
    "what's a monad, in plain words",
    "how do I sort a dictionary by value in Python",
    "convert this JSON to YAML for me",
    "what is dependency injection",
    "how do promises differ from callbacks in JavaScript",
    "explain the CAP theorem",
    "what's the time complexity of quicksort",
    "how do I make an HTTP request in Rust",
    "generate a random password of 16 characters",
    "what does SOLID stand for",
    "how do I write a unit test for a React component",
    "explain what a race condition is",
    "what is the difference between an abstract class and an interface in Java",
    "how do I parse command line arguments in C",
    "write fizzbuzz in Haskell",
)


@dataclass
class Shown:
    prompt: str
    kind: str
    gold: bool
    paths: list[str]
    seconds: float
    relevant: frozenset[str] = frozenset()


def checkout_for(root: Path, project: str | None) -> Path:
    """A folder the prompt is sent from: a git checkout of `project`, or a plain folder."""
    if project is None:
        folder = root / "no-project"
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    folder = root / project.replace("/", "_")
    if not folder.exists():
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
        subprocess.run(
            ["git", "-C", str(folder), "remote", "add", "origin", f"https://{project}.git"], check=True
        )
    return folder


def run_hook(box: Sandbox, prompt: str, cwd: Path) -> tuple[str, float]:
    """The hook's output for `prompt` in a fresh session, and its wall time."""
    event = {
        "session_id": uuid.uuid4().hex,
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
        "cwd": str(cwd),
        "transcript_path": str(cwd / "transcript.jsonl"),
    }
    started = time.perf_counter()
    proc = subprocess.run(
        [box.python, "-P", "-m", "anamnesis.hooks", "user-prompt-submit"],
        input=json.dumps(event),
        env=box.env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.stdout, time.perf_counter() - started


def in_process_hook(box: Sandbox) -> Any:
    """build_recall called in this process (no process start, no timing worth reading)."""
    os.environ.update(box.env())
    from anamnesis.agents.recall import build_recall
    from anamnesis.base.paths import open_store

    store = open_store(box.store)

    def run(prompt: str, cwd: Path) -> tuple[str, float]:
        started = time.perf_counter()
        text, _paths = build_recall(store, prompt, session_id=uuid.uuid4().hex, cwd=str(cwd))
        return text, time.perf_counter() - started

    return run


def shown_paths(output: str, rset: RecallSet) -> list[str]:
    return [note.id for note in rset.notes.values() if note.path in output]


def measure(box: Sandbox, rset: RecallSet, hook: Any, folders: Path) -> tuple[list[Shown], list[Shown]]:
    on_topic: list[Shown] = []
    for query in rset.queries:
        gold_projects = {rset.notes[r].project for r in query.relevant}
        project = query.project or (next(iter(gold_projects)) if len(gold_projects) == 1 else None)
        output, seconds = hook(query.q, checkout_for(folders, project))
        ids = shown_paths(output, rset)
        on_topic.append(
            Shown(query.q, query.kind, bool(set(ids) & set(query.relevant)), ids, seconds, frozenset(query.relevant))
        )
    # Every off-topic prompt is sent from a checkout of every project of the set and from a plain
    # folder the memory holds nothing of: a person asks about anything from wherever they are, and
    # some projects hold more notes.
    projects: list[str | None] = sorted({note.project for note in rset.notes.values() if note.project})
    off: list[Shown] = []
    for kind, prompts in (("off-topic", OFF_TOPIC), ("off-topic code", OFF_TOPIC_CODE)):
        for prompt in prompts:
            for project in [*projects, None]:
                output, seconds = hook(prompt, checkout_for(folders, project))
                shown = shown_paths(output, rset) or ([output] if output else [])
                off.append(Shown(f"{prompt} (from {project or 'a plain folder'})", kind, False, shown, seconds))
    return on_topic, off


def table(name: str, mode: str, on_topic: list[Shown], off: list[Shown]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for kind in (*KINDS, "all"):
        chosen = [s for s in on_topic if kind == "all" or s.kind == kind]
        if chosen:
            rows[kind] = {"n": len(chosen), "injected": sum(s.gold for s in chosen) / len(chosen)}
    # Of the notes shown for on-topic prompts, the share that is a gold note (a lower bound: a note
    # not labelled may bear on the prompt too), and how many a prompt gets.
    shown = sum(len(s.paths) for s in on_topic)
    rows["precision"] = {"share": sum(len(set(s.paths) & s.relevant) for s in on_topic) / max(1, shown)}
    rows["notes per prompt"] = {"mean": shown / max(1, len(on_topic))}
    for kind in ("off-topic", "off-topic code"):
        quiet = [not s.paths for s in off if s.kind == kind]
        rows[f"{kind} silent"] = {"n": len(quiet), "share": sum(quiet) / len(quiet)}
    seconds = [s.seconds for s in on_topic + off]
    rows["hook ms p50"] = statistics.median(seconds) * 1000
    rows["hook ms p95"] = sorted(seconds)[int(len(seconds) * 0.95) - 1] * 1000
    print(f"\nset {name} ({mode})")
    for kind, row in rows.items():
        if isinstance(row, dict) and "injected" in row:
            print(f"  {kind:<12} n={row['n']:>4}  gold injected {row['injected']:.2f}")
    for kind in ("off-topic", "off-topic code"):
        row = rows[f"{kind} silent"]
        print(f"  {kind + ' silent':<20} {row['share']:.2f} of {row['n']}")
    print(
        f"  shown that are gold  {rows['precision']['share']:.2f} ({rows['notes per prompt']['mean']:.2f} notes a prompt)"
    )
    print(f"  hook p50 {rows['hook ms p50']:.0f} ms, p95 {rows['hook ms p95']:.0f} ms")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", help="a set under bench/recall/ (default: all)")
    parser.add_argument("--model-dir", help="measure with semantic search on too (the model's folder)")
    parser.add_argument("--in-process", action="store_true", help="call build_recall here (fast, no timing)")
    parser.add_argument("--misses", action="store_true", help="list the prompts whose note was not shown")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    modes = [("keyword", None)] + ([("semantic", args.model_dir)] if args.model_dir else [])
    # with --json the tables go to stderr, so stdout is the JSON alone
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        measure_sets(args, modes, report)
    if args.json:
        print(json.dumps(report, indent=2))


def measure_sets(args: argparse.Namespace, modes: list[tuple[str, str | None]], report: dict[str, Any]) -> None:
    for name in args.set or available_sets():
        rset = load_set(RECALL / name)
        for mode, model_dir in modes:
            with tempfile.TemporaryDirectory(prefix="anamnesis-bench-inject-") as tmp:
                box = Sandbox(Path(tmp), sys.executable)
                build_store(box, rset, model_dir)
                hook = (
                    in_process_hook(box) if args.in_process else (lambda p, c, box=box: run_hook(box, p, c))
                )
                on_topic, off = measure(box, rset, hook, Path(tmp) / "checkouts")
                report[f"{name}/{mode}"] = table(name, mode, on_topic, off)
                if args.misses:
                    for shown in on_topic:
                        if not shown.gold:
                            print(
                                f"    miss [{shown.kind}] {shown.prompt}  (shown: {', '.join(shown.paths) or '-'})"
                            )
                    for shown in off:
                        if shown.paths:
                            print(f"    spoke on {shown.kind}: {shown.prompt}")
                shutil.rmtree(Path(tmp) / "checkouts", ignore_errors=True)


if __name__ == "__main__":
    main()
