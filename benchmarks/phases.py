"""Where the time of a whole check goes: facts, each check, and inside the training job.

Builds a lab cluster (root needed), runs ``preflight check`` with every check a few times
and prints the median seconds of each phase with its share of the run, from the same run.

    sudo .venv/bin/python benchmarks/phases.py --nodes 3 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lab import LabCluster
from tests.test_check_lab import check_argv

# The checks that share the training job; the first to run launches it.
JOB_CHECKS = ("compute", "intranode", "allreduce", "ddp")


def one_run(lab: LabCluster, workdir: Path) -> dict[str, Any]:
    report = workdir / "run.json"
    argv = check_argv(lab, lab.hosts_file(workdir / "hosts.txt"), report, "-q")
    run = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    data: dict[str, Any] = json.loads(report.read_text())
    if run.returncode != 0:
        raise SystemExit(f"the check did not pass (exit {run.returncode}): {run.stderr[-2000:]}")
    return data


def job_phases(data: dict[str, Any]) -> dict[str, float]:
    """The training job from inside: each phase's own seconds, and the rest (the start: what is
    left of DDP's imports, the join; the end), from the durations the job reported."""
    inside = {
        r["check"]: float(r["details"]["duration_s"])
        for r in data["results"]
        if r["check"] in JOB_CHECKS and r["details"].get("duration_s") is not None
    }
    job = sum(data["timings"].get(c, 0.0) for c in JOB_CHECKS)
    found = {f"  job: {name} phase": seconds for name, seconds in inside.items()}
    found["  job: start, end"] = job - sum(inside.values())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {}
    with LabCluster(args.nodes, env=Path(sys.prefix)) as lab, tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            data = one_run(lab, Path(tmp))
            phases = {**data["timings"], **job_phases(data), "total": data["duration_s"]}
            for name, seconds in phases.items():
                samples.setdefault(name, []).append(seconds)
    total = statistics.median(samples["total"])
    print(f"{args.nodes} lab nodes, {args.runs} runs of every check (median seconds)\n")
    print(f"{'phase':<22}{'seconds':>9}{'share':>8}")
    for name, values in samples.items():
        seconds = statistics.median(values)
        print(f"{name:<22}{seconds:>9.2f}{seconds / total:>8.0%}")


if __name__ == "__main__":
    main()
