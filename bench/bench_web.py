"""Dashboard speed at 2,000 and 10,000 notes: the pages people open every day, and the map. By hand:

python bench/bench_web.py                        # 2,000 and 10,000 notes, 10 loads of each page
python bench/bench_web.py --notes 2000 --runs 5

Needs Debian's chromium (/usr/bin/chromium) and the playwright Python package.
Pages are timed over HTTP against the real `anamnesis web` process (request to
last byte): overview, browse page 1 and a later page, search, and the note
with the most backlinks (the first load of a note page also builds the link
graph: reported on its own). "map first draw" is measured inside the page:
from navigation start to the end of the first full draw (page, /api/graph,
layout, drawing), as a user waits for it. Targets: the map of 2,000 notes in
1 s; every page in 250 ms.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.stats import report  # noqa: E402

MAP_TARGET_MS = 1000  # at 2,000 notes
PAGE_TARGET_MS = 250


def most_linked(store: object) -> tuple[str, int]:
    """The note with the most backlinks, and how many it has."""
    from anamnesis.search.index import open_index
    from anamnesis.store.links import LinkGraph, NoteKey

    with open_index(store) as index:  # type: ignore[arg-type]
        rows = index.conn.execute(
            "SELECT n.path, n.id, n.title, f.body FROM notes n JOIN fts f ON f.rowid = n.rowid"
        )
        graph = LinkGraph((NoteKey(p, i or "", t or ""), b or "") for p, i, t, b in rows)
    path = max(graph.backlinks, key=lambda p: (len(graph.backlinks[p]), p))
    return path, len(graph.backlinks[path])


def bench(notes: int, runs: int, chromium: str) -> list[str]:
    """Time every page of a store of `notes` notes; the lines over target."""
    import httpx
    from playwright.sync_api import sync_playwright
    from web_support import CHROMIUM_ARGS, dashboard, new_machine, seed_many

    over: list[str] = []
    with tempfile.TemporaryDirectory(prefix="anamnesis-bench-web-") as tmp:
        started = time.perf_counter()
        store = new_machine(Path(tmp) / "home", "bench-machine")
        seed_many(store, notes)
        print(f"\n== {notes:,} notes (store built in {time.perf_counter() - started:.1f} s)")
        note, backlinks = most_linked(store)
        later = max(2, notes // 100 // 2)  # a page in the middle of the listing
        with dashboard(store.home) as running:
            cookies = {f"anamnesis_{running.port}": running.token}
            with httpx.Client(base_url=running.base, cookies=cookies, timeout=120) as http:
                t0 = time.perf_counter()
                http.get("/note/" + note).raise_for_status()
                report(f"note page, first load (builds the link graph; {notes:,})", [time.perf_counter() - t0])
                pages = [
                    ("overview", "/"),
                    ("browse page 1", "/browse"),
                    (f"browse page {later}", f"/browse?page={later}"),
                    ("browse, filtered, page 2", "/browse?type=procedural&page=2"),
                    ("search", "/search?q=cache+deploy"),
                    (f"note with {backlinks} backlinks", "/note/" + note),
                ]
                for name, path in pages:
                    times = []
                    for _ in range(runs):
                        t0 = time.perf_counter()
                        http.get(path).raise_for_status()
                        times.append(time.perf_counter() - t0)
                    result = report(f"{name} ({notes:,} notes)", times, f"target < {PAGE_TARGET_MS} ms")
                    if result["median_ms"] > PAGE_TARGET_MS:
                        over.append(f"{name} at {notes:,} notes: median {result['median_ms']:.0f} ms")
            renders: list[float] = []
            layouts: list[float] = []
            with sync_playwright() as pw:
                chrome = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                try:
                    for _ in range(runs):
                        context = chrome.new_context(viewport={"width": 1280, "height": 800})
                        page = context.new_page()
                        page.goto(running.url)
                        page.goto(running.base + "/map")
                        page.wait_for_selector("html[data-map-ready]", state="attached", timeout=120_000)
                        info = page.evaluate("({r: window.anamnesisMap.renderMs, l: window.anamnesisMap.layoutMs})")
                        renders.append(info["r"] / 1000)
                        layouts.append(info["l"] / 1000)
                        context.close()
                finally:
                    chrome.close()
            report(f"map layout in the browser ({notes:,} notes)", layouts)
            target = f"target < {MAP_TARGET_MS} ms" if notes <= 2000 else "(no target)"
            result = report(f"map first draw, from navigation ({notes:,} notes)", renders, target)
            if notes <= 2000 and result["median_ms"] > MAP_TARGET_MS:
                over.append(f"map first draw at {notes:,} notes: median {result['median_ms']:.0f} ms")
    return over


def main() -> None:
    from web_support import chromium_path

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    chromium = chromium_path()
    if chromium is None:
        raise SystemExit("Chromium is not installed (Debian: apt install chromium)")
    over: list[str] = []
    for notes in args.notes:
        over += bench(notes, args.runs, chromium)
    if over:
        print("\nOVER TARGET:\n  " + "\n  ".join(over))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
