"""What the controller's exit costs: ``preflight check`` ended as the ``preflight`` command ends it
(``preflight.cli.run``: once its threads are done, without the interpreter's teardown) beside the
same check ended by ``sys.exit`` (the teardown: every module and object freed), interleaved on the
same lab nodes (root needed). Both time the seconds from ``main``'s return (which each prints) to
the process's end, read on the one monotonic clock of the machine, and the whole run; medians,
and the median of the paired ratios of the whole runs.

    sudo .venv/bin/python benchmarks/exit_cost.py --nodes 3 --runs 10
    sudo .venv/bin/python benchmarks/exit_cost.py --check-args=
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lab import LabCluster
from tests.test_check_lab import check_argv

# The command line run with main() wrapped to print when it returned, then ended either way.
WRAPPED = (
    "import sys, time; from preflight import cli; real = cli.main\n"
    "def main(*args):\n"
    "    code = real(*args)\n"
    "    print('MAIN-RETURNED', time.monotonic(), file=sys.stderr, flush=True)\n"
    "    return code\n"
    "cli.main = main; sys.argv[0] = 'preflight'\n"
)
ENDS = {"fast": WRAPPED + "cli.run()\n", "torn": WRAPPED + "sys.exit(cli.main())\n"}


def timed(argv: list[str]) -> tuple[float, float]:
    """The whole run's seconds, and the seconds from main's return to the process's end."""
    started = time.monotonic()
    run = subprocess.run(argv, capture_output=True, text=True)
    ended = time.monotonic()
    if run.returncode != 0:
        raise SystemExit(f"the check did not pass (exit {run.returncode}): {run.stderr[-1500:]}")
    returned = next(
        float(line.split()[1]) for line in run.stderr.splitlines() if line.startswith("MAIN-RETURNED")
    )
    return ended - started, ended - returned


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--check-args", default="--quick", help="arguments for preflight check (--quick)")
    args = parser.parse_args()
    with LabCluster(args.nodes, env=Path(sys.prefix)) as lab, tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "run.json"
        argv = check_argv(lab, lab.hosts_file(Path(tmp) / "hosts.txt"), report, *shlex.split(args.check_args))
        commands = {
            name: [argv[0], "-c", end, *argv[3:]] for name, end in ENDS.items()
        }  # argv: python -m preflight
        timed(commands["fast"])  # warm the page cache and the packed scripts for both
        runs: dict[str, list[float]] = {"fast": [], "torn": []}
        exits: dict[str, list[float]] = {"fast": [], "torn": []}
        for round_ in range(args.runs):
            for name in ("fast", "torn") if round_ % 2 else ("torn", "fast"):
                whole, exit_s = timed(commands[name])
                runs[name].append(whole)
                exits[name].append(exit_s)
    print(f"{args.nodes} lab nodes, preflight check {args.check_args}, {args.runs} interleaved runs")
    for name, label in (("torn", "through the teardown"), ("fast", "without the teardown")):
        print(f"{label:<22} exit {_spread(exits[name], 3)} s   whole run {_spread(runs[name], 2)} s")
    paired = [f / t for f, t in zip(runs["fast"], runs["torn"], strict=True)]
    print(f"whole runs, the median of the paired ratios: {_spread(paired, 2)}")


def _spread(values: list[float], digits: int) -> str:
    """The median and the range."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


if __name__ == "__main__":
    main()
