"""How long headless Chromium takes to open the HTML report of a 1,000-node run, and its size.

The run is the one ``tests/data/reports/make_synthetic.py`` builds (1,000 H100 nodes multiplied from
recorded data, a few culprits). Opens it ``--runs`` times from a file:// URL, each in a fresh
context, and prints the size and the median time to the page's load event.

    .venv/bin/python benchmarks/report_open.py --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reports import html
from tests.data.reports import make_synthetic

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    text = html.render(make_synthetic.build())
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "large_1000.html"
        path.write_text(text, encoding="utf-8")
        times = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for _ in range(args.runs):
                context = browser.new_context(viewport={"width": 1300, "height": 900})
                started = time.perf_counter()
                context.new_page().goto(path.as_uri(), wait_until="load")
                times.append(time.perf_counter() - started)
                context.close()
            browser.close()
    print(f"1,000-node report: {len(text.encode()) / 1e6:.2f} MB; opened in {statistics.median(times):.2f} s")
    print(f"(median of {args.runs}; every run: {', '.join(f'{t:.2f}' for t in times)} s)")


if __name__ == "__main__":
    main()
