"""The stat scan of memory/: the split scan (a forked child takes half) finds exactly what the plain one does.

The split runs in a fresh `python -c` process, since a test worker may run
other threads (and then the scan rightly refuses to fork); it counts the
forks it makes, so a split that silently fell back to the plain scan fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anamnesis.search.scan import scan_tree

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the split scan forks on Linux only")


def _tree(root: Path) -> None:
    """Nested folders (more than the split needs), top-level notes, and everything a scan must skip or tell apart."""
    root.mkdir()
    (root / "top.md").write_text("top")
    for project in range(6):
        for kind in ("facts", "howto", "sessions"):
            folder = root / "projects" / f"p{project}" / kind
            folder.mkdir(parents=True)
            for number in range(project * 3 + 1):
                (folder / f"n{number}.md").write_text("x" * number)
    deep = root / "global" / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "deep.md").write_text("deep")
    (root / "global" / "folder.md").mkdir()  # a folder with a note's name is walked, not listed
    (root / "global" / "folder.md" / "inside.md").write_text("in")
    (root / ".git").mkdir()
    (root / ".git" / "hidden.md").write_text("no")
    (root / "global" / ".draft.md").write_text("no")
    (root / "global" / "notes.txt").write_text("no")
    (root / "global" / "link.md").symlink_to(root / "top.md")  # listed as a link (lstat), not followed
    (root / "global" / "linked-folder").symlink_to(root / "projects")  # never walked into
    (root / "projects" / "p0" / "facts" / "empty").mkdir()
    os.makedirs(os.fsencode(root / "global") + b"/bad-\xff-name", exist_ok=True)
    (Path(os.fsdecode(os.fsencode(root / "global") + b"/bad-\xff-name")) / "x.md").write_text("odd")


SPLIT = """
import json, marshal, os, sys
import anamnesis.search.scan as scan
forks = []
real_fork = os.fork
def counted():
    forks.append(1)
    return real_fork()
os.fork = counted
if sys.argv[2] == "child-fails":
    def broken(value):
        raise RuntimeError("the child cannot send")
    marshal.dumps = broken
rows = [tuple(row) for row in json.loads(sys.argv[3])]
def recorded(spans):
    return [row for row in rows if any(low <= row[0] and (high is None or row[0] < high) for low, high in spans)]
changes = scan.scan_changes(sys.argv[1], scan.PARALLEL_FROM, lambda prefix: 0, recorded)
changed = sorted([path, None if st is None else list(st)] for path, st in changes.changed)
print(json.dumps({"forks": len(forks), "unchanged": changes.unchanged, "changed": changed}))
"""


def _rows_and_expected(root: Path) -> tuple[list[list[object]], int, list[list[object]]]:
    """Rows as an index would hold them (some stale, one gone, some missing), and the changes they make."""
    found = scan_tree(str(root))
    rows: list[list[object]] = []
    expected: list[list[object]] = []
    unchanged = 0
    for number, (path, st) in enumerate(sorted(found.items())):
        if number % 7 == 0:
            expected.append([path, list(st)])  # not in the index yet: new
        elif number % 5 == 0:
            rows.append([path, st[0] + 1, st[1]])  # its size moved
            expected.append([path, list(st)])
        else:
            rows.append([path, st[0], st[1]])
            unchanged += 1
    for gone in ("projects/p3/facts/gone.md", "vanished/x.md", "top-gone.md"):
        rows.append([gone, 1, 1])
        expected.append([gone, None])
    return rows, unchanged, sorted(expected, key=lambda item: str(item[0]))


def _run(script: str, *args: str) -> dict[str, object]:
    """Run a script in a fresh process (a single thread, so the scan may fork) and read its JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def _split(root: Path, rows: list[list[object]], mode: str = "") -> dict[str, object]:
    return _run(SPLIT, str(root), mode, json.dumps(rows))


