"""What reaching the nodes through srun costs against SSH, on the same lab nodes, and how long the
node-local mode (a Slurm prolog) takes on one node.

Builds a lab cluster with a real Slurm (root needed), runs ``preflight check`` once over SSH and
once inside ``salloc`` (srun steps), and prints each phase's seconds and the srun/SSH ratio from
those two runs; then ``srun -w node1 preflight check --local`` once.

    sudo .venv/bin/python benchmarks/slurm_transport.py --nodes 3

With ``--sizes``, what a node costs each engine: at each size, one run over SSH and one through
srun, side by side (``--only`` the checks, connect,versions,ports by default); the controller's
CPU (preflight and every process it waited for: the srun steps), slurmctld's CPU, and the wall
time; then each fitted as a + b*n over the sizes, and the model at 100, 300 and 1,000 nodes.

    sudo .venv/bin/python benchmarks/slurm_transport.py --sizes 4,8,16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
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


def _timed(
    argv: Sequence[str], env: Mapping[str, str] | None, ctld: int | None
) -> tuple[float, float, float]:
    """(controller CPU, slurmctld CPU, wall) seconds of one ``preflight check``, which must pass."""
    ctld_before = _process_cpu_s(ctld)
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    output = process.stdout.read() if process.stdout else b""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the check did not pass: {output.decode(errors='replace')[-3000:]}")
    return usage.ru_utime + usage.ru_stime, _process_cpu_s(ctld) - ctld_before, wall


def _process_cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fit(sizes: Sequence[int], values: Sequence[float]) -> tuple[float, float]:
    """(a, b) of the least-squares line a + b*n."""
    slope, intercept = statistics.linear_regression(sizes, values)
    return intercept, slope


def scaling(sizes: Sequence[int], only: str) -> None:
    """Each engine's cost at each size, and the fitted model."""
    rows: dict[str, list[tuple[float, float, float]]] = {"ssh": [], "srun": []}
    for n in sizes:
        with (
            LabCluster(n, env=Path(sys.prefix)) as lab,
            SlurmLab(lab) as slurm,
            tempfile.TemporaryDirectory() as tmp,
        ):
            hosts = lab.hosts_file(Path(tmp) / "hosts.txt")
            ctld = _ctld_pid()
            rows["ssh"].append(
                _timed(check_argv(lab, hosts, Path(tmp) / "ssh.json", "-q", "--only", only), None, ctld)
            )
            argv = ["salloc", f"--nodes={n}", "--", PREFLIGHT, "check", "--python", NODE_PYTHON, "-q",
                    "--only", only]  # fmt: skip
            rows["srun"].append(_timed(argv, slurm.environ(), ctld))
        for engine in rows:
            cpu, ctld_cpu, wall = rows[engine][-1]
            print(
                f"{n:>5} nodes {engine:>5}: controller CPU {cpu:6.2f} s, "
                f"slurmctld {ctld_cpu:5.2f} s, wall {wall:6.2f} s",
                flush=True,
            )
    print(f"\nfitted a + b*n over {', '.join(map(str, sizes))} nodes (--only {only}); seconds")
    print(
        f"{'engine':<7}{'CPU a node':>12}{'slurmctld a node':>18}{'wall a node':>13}"
        f"{'CPU at 100':>12}{'at 300':>9}{'at 1,000':>10}"
    )
    for engine, measured in rows.items():
        own = _fit(sizes, [m[0] for m in measured])
        ctlds = _fit(sizes, [m[1] for m in measured])
        walls = _fit(sizes, [m[2] for m in measured])
        at = [own[0] + own[1] * n + ctlds[0] + ctlds[1] * n for n in (100, 300, 1000)]
        print(f"{engine:<7}{own[1] * 1000:>10.1f}ms{ctlds[1] * 1000:>16.1f}ms{walls[1]:>12.2f}s"
              f"{at[0]:>12.1f}{at[1]:>9.1f}{at[2]:>10.1f}")  # fmt: skip
    ssh_cpu = _fit(sizes, [m[0] + m[1] for m in rows["ssh"]])[1]
    srun_cpu = _fit(sizes, [m[0] + m[1] for m in rows["srun"]])[1]
    print(f"srun/ssh, CPU a node (controller and slurmctld): {srun_cpu / ssh_cpu:.2f}")


def _ctld_pid() -> int | None:
    found = subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True, text=True).stdout.split()
    return int(found[0]) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--sizes", help="node counts, comma-separated: the per-node cost of each engine")
    parser.add_argument("--only", default="connect,versions,ports")
    args = parser.parse_args()
    if args.sizes:
        scaling([int(n) for n in args.sizes.split(",")], args.only)
        return
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
