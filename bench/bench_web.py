"""Dashboard speed (issue 6 target: the memory map of 2,000 notes renders in under 2 s). By hand:

python bench/bench_web.py                 # 2,000 notes, 10 loads of the map
python bench/bench_web.py --notes 5000 --runs 5

Needs Debian's chromium (/usr/bin/chromium) and the playwright Python package.
"map render" is measured inside the page: from navigation start to the end of
the first full draw (page, /api/graph, layout, drawing), as a user waits for it.
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

TARGET_MS = 2000


def main() -> None:
    import httpx
    from playwright.sync_api import sync_playwright
    from web_support import CHROMIUM_ARGS, chromium_path, dashboard, new_machine, seed_many

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anamnesis-bench-web-") as tmp:
        started = time.perf_counter()
        store = new_machine(Path(tmp) / "home", "bench-machine")
        seed_many(store, args.notes)
        print(f"store of {args.notes} notes built in {time.perf_counter() - started:.1f} s")
        with dashboard(store.home) as running:
            cookies = {f"anamnesis_{running.port}": running.token}
            with httpx.Client(base_url=running.base, cookies=cookies, timeout=60) as http:
                for path in ("/", "/browse", "/search?q=cache", "/api/graph"):
                    times = []
                    for _ in range(args.runs):
                        t0 = time.perf_counter()
                        http.get(path).raise_for_status()
                        times.append(time.perf_counter() - t0)
                    report(f"GET {path} ({args.notes} notes)", times)
            renders: list[float] = []
            layouts: list[float] = []
            with sync_playwright() as pw:
                path = chromium_path()
                if path is None:
                    raise SystemExit("Chromium is not installed (Debian: apt install chromium)")
                chrome = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
                try:
                    for _ in range(args.runs):
                        context = chrome.new_context(viewport={"width": 1280, "height": 800})
                        page = context.new_page()
                        page.goto(running.url)
                        page.goto(running.base + "/map")
                        page.wait_for_selector("html[data-map-ready]", state="attached", timeout=60_000)
                        info = page.evaluate(
                            "({r: window.anamnesisMap.renderMs, l: window.anamnesisMap.layoutMs})"
                        )
                        renders.append(info["r"] / 1000)
                        layouts.append(info["l"] / 1000)
                        context.close()
                finally:
                    chrome.close()
            report(f"memory map layout in the browser ({args.notes} notes)", layouts)
            result = report(
                f"memory map render, navigation to first draw ({args.notes} notes)",
                renders,
                f"target < {TARGET_MS} ms",
            )
    if result["median_ms"] > TARGET_MS:
        print(f"OVER TARGET: median {result['median_ms']:.0f} ms > {TARGET_MS} ms")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
