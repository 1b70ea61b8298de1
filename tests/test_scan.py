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

from anamnesis.scan import scan_tree

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
import anamnesis.scan as scan
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
weights = {}
found = scan.scan_tree_split(sys.argv[1], scan.PARALLEL_FROM, lambda prefix: weights.get(prefix, 0))
print(json.dumps({"forks": len(forks), "found": {key: list(value) for key, value in found.items()}}))
"""


def _split(root: Path, mode: str = "") -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", SPLIT, str(root), mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


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


def test_the_split_scan_finds_exactly_what_the_plain_scan_finds(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _tree(root)
    expected = {key: list(value) for key, value in scan_tree(str(root)).items()}
    result = _split(root)
    assert result["forks"] == 1  # it did split
    assert result["found"] == expected


def test_a_child_that_fails_leaves_its_half_to_the_parent(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _tree(root)
    expected = {key: list(value) for key, value in scan_tree(str(root)).items()}
    result = _split(root, "child-fails")
    assert result["forks"] == 1
    assert result["found"] == expected


def test_a_small_store_or_a_threaded_process_is_scanned_in_place(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _tree(root)
    script = (
        "import os, sys, threading, time\n"
        "import anamnesis.scan as scan\n"
        "forks = []\n"
        "real = os.fork\n"
        "os.fork = lambda: forks.append(1) or real()\n"
        "scan.scan_tree_split(sys.argv[1], scan.PARALLEL_FROM - 1, lambda prefix: 0)\n"
        "stop = threading.Event()\n"
        "threading.Thread(target=stop.wait).start()\n"
        "scan.scan_tree_split(sys.argv[1], scan.PARALLEL_FROM, lambda prefix: 0)\n"
        "stop.set()\n"
        "print(len(forks))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(root)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"


REFRESH = """
import json, os, sys
import anamnesis.scan as scan
scan.PARALLEL_FROM = 0  # split even this small store
forks = []
real_fork = os.fork
os.fork = lambda: forks.append(1) or real_fork()
from anamnesis.index import open_index
from anamnesis.paths import open_store
from anamnesis.search import search
with open_index(open_store(sys.argv[1])) as index:
    report = index.refresh()
    hits = [hit.path for hit in search(index, "zebra")]
print(json.dumps({"report": report.to_dict(), "hits": hits, "forks": len(forks)}))
"""


def test_a_refresh_with_a_split_scan_sees_every_change(home: Path) -> None:
    from anamnesis.index import open_index
    from anamnesis.paths import open_store
    from anamnesis.store import create_note, init_store

    store = open_store(home)
    init_store(store)
    made = []
    for number in range(24):
        project = f"github.com/acme/p{number % 6}" if number % 4 else None
        note = create_note(
            store,
            type="semantic",
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
    proc = subprocess.run(
        [sys.executable, "-c", REFRESH, str(home)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["forks"] == 1
    report = result["report"]
    assert (report["added"], report["updated"], report["removed"]) == (1, 1, 1)
    assert report["unchanged"] == 22
    assert sorted(result["hits"]) == sorted([made[3].path, "projects/new-folder/facts/added.md"])
