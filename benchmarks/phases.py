"""Where the time of a whole check goes: the controller's own start and end, connecting, the
facts, each check, and inside the training job.

Builds a lab cluster (root needed), runs ``preflight check`` with every check (or as
``--check-args`` says) a few times and prints the median seconds of each phase with its share
of the whole command, from the same runs.

    sudo .venv/bin/python benchmarks/phases.py --nodes 3 --runs 3
    sudo .venv/bin/python benchmarks/phases.py --check-args=--quick --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checks.job.phases import JOB_PHASES
from tests.lab import LabCluster
from tests.test_check_lab import check_argv


def one_run(lab: LabCluster, workdir: Path, extra: list[str]) -> tuple[dict[str, Any], float]:
    """The run's JSON report, and the seconds the whole command took."""
    report = workdir / "run.json"
    argv = check_argv(lab, lab.hosts_file(workdir / "hosts.txt"), report, "-q", *extra)
    started = time.monotonic()
    run = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    elapsed = time.monotonic() - started
    data: dict[str, Any] = json.loads(report.read_text())
    if run.returncode != 0:
        raise SystemExit(f"the check did not pass (exit {run.returncode}): {run.stderr[-2000:]}")
    return data, elapsed


def facts_phases(data: dict[str, Any]) -> dict[str, float]:
    """The facts phase from the hosts' side: the slowest host's connect and its probe."""
    connections = [h["facts"]["connection"] for h in data["hosts"] if h.get("facts")]
    return {
        "  facts: connect": max(float(c["connect_s"]) for c in connections),
        "  facts: probe": max(float(c["probe_s"]) for c in connections),
    }


def job_phases(data: dict[str, Any]) -> dict[str, float]:
    """The training job from inside: each phase's own seconds, and the rest (the start: what is
    left of DDP's imports, the join; the end), from the durations the job reported."""
    inside = {
        r["check"]: float(r["details"]["duration_s"])
        for r in data["results"]
        if r["check"] in JOB_PHASES and r["details"].get("duration_s") is not None
    }
    job = sum(data["timings"].get(c, 0.0) for c in JOB_PHASES)
    found = {f"  job: {name} phase": seconds for name, seconds in inside.items()}
    found["  job: start, end"] = job - sum(inside.values())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--check-args", default="", help="more arguments for preflight check (--quick)")
    args = parser.parse_args()
    extra = shlex.split(args.check_args)
    samples: dict[str, list[float]] = {}
    with LabCluster(args.nodes, env=Path(sys.prefix)) as lab, tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            data, elapsed = one_run(lab, Path(tmp), extra)
            phases = {
                "controller: start, end": elapsed - data["duration_s"],
                **data["timings"],
                **facts_phases(data),
                **job_phases(data),
                "run": data["duration_s"],
                "total": elapsed,
            }
            for name, seconds in phases.items():
                samples.setdefault(name, []).append(seconds)
    total = statistics.median(samples["total"])
    which = " ".join(["preflight check", *extra])
    print(f"{args.nodes} lab nodes, {args.runs} runs of {which} (median seconds)\n")
    print(f"{'phase':<26}{'seconds':>9}{'share':>8}")
    for name, values in samples.items():
        seconds = statistics.median(values)
        print(f"{name:<26}{seconds:>9.2f}{seconds / total:>8.0%}")


if __name__ == "__main__":
    main()
