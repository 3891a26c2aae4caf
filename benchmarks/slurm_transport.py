"""What reaching the nodes through srun costs against SSH, on the same lab nodes, and how long the
node-local mode (a Slurm prolog) takes on one node.

Builds a lab cluster with a real Slurm (root needed), runs ``preflight check`` once over SSH and
once inside ``salloc`` (srun steps), and prints each phase's seconds and the srun/SSH ratio from
those two runs; then ``srun -w node1 preflight check --local`` once.

    sudo .venv/bin/python benchmarks/slurm_transport.py --nodes 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lab import NODE_PYTHON, LabCluster
from tests.lab.slurm import SlurmLab
from tests.test_check_lab import check_argv

PREFLIGHT = str(Path(sys.executable).with_name("preflight"))


def _report(run: subprocess.CompletedProcess[str], path: Path) -> dict[str, Any]:
    if run.returncode != 0:
        raise SystemExit(
            f"the check did not pass (exit {run.returncode}): {run.stdout[-2000:]}{run.stderr[-2000:]}"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args()
    with LabCluster(args.nodes, env=Path(sys.prefix)) as lab, SlurmLab(lab) as slurm:
        with tempfile.TemporaryDirectory() as tmp:
            ssh_report = Path(tmp) / "ssh.json"
            argv = check_argv(lab, lab.hosts_file(Path(tmp) / "hosts.txt"), ssh_report, "-q")
            over_ssh = _report(subprocess.run(argv, capture_output=True, text=True), ssh_report)
        srun_report = slurm.root / "srun.json"
        argv = ["salloc", f"--nodes={args.nodes}", "--", PREFLIGHT, "check", "--python", NODE_PYTHON, "-q",
                "--json", str(srun_report)]  # fmt: skip
        over_srun = _report(
            subprocess.run(argv, capture_output=True, text=True, env=slurm.environ()), srun_report
        )
        started = time.monotonic()
        local = subprocess.run(
            ["srun", "--nodes=1", "--nodelist=node1", PREFLIGHT, "check", "--local", "--python", NODE_PYTHON],
            capture_output=True,
            text=True,
            env={**slurm.environ(), "NO_COLOR": "1"},
        )
        local_s = time.monotonic() - started
    print(f"{args.nodes} lab nodes, one run each; seconds")
    print(f"{'phase':<14}{'ssh':>8}{'srun':>8}{'srun/ssh':>10}")
    phases = [*over_ssh["timings"], "whole run"]
    for phase in phases:
        if phase == "whole run":
            ssh_s, srun_s = over_ssh["duration_s"], over_srun["duration_s"]
        else:
            ssh_s, srun_s = over_ssh["timings"][phase], over_srun["timings"].get(phase, float("nan"))
        ratio = srun_s / ssh_s if ssh_s else float("nan")
        print(f"{phase:<14}{ssh_s:>8.2f}{srun_s:>8.2f}{ratio:>10.2f}")
    said = local.stdout.strip()
    print(f"--local on node1 through srun: exit {local.returncode}, {local_s:.2f} s in all; {said}")


if __name__ == "__main__":
    main()
