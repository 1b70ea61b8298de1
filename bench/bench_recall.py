"""Recall benchmark: labelled queries against labelled notes, scored as a user sees them. Run by hand:

python bench/bench_recall.py                      # every set under bench/recall/
python bench/bench_recall.py --set dev --misses   # one set, and the queries that missed the top 5
python bench/bench_recall.py --in-process         # faster: one process, typer's CliRunner
python bench/bench_recall.py --hybrid --model-dir DIR
python bench/bench_recall.py --json > out.json    # machine-readable, with every query's ranking
python bench/bench_recall.py --in-process --baseline-013 OLD/bin/python   # and the published 0.1.3, side by side

A set is a folder `bench/recall/<name>/` with `notes/` (laid out like a store's memory/
folder) and `queries.jsonl`, one object a line:

    {"q": "...", "kind": "exact|paraphrase|code|question|multi",
     "project": "github.com/acme/api" or null, "relevant": ["<note id>", ...]}

For each set the notes are copied into a fresh store in a temporary folder (HOME is
temporary too, so nothing outside it is touched), `anamnesis reindex` builds the
index, and every query runs `anamnesis search QUERY --json --limit 10 [--project P]`.
A query counts at k when any of its relevant notes is in the top k; MRR uses the
first relevant note's rank (0 when none is in the top 10). `old@1` is the share of
queries whose first result is a note that one of the relevant notes supersedes.

`--baseline-013` runs each set against the published anamnesis-memory 0.1.3 package
too (`OLD` is a venv that has it), through its MCP server's search tool, and scores it
the same way: see bench/baseline_013.py and docs/search.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.baseline_013 import MODE as BASELINE_MODE  # noqa: E402
from bench.baseline_013 import OldStore, command_for  # noqa: E402

RECALL = ROOT / "bench" / "recall"
KINDS = ("exact", "paraphrase", "code", "question", "multi")
TYPES = {"semantic": "facts", "procedural": "howto", "episodic": "sessions", "preference": "preferences"}
ID_RE = re.compile(r"^[0-9a-z]{10}$")
STAMP_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
LIMIT = 10
SearchFn = Callable[[str, str | None], list[dict[str, Any]]]


class SetError(Exception):
    """A labelled set is broken (missing ids, bad fields): fix the set, not the code."""


@dataclass
class NoteInfo:
    id: str
    title: str
    project: str | None
    path: str
    supersedes: str | None


@dataclass
class Query:
    line: int
    q: str
    kind: str
    project: str | None
    relevant: list[str]


@dataclass
class RecallSet:
    name: str
    folder: Path
    notes: dict[str, NoteInfo]
    queries: list[Query]
    warnings: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    query: Query
    ranked: list[str]  # note ids, best first
    rank: int | None  # 1-based rank of the first relevant note, None if not in the top LIMIT
    error: str | None
    seconds: float


# ---------------------------------------------------------------- loading and validation


def split_note(text: str) -> tuple[dict[str, Any] | None, str]:
    """A note's YAML front matter (None when there is none) and its body."""
    text = text.lstrip("\ufeff")
    if not text.startswith("---\n"):
        return None, text
    end = text.find("\n---\n", 4)
    if end < 0:
        return None, text
    data = yaml.safe_load(text[4:end])
    return (data if isinstance(data, dict) else None), text[end + 5 :]


def is_utc_stamp(value: object) -> bool:
    """'2026-03-01T09:00:00Z' quoted, or the datetime YAML makes of it unquoted."""
    if isinstance(value, dt.datetime):
        return value.utcoffset() == dt.timedelta(0)
    return isinstance(value, str) and bool(STAMP_RE.match(value))


