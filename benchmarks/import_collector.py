"""What the cyclic collector costs the node's host: torch and DDP's modules imported in fresh
interpreters, interleaved, as plain imports and as the host imports them
(``preflight.node.shared.import_quietly``: the collector paused, then what was imported frozen),
each followed by one full collection, as any later one in the host or a child forked from it.

Prints the median CPU seconds of each and their ratio. Needs torch; no root.

    .venv/bin/python benchmarks/import_collector.py --runs 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parent.parent / "preflight" / "node" / "shared.py"
MODULES = ("torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo")
PROBE = """
import gc, importlib, json, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {folder!r})
import shared
load = shared.import_quietly if {host} else importlib.import_module
started = time.process_time()
for name in {modules!r}:
    load(name)
imported = time.process_time()
gc.collect()
print(json.dumps({{"import": imported - started, "collect": time.process_time() - imported}}))
"""


def one(host: bool) -> dict[str, float]:
    code = PROBE.format(folder=str(SHARED.parent), host=host, modules=MODULES)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(run.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    plain: list[dict[str, float]] = []
    hosted: list[dict[str, float]] = []
    for _ in range(args.runs):
        plain.append(one(host=False))
        hosted.append(one(host=True))
    print(f"{', '.join(MODULES)}: {args.runs} interleaved runs (median CPU seconds)")
    print(f"{'':34}{'import':>8}{'full collection':>17}")
    rows = (("plain import", plain), ("collector paused, then frozen", hosted))
    for label, runs in rows:
        imported = statistics.median(r["import"] for r in runs)
        collected = statistics.median(r["collect"] for r in runs)
        print(f"{label:<34}{imported:>8.2f}{collected:>17.3f}")
    ratio = statistics.median(h["import"] / p["import"] for p, h in zip(plain, hosted, strict=True))
    print(f"{'paused / plain, median of pairs':<34}{ratio:>7.2f}x")


if __name__ == "__main__":
    main()