def test_the_plain_scan_lists_notes_and_skips_what_is_not_one(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _tree(root)
    found = scan_tree(str(root))
    assert "top.md" in found and "global/a/b/c/d/deep.md" in found
    assert "global/folder.md/inside.md" in found and "global/folder.md" not in found
    assert "global/link.md" in found and os.path.islink(root / "global" / "link.md")
    assert "global/bad-\ufffd-name/x.md" in found  # stored printable, reported by the index
    assert not [key for key in found if "hidden" in key or "draft" in key or key.endswith(".txt")]
    assert not [key for key in found if key.startswith("global/linked-folder/")]
    assert len(found) == 1 + sum(project * 3 + 1 for project in range(6)) * 3 + 4


def test_the_split_scan_finds_exactly_the_changes_the_plain_scan_finds(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _tree(root)
    rows, unchanged, expected = _rows_and_expected(root)
    assert unchanged > 20 and len(expected) > 10
    result = _split(root, rows)
    assert result["forks"] == 1  # it did split
    assert (result["unchanged"], result["changed"]) == (unchanged, expected)


def test_a_child_that_fails_leaves_its_half_to_the_parent(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _tree(root)
    rows, unchanged, expected = _rows_and_expected(root)
    result = _split(root, rows, "child-fails")
    assert result["forks"] == 1
    assert (result["unchanged"], result["changed"]) == (unchanged, expected)


def test_a_small_store_or_a_threaded_process_is_scanned_in_place(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _tree(root)
    script = (
        "import os, sys, threading, time\n"
        "import anamnesis.search.scan as scan\n"
        "forks = []\n"
        "real = os.fork\n"
        "os.fork = lambda: forks.append(1) or real()\n"
        "none = lambda spans: []\n"
        "scan.scan_changes(sys.argv[1], scan.PARALLEL_FROM - 1, lambda prefix: 0, none)\n"
        "stop = threading.Event()\n"
        "threading.Thread(target=stop.wait).start()\n"
        "scan.scan_changes(sys.argv[1], scan.PARALLEL_FROM, lambda prefix: 0, none)\n"
        "stop.set()\n"
        "print(json.dumps({'forks': len(forks)}))\n"
    )
    assert _run("import json\n" + script, str(root)) == {"forks": 0}


REFRESH = """
import json, os, sys
import anamnesis.search.scan as scan
scan.PARALLEL_FROM = 0  # split even this small store
forks = []
real_fork = os.fork
os.fork = lambda: forks.append(1) or real_fork()
from anamnesis.search.index import open_index
from anamnesis.base.paths import open_store
from anamnesis.search.engine import search
with open_index(open_store(sys.argv[1])) as index:
    report = index.refresh()
    hits = [hit.path for hit in search(index, "zebra")]
print(json.dumps({"report": report.to_dict(), "hits": hits, "forks": len(forks)}))
"""


def test_a_refresh_with_a_split_scan_sees_every_change(home: Path) -> None:
    from anamnesis.base.paths import open_store
    from anamnesis.search.index import open_index
    from anamnesis.store.operations import create_note, init_store

    store = open_store(home)
    init_store(store)
    made = []
    for number in range(30):  # enough folders to split: 12 projects, facts and how-tos
        project = f"github.com/acme/p{number % 12}" if number % 5 else None
        note = create_note(
            store,
            type="procedural" if number % 2 else "semantic",
            title=f"Note {number}",
            body=f"body {number}",
            project=project,
            commit=False,
        )
        made.append(note)
    with open_index(store) as index:
        index.refresh()
    changed, removed = store.memory / made[3].path, store.memory / made[10].path
    changed.write_text(changed.read_text(encoding="utf-8") + "\nzebra crossing\n", encoding="utf-8")
    os.utime(changed, ns=(10**18, 10**18))  # a date long past: not re-read for being recent
    removed.unlink()
    added = store.memory / "projects" / "new-folder" / "facts" / "added.md"
    added.parent.mkdir(parents=True)
    added.write_text("---\ntitle: Added\ntype: semantic\n---\nA zebra.\n", encoding="utf-8")
    result = _run(REFRESH, str(home))
    assert result["forks"] == 1
    report = result["report"]
    assert isinstance(report, dict)
    assert (report["added"], report["updated"], report["removed"]) == (1, 1, 1)
    assert report["unchanged"] == 28
    hits = result["hits"]
    assert isinstance(hits, list)
    assert sorted(hits) == sorted([made[3].path, "projects/new-folder/facts/added.md"])


def test_the_work_is_shared_evenly_even_when_one_project_holds_most_notes(tmp_path: Path) -> None:
    from anamnesis.search.scan import _frontier, _split

    root = tmp_path / "memory"
    sizes = {
        "projects/big/facts": 100,
        "projects/big/sessions": 100,
        "projects/big/howto": 50,
        "global/facts": 20,
    }
    sizes.update({f"projects/small{number}/facts": 10 for number in range(4)})
    for folder, count in sizes.items():
        (root / folder).mkdir(parents=True)
        for number in range(count):
            (root / folder / f"n{number}.md").write_text("x")
    paths = list(scan_tree(str(root)))
    total = len(paths)

    def weigh(prefix: str) -> int:
        return sum(path.startswith(prefix) for path in paths)

    found: dict[str, tuple[int, int, int]] = {}
    frontier = _frontier(str(root), total, weigh, found)
    mine, theirs = _split(frontier, len(found))
    assert mine and theirs
    mine_total = len(found) + sum(weigh(rel) for _folder, rel in mine)
    theirs_total = sum(weigh(rel) for _folder, rel in theirs)
    assert mine_total + theirs_total == total  # every note on exactly one side
    assert abs(mine_total - theirs_total) <= total * 0.2
    assert not [rel for _folder, rel in theirs if rel == "projects/big/"]  # the big project was opened up


READ_CURRENT = """
import json, os, sys
import anamnesis.search.scan as scan
scan.PARALLEL_FROM = 0  # split even this small store
forks = []
real_fork = os.fork
os.fork = lambda: forks.append(1) or real_fork()
from anamnesis.sync.freshness import read_current
from anamnesis.search.index import open_index
from anamnesis.base.paths import open_store
from anamnesis.search.engine import search
store = open_store(sys.argv[1])
reads = []
def read():
    reads.append(1)
    if sys.argv[2] == "fail":
        raise ValueError("the read failed")
    return [hit.path for hit in search(index, "zebra")]
with open_index(store) as index:
    try:
        hits, report = read_current(index, read)
        out = {"hits": hits, "changed": report.changed}
    except ValueError as exc:
        out = {"error": str(exc)}
    try:
        os.waitpid(-1, os.WNOHANG)
        out["children"] = "left behind"
    except ChildProcessError:
        out["children"] = "none"
print(json.dumps({**out, "reads": len(reads), "forks": len(forks)}))
"""


def _read_current(home: Path, mode: str = "") -> dict[str, object]:
    return _run(READ_CURRENT, str(home), mode)


def test_a_read_overlapping_the_scan_is_done_again_only_when_the_scan_found_a_change(home: Path) -> None:
    from anamnesis.base.paths import open_store
    from anamnesis.store.operations import create_note, init_store

    store = open_store(home)
    init_store(store)
    made = [
        create_note(
            store,
            type="procedural" if number % 2 else "semantic",
            title=f"Note {number}",
            body=f"body {number}",
            project=f"github.com/acme/p{number % 12}",
            commit=False,
        )
        for number in range(30)
    ]
    quiet = _read_current(home)
    assert (quiet["forks"], quiet["reads"], quiet["changed"], quiet["hits"]) == (1, 1, 0, [])
    edited = store.memory / made[7].path
    edited.write_text(edited.read_text(encoding="utf-8") + "\nA zebra crossing.\n", encoding="utf-8")
    busy = _read_current(home)
    assert (busy["reads"], busy["changed"], busy["hits"]) == (2, 1, [made[7].path])  # the second read saw it
    assert busy["children"] == "none"
    failed = _read_current(home, "fail")
    assert failed["error"] == "the read failed" and failed["forks"] == 1
    assert failed["children"] == "none"  # the child was waited for all the same