def load_set(folder: Path) -> RecallSet:
    """Read and check a set; raise SetError listing every problem found."""
    errors: list[str] = []
    warnings: list[str] = []
    notes: dict[str, NoteInfo] = {}
    root = folder / "notes"
    if not root.is_dir():
        raise SetError(f"{folder}: no notes/ folder")
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        try:
            fm, _ = split_note(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            problem = " ".join(str(exc).split())
            errors.append(
                f"{rel}: front matter is not valid YAML (a title with ': ' needs quotes?): {problem}"
            )
            continue
        if fm is None:
            errors.append(f"{rel}: no front matter")
            continue
        nid, typ, project = str(fm.get("id", "")), fm.get("type"), fm.get("project")
        if not ID_RE.match(nid):
            errors.append(f"{rel}: id {nid!r} is not 10 characters of 0-9a-z")
        elif nid in notes:
            errors.append(f"{rel}: id {nid} also used by {notes[nid].path}")
        if not path.name.endswith(f"-{nid}.md"):
            errors.append(f"{rel}: file name does not end with -{nid}.md")
        if typ not in TYPES:
            errors.append(f"{rel}: type {typ!r} is not one of {', '.join(TYPES)}")
        if not isinstance(fm.get("title"), str) or not fm["title"].strip():
            errors.append(f"{rel}: no title")
        if not isinstance(fm.get("tags", []), list | str):  # a comma-separated string is accepted
            errors.append(f"{rel}: tags is neither a list nor a string")
        for key in ("created", "updated"):
            if not is_utc_stamp(fm.get(key)):
                errors.append(f"{rel}: {key} {fm.get(key)!r} is not UTC ISO 8601 (YYYY-MM-DDTHH:MM:SSZ)")
        if project is not None and not isinstance(project, str):
            errors.append(f"{rel}: project is not a string")
            project = None
        folder_ok = (
            rel.startswith(f"projects/{project.replace('/', '-')}/") if project else rel.startswith("global/")
        )
        if not folder_ok:
            errors.append(f"{rel}: not in the folder for project {project!r}")
        elif typ in TYPES and f"/{TYPES[typ]}/" not in f"/{rel}":
            warnings.append(f"{rel}: a {typ} note outside a {TYPES[typ]}/ folder")
        sup = fm.get("supersedes")
        notes[nid] = NoteInfo(nid, str(fm.get("title", "")), project, rel, str(sup) if sup else None)
    for note in notes.values():
        if note.supersedes is not None and (note.supersedes not in notes or note.supersedes == note.id):
            errors.append(f"{note.path}: supersedes {note.supersedes}, which is not a note of this set")
    replaced_by = {n.supersedes: n.id for n in notes.values() if n.supersedes}

    queries: list[Query] = []
    qfile = folder / "queries.jsonl"
    for number, raw in enumerate(qfile.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        where = f"queries.jsonl:{number}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            errors.append(f"{where}: not JSON: {exc}")
            continue
        q, kind, project, relevant = obj.get("q"), obj.get("kind"), obj.get("project"), obj.get("relevant")
        if not isinstance(q, str) or not q.strip():
            errors.append(f"{where}: no query text")
            continue
        if kind not in KINDS:
            errors.append(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
        if project is not None and (not isinstance(project, str) or not project):
            errors.append(f"{where}: project must be a key or null")
            project = None
        if not isinstance(relevant, list) or not relevant or not all(isinstance(r, str) for r in relevant):
            errors.append(f"{where}: relevant must be a non-empty list of note ids")
            continue
        for rid in relevant:
            if rid not in notes:
                errors.append(f"{where}: relevant id {rid} is not a note of this set ({q!r})")
                continue
            if rid in replaced_by:
                warnings.append(f"{where}: relevant {rid} is superseded by {replaced_by[rid]} ({q!r})")
            if project and notes[rid].project != project:
                warnings.append(
                    f"{where}: relevant {rid} is in {notes[rid].project or 'global'}, outside"
                    f" --project {project}, so it can never be found ({q!r})"
                )
        queries.append(Query(number, q, str(kind), project, list(relevant)))
    if not queries:
        errors.append("queries.jsonl has no queries")
    if errors:
        shown = "\n  ".join(errors[:50]) + (
            f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else ""
        )
        raise SetError(f"set {folder.name!r} is broken ({len(errors)} problems):\n  {shown}")
    return RecallSet(folder.name, folder, notes, queries, warnings)


def available_sets() -> list[str]:
    return sorted(p.parent.name for p in RECALL.glob("*/queries.jsonl"))


# ---------------------------------------------------------------- the store under test


@dataclass
class Sandbox:
    """A temporary HOME and ANAMNESIS_HOME, and how to run the CLI in them."""

    tmp: Path
    python: str

    @property
    def home(self) -> Path:
        return self.tmp / "home"

    @property
    def store(self) -> Path:
        return self.tmp / "anamnesis"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANAMNESIS_")}
        env.update(
            HOME=str(self.home),
            ANAMNESIS_HOME=str(self.store),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        )
        return env

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.python, "-m", "anamnesis", *args],
            env=self.env(),
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def must(self, *args: str, what: str = "") -> str:
        proc = self.cli(*args)
        if proc.returncode != 0:
            raise SystemExit(
                f"bench_recall: `anamnesis {' '.join(args)}` failed with exit code {proc.returncode}"
                f"{what}\n{proc.stderr.strip() or proc.stdout.strip()}"
            )
        return proc.stdout


def build_store(box: Sandbox, rset: RecallSet, model_dir: str | None) -> dict[str, Any]:
    """init --local-only, (semantic enable), copy the notes in, reindex; the reindex report."""
    box.home.mkdir(parents=True)
    box.must("init", "--local-only")
    if model_dir is not None:
        box.must(
            "semantic",
            "enable",
            "--model-dir",
            model_dir,
            what=" (hybrid mode needs `anamnesis semantic enable --model-dir DIR` to work)",
        )
    memory = box.store / "memory"
    shutil.copytree(rset.folder / "notes", memory, dirs_exist_ok=True)
    # Age the files past the index's "recently modified" window, so searches running in
    # parallel find a settled index instead of each re-reading fresh files.
    past = time.time() - 3600
    for path in memory.rglob("*.md"):
        os.utime(path, (past, past))
    report: dict[str, Any] = json.loads(box.must("reindex", "--json"))
    indexed = report.get("added", 0) + report.get("updated", 0) + report.get("unchanged", 0)
    if report.get("problems") or indexed != len(rset.notes):
        raise SystemExit(
            f"bench_recall: set {rset.name}: reindex indexed {indexed} of {len(rset.notes)} notes;"
            f" problems: {report.get('problems')}"
        )
    if model_dir is not None:
        # Hybrid results mean nothing if the notes were not embedded: search would quietly
        # rank by keywords alone. Insist on full coverage.
        status = json.loads(box.must("semantic", "status", "--json"))
        if (
            not status.get("active")
            or status.get("pending", 1) != 0
            or status.get("embedded") != len(rset.notes)
        ):
            raise SystemExit(
                f"bench_recall: set {rset.name}: semantic search is not fully on after reindex"
                f" (expected {len(rset.notes)} notes embedded): {status}"
            )
        report["semantic"] = status
    return report


def search_args(q: str, project: str | None) -> list[str]:
    args = ["search", "--json", "--limit", str(LIMIT)]
    if project:
        args += ["--project", project]
    return [*args, "--", q] if q.startswith("-") else [*args[:1], q, *args[1:]]


def subprocess_search(box: Sandbox) -> SearchFn:
    def run(q: str, project: str | None) -> list[dict[str, Any]]:
        proc = box.cli(*search_args(q, project))
        if proc.returncode != 0:
            raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[:300]}")
        hits: list[dict[str, Any]] = json.loads(proc.stdout)
        return hits

    return run


@contextmanager
def in_process(box: Sandbox) -> Iterator[SearchFn]:
    """Run searches through typer's CliRunner in this process, with the sandbox's environment."""
    sys.path.insert(0, str(ROOT))
    from typer.testing import CliRunner

    from anamnesis.cli import app

    runner = CliRunner()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    env = box.env()  # before the clear: it is this environment with the sandbox's paths
    os.environ.clear()
    os.environ.update(env)
    os.chdir(box.tmp)

    def run(q: str, project: str | None) -> list[dict[str, Any]]:
        result = runner.invoke(app, search_args(q, project), catch_exceptions=True)
        if result.exit_code != 0:
            detail = result.exception if result.exception else (result.stderr or result.stdout).strip()
            raise RuntimeError(f"exit {result.exit_code}: {str(detail)[:300]}")
        hits: list[dict[str, Any]] = json.loads(result.stdout)
        return hits

    try:
        yield run
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


# ---------------------------------------------------------------- running and scoring


def run_query(search: SearchFn, query: Query) -> Outcome:
    started = time.perf_counter()
    try:
        hits = search(query.q, query.project)
        ranked, error = [str(h.get("id")) for h in hits], None
    except (RuntimeError, json.JSONDecodeError, subprocess.TimeoutExpired) as exc:
        ranked, error = [], str(exc)
    elapsed = time.perf_counter() - started
    wanted = set(query.relevant)
    rank = next((i for i, nid in enumerate(ranked[:LIMIT], 1) if nid in wanted), None)
    return Outcome(query, ranked, rank, error, elapsed)


def score(outcomes: list[Outcome], rset: RecallSet) -> dict[str, float]:
    n = len(outcomes)
    if n == 0:
        return {"n": 0}

    def at(k: int) -> float:
        return sum(1 for o in outcomes if o.rank is not None and o.rank <= k) / n

    def stale_first(o: Outcome) -> bool:
        if not o.ranked:
            return False
        replaced = {rset.notes[r].supersedes for r in o.query.relevant}
        return o.ranked[0] in replaced

    return {
        "n": n,
        "r@1": at(1),
        "r@5": at(5),
        "r@10": at(10),
        "mrr": sum(1 / o.rank for o in outcomes if o.rank is not None) / n,
        "empty": sum(1 for o in outcomes if not o.ranked and o.error is None) / n,
        "old@1": sum(1 for o in outcomes if stale_first(o)) / n,
        "errors": sum(1 for o in outcomes if o.error is not None),
    }


def metrics(outcomes: list[Outcome], rset: RecallSet) -> dict[str, dict[str, float]]:
    rows = {kind: score([o for o in outcomes if o.query.kind == kind], rset) for kind in KINDS}
    rows["with project"] = score([o for o in outcomes if o.query.project], rset)
    rows["no project"] = score([o for o in outcomes if not o.query.project], rset)
    rows["all"] = score(outcomes, rset)
    return rows


def print_table(name: str, mode: str, rows: dict[str, dict[str, float]], seconds: list[float]) -> None:
    print(f"\nset {name} ({mode}); search median {statistics.median(seconds) * 1000:.0f} ms per query")
    head = f"{'':<14}{'n':>5}{'R@1':>8}{'R@5':>8}{'R@10':>8}{'MRR':>8}{'empty':>8}{'old@1':>8}{'errors':>8}"
    print(head)
    print("-" * len(head))
    for label, row in rows.items():
        if label in ("with project", "all"):
            print()
        if not row["n"]:
            print(f"{label:<14}{0:>5}")
            continue
        print(
            f"{label:<14}{row['n']:>5.0f}{row['r@1']:>8.3f}{row['r@5']:>8.3f}{row['r@10']:>8.3f}"
            f"{row['mrr']:>8.3f}{row['empty']:>8.3f}{row['old@1']:>8.3f}{row['errors']:>8.0f}"
        )


def print_misses(rset: RecallSet, outcomes: list[Outcome]) -> None:
    misses = [o for o in outcomes if o.rank is None or o.rank > 5]
    print(f"\n{len(misses)} of {len(outcomes)} queries missed the top 5 in set {rset.name}:")
    for o in misses:
        q = o.query
        scope = f" [--project {q.project}]" if q.project else ""
        found = f"relevant at rank {o.rank}" if o.rank else "relevant not in top 10"
        print(f"\n- {q.kind}: {q.q!r}{scope}  ({found}, {len(o.ranked)} results)")
        for rid in q.relevant:
            want = rset.notes[rid]
            print(f"    want {rid} {want.title!r} ({want.project or 'global'})")
        if o.error:
            print(f"    ERROR {o.error}")
        for i, nid in enumerate(o.ranked[:3], 1):
            got = rset.notes.get(nid)
            title = f"{got.title!r} ({got.project or 'global'})" if got else "(not a note of the set)"
            flag = (
                "  <- superseded by a wanted note"
                if any(rset.notes[r].supersedes == nid for r in q.relevant)
                else ""
            )
            print(f"    got  {i}. {nid} {title}{flag}")


def run_set(rset: RecallSet, args: argparse.Namespace) -> dict[str, Any]:
    """This checkout on one set: keyword, or hybrid with --hybrid."""
    mode = ("hybrid" if args.hybrid else "fts") + (", in process" if args.in_process else "")
    with tempfile.TemporaryDirectory(prefix=f"anamnesis-recall-{rset.name}-") as tmp:
        box = Sandbox(Path(tmp), args.python)
        built = build_store(box, rset, args.model_dir if args.hybrid else None)
        started = time.perf_counter()
        if args.in_process:
            with in_process(box) as search:
                outcomes = [run_query(search, q) for q in rset.queries]
        else:
            search = subprocess_search(box)
            with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
                outcomes = list(pool.map(lambda q: run_query(search, q), rset.queries))
        wall = time.perf_counter() - started
    return report(rset, mode, outcomes, wall, args, semantic=built.get("semantic"))


def run_baseline(rset: RecallSet, command: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The published 0.1.3 package on one set, through its MCP search tool (bench/baseline_013.py)."""
    with tempfile.TemporaryDirectory(prefix=f"anamnesis-recall-013-{rset.name}-") as tmp:
        old = OldStore(Path(tmp), command)
        notes = [
            split_note(p.read_text(encoding="utf-8")) for p in sorted((rset.folder / "notes").rglob("*.md"))
        ]
        indexed = old.build([(fm, body) for fm, body in notes if fm is not None])
        if indexed != len(rset.notes):
            raise SystemExit(
                f"bench_recall: set {rset.name}: 0.1.3 indexed {indexed} of {len(rset.notes)} notes"
            )
        started = time.perf_counter()
        with old.searching(LIMIT) as search:
            outcomes = [run_query(search, q) for q in rset.queries]
        wall = time.perf_counter() - started
    return report(rset, BASELINE_MODE, outcomes, wall, args)


def report(
    rset: RecallSet,
    mode: str,
    outcomes: list[Outcome],
    wall: float,
    args: argparse.Namespace,
    semantic: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Print one run's table (unless --json); its figures and rankings for --json."""
    rows = metrics(outcomes, rset)
    seconds = [o.seconds for o in outcomes]
    if not args.json:
        for warning in rset.warnings:
            print(f"warning: {rset.name}: {warning}", file=sys.stderr)
        print_table(rset.name, mode, rows, seconds)
        print(f"{len(rset.notes)} notes, {len(outcomes)} queries in {wall:.1f} s")
        errors = [o for o in outcomes if o.error]
        for o in errors[:5]:
            print(f"error: {o.query.q!r}: {o.error}", file=sys.stderr)
        if args.misses:
            print_misses(rset, outcomes)
    return {
        "set": rset.name,
        "mode": mode,
        "in_process": args.in_process,
        "notes": len(rset.notes),
        "queries": len(outcomes),
        "seconds": round(wall, 2),
        "median_query_ms": round(statistics.median(seconds) * 1000, 1),
        "warnings": rset.warnings,
        "semantic": semantic,
        "metrics": {k: {m: round(v, 4) for m, v in row.items()} for k, row in rows.items()},
        "results": [
            {
                "line": o.query.line,
                "q": o.query.q,
                "kind": o.query.kind,
                "project": o.query.project,
                "relevant": o.query.relevant,
                "rank": o.rank,
                "ranked": o.ranked[:LIMIT],
                "error": o.error,
            }
            for o in outcomes
        ],
    }


def print_versus(ours: dict[str, Any], old: dict[str, Any]) -> None:
    """One set's figures side by side: this checkout, then 0.1.3, and the difference."""
    print(f"\nset {ours['set']}: ours ({ours['mode']}) against {old['mode']}")
    head = f"{'':<14}{'n':>5}" + "".join(
        f"{m + ' ours':>11}{'0.1.3':>7}{'diff':>7}" for m in ("R@1", "R@5", "MRR")
    )
    print(head)
    print("-" * len(head))
    for label, mine in ours["metrics"].items():
        theirs = old["metrics"][label]
        if label in ("with project", "all"):
            print()
        if not mine["n"]:
            print(f"{label:<14}{0:>5}")
            continue
        cells = "".join(
            f"{mine[m]:>11.3f}{theirs[m]:>7.3f}{mine[m] - theirs[m]:>+7.3f}" for m in ("r@1", "r@5", "mrr")
        )
        print(f"{label:<14}{mine['n']:>5.0f}{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        metavar="NAME",
        help=f"a set under bench/recall/ (repeatable; default: all of {available_sets()})",
    )
    parser.add_argument("--hybrid", action="store_true", help="enable semantic search before indexing")
    parser.add_argument(
        "--model-dir", help="model folder for --hybrid (anamnesis semantic enable --model-dir)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--in-process", action="store_true", help="run the searches through typer's CliRunner in this process"
    )
    parser.add_argument("--misses", action="store_true", help="list the queries that missed the top 5")
    parser.add_argument("--workers", type=int, default=2, help="searches run in parallel (default 2)")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs `-m anamnesis`")
    parser.add_argument("--check", action="store_true", help="only validate the sets, run nothing")
    parser.add_argument(
        "--baseline-013",
        metavar="PYTHON_OR_BIN",
        help="also run the sets against the published anamnesis-memory 0.1.3 (its venv's bin/python or"
        " bin/anamnesis) through its MCP search tool, and print both side by side",
    )
    parser.add_argument(
        "--baseline-only", action="store_true", help="with --baseline-013: run only 0.1.3, not this checkout"
    )
    args = parser.parse_args()
    if args.baseline_only and not args.baseline_013:
        parser.error("--baseline-only needs --baseline-013 PYTHON_OR_BIN")
    if args.hybrid and not args.model_dir:
        parser.error("--hybrid needs --model-dir DIR")
    if args.model_dir and not args.hybrid:
        parser.error("--model-dir is only used with --hybrid")
    if args.hybrid:
        args.model_dir = str(Path(args.model_dir).resolve())

    names = args.sets or available_sets()
    if not names:
        raise SystemExit(f"bench_recall: no sets under {RECALL}")
    sets: list[RecallSet] = []
    for name in names:
        folder = RECALL / name
        if not (folder / "queries.jsonl").is_file():
            raise SystemExit(f"bench_recall: no set {name!r} (known: {', '.join(available_sets())})")
        try:
            sets.append(load_set(folder))
        except SetError as exc:
            raise SystemExit(f"bench_recall: {exc}") from None
    if args.check:
        for rset in sets:
            for warning in rset.warnings:
                print(f"warning: {rset.name}: {warning}")
            print(f"set {rset.name}: {len(rset.notes)} notes, {len(rset.queries)} queries, ok")
        return
    command = command_for(args.baseline_013) if args.baseline_013 else None
    reports: list[dict[str, Any]] = []
    baseline: list[dict[str, Any]] = []
    for rset in sets:
        if not args.baseline_only:
            reports.append(run_set(rset, args))
        if command is not None:
            baseline.append(run_baseline(rset, command, args))
            if reports and not args.json:
                print_versus(reports[-1], baseline[-1])
    if args.json:
        out: dict[str, Any] = {"limit": LIMIT, "sets": reports}
        if command is not None:
            out["baseline_013"] = baseline
        json.dump(out, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
