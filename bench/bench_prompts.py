"""Prompt-time recall on a set written by someone else: notes and prompts as a developer writes them.

    python bench/bench_prompts.py                    # keyword only
    python bench/bench_prompts.py --model-dir DIR    # and with semantic search on
    python bench/bench_prompts.py --model-dir DIR -v # and each miss and each note shown beside the right one

The set (bench/prompts/tester.json) holds 40 notes over four projects (git checkouts with remotes,
made here) and a plain folder, and 80 prompts: 60 that one note answers, 20 that none does (small
talk, general questions). Each prompt goes through the UserPromptSubmit recall (`build_recall`, in
this process) from its checkout, in a fresh session. Reported: recall (the right note shown),
off-topic silence, and precision (of the notes shown for answerable prompts, the share that is the
right one: a second note shown beside it is noise the agent has to read past).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SET = ROOT / "bench" / "prompts" / "tester.json"


def run(mode: str, model_dir: str | None, verbose: bool, path: Path = SET) -> dict[str, float]:
    data = json.loads(path.read_text(encoding="utf-8"))
    tmp = Path(tempfile.mkdtemp(prefix="anamnesis-bench-prompts-"))
    os.environ["ANAMNESIS_HOME"] = str(tmp / "home")
    from anamnesis.agents.recall import build_recall
    from anamnesis.base.paths import open_store
    from anamnesis.search.semantic import enable_semantic, update_vectors
    from anamnesis.store.operations import create_note, init_store

    store = open_store(tmp / "home")
    init_store(store)
    folders = {}
    for checkout in data["checkouts"]:
        folder = tmp / "checkouts" / checkout["cwd"]
        folder.mkdir(parents=True)
        if checkout["remote"]:
            subprocess.run(["git", "init", "-q", str(folder)], check=True)
            subprocess.run(["git", "-C", str(folder), "remote", "add", "origin", checkout["remote"]], check=True)
        folders[checkout["cwd"]] = folder
    path_of = {}
    for note in data["notes"]:
        made = create_note(
            store, type=note["type"], title=note["title"], body=note["body"], project=note["project"], tags=note.get("tags") or []
        )
        path_of[note["title"]] = made.path
    if mode == "semantic":
        enable_semantic(store, Path(model_dir or ""))
        update_vectors(store)
    found = answerable = silent = unanswerable = right = shown = 0
    for prompt in data["prompts"]:
        _text, paths = build_recall(store, prompt["text"], session_id=uuid.uuid4().hex, cwd=str(folders[prompt["cwd"]]))
        if prompt["expected"] is None:
            unanswerable += 1
            silent += not paths
            if paths and verbose:
                print(f"  spoke: {prompt['text']!r} -> {paths}")
            continue
        answerable += 1
        gold = path_of[prompt["expected"]]
        found += gold in paths
        right += gold in paths
        shown += len(paths)
        if verbose and gold not in paths:
            print(f"  miss: {prompt['text']!r} -> {prompt['expected']!r} (shown: {paths})")
        elif verbose and len(paths) > 1:
            print(f"  beside: {prompt['text']!r} -> {[p for p in paths if p != gold]}")
    figures = {
        "recall": found / answerable,
        "off-topic silent": silent / unanswerable,
        "precision": right / max(1, shown),
        "notes per prompt": shown / answerable,
    }
    print(
        f"{mode}: right note shown {found}/{answerable} ({figures['recall']:.2f}), off-topic silent "
        f"{silent}/{unanswerable}, shown that are right {right}/{shown} ({figures['precision']:.2f})"
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", help="measure with semantic search on too (the model's folder)")
    parser.add_argument("-v", "--verbose", action="store_true", help="list the misses and the notes shown beside")
    parser.add_argument("--set", type=Path, default=SET, help=f"a set in the same form (default {SET.relative_to(ROOT)})")
    args = parser.parse_args()
    run("keyword", None, args.verbose, args.set)
    if args.model_dir:
        run("semantic", args.model_dir, args.verbose, args.set)


if __name__ == "__main__":
    main()
