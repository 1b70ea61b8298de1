"""`bench/bench_recall.py --baseline-013`: a recall set run against the published 0.1.3 package.

The comparison only means something if 0.1.3 sees the set as we do: every note indexed, a
query's project a filter, a superseded note hidden, ranks scored as ours are. The package is
the real one (scripts/test installs it into its own venv, named by ANAMNESIS_TEST_OLDPKG_PY),
asked through its MCP server by the official client. Missing package: a failure in CI, a skip
elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anamnesis.base.notes import parse_note

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "bench" / "recall" / "dev"


def old_python() -> str:
    python = os.environ.get("ANAMNESIS_TEST_OLDPKG_PY") or str(Path.home() / ".cache/anamnesis-test/oldpkg/bin/python")
    if not (Path(python).parent / "anamnesis").is_file():
        message = f"anamnesis-memory 0.1.3 is not installed at {python}; scripts/test installs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return python


def test_the_dev_set_runs_against_013_as_it_runs_against_ours(tmp_path: Path) -> None:
    outside = tmp_path / "outside-home"  # HOME of the bench itself: nothing may be written there
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "HOME": str(outside), "TMPDIR": str(scratch)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_recall.py"), "--set", "dev",
         "--baseline-013", old_python(), "--baseline-only", "--json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["sets"] == []  # --baseline-only: this checkout was not run
    (run,) = report["baseline_013"]
    assert run["mode"].startswith("0.1.3")

    notes = {}
    for path in (SET / "notes").rglob("*.md"):
        note = parse_note(path.read_text(encoding="utf-8"), path.relative_to(SET / "notes").as_posix())
        notes[note.id] = note
    replaced = {old for note in notes.values() for old in note.supersedes}
    queries = [json.loads(line) for line in (SET / "queries.jsonl").read_text().splitlines() if line.strip()]
    assert run["notes"] == len(notes) and run["queries"] == len(queries) == len(run["results"])

    for result in run["results"]:
        assert result["error"] is None, result
        assert set(result["ranked"]) <= set(notes), result  # our ids, read back from 0.1.3's store
        assert not set(result["ranked"]) & replaced, result  # our `supersedes`, honoured by 0.1.3
        if result["project"]:  # the query's project, passed to its tool as a filter
            assert {notes[i].project for i in result["ranked"]} <= {result["project"]}, result
        wanted = next((i for i, nid in enumerate(result["ranked"], 1) if nid in result["relevant"]), None)
        assert result["rank"] == wanted  # scored as ours are
    preference = [r for r in run["results"] if any(notes[i].type == "preference" for i in r["relevant"])]
    assert any(r["rank"] for r in preference)  # preference notes, written as 0.1.3's semantic, are found
    exact = run["metrics"]["exact"]
    assert exact["n"] > 0 and exact["r@5"] >= 0.9  # a real keyword search, not an empty answer
    assert run["metrics"]["all"]["errors"] == 0
    assert not outside.exists() and list(scratch.iterdir()) == []  # its store and HOME were temporary
