"""What the whole check costs next to the smallest real job: ``preflight check`` (every check) and a
bare torchrun job (import torch, join, five 16 MiB all-reduces, exit) on the same lab nodes,
interleaved so that both see the same load: the ratio of their medians, and the median of the
ratios of each check to the bare job run right after it.

The bare job is started as an operator would start it: one ``ssh node torchrun ...`` per node,
all at once, timed until the last one exits.

    sudo .venv/bin/python benchmarks/check_vs_torchrun.py --nodes 3 --runs 5
    sudo .venv/bin/python benchmarks/check_vs_torchrun.py --check-args=--quick
    sudo .venv/bin/python benchmarks/check_vs_torchrun.py --check-args= --check-args=--skip=ddp
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lab import NODE_PYTHON, LabCluster
from tests.test_check_lab import check_argv

PORT = 29555
BARE_JOB = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
buffer = torch.ones(16 * 1024 * 1024 // 4)
for _ in range(5):
    dist.all_reduce(buffer)
dist.destroy_process_group()
"""


def bare_job(lab: LabCluster) -> float:
    """Seconds from starting torchrun on every node to the last one's exit."""
    master = lab.nodes[0].address
    started = time.monotonic()
    processes = []
    for rank, node in enumerate(lab.nodes):
        command = [
            "env", "OMP_NUM_THREADS=1", "GLOO_SOCKET_IFNAME=eth0",
            NODE_PYTHON, "-m", "torch.distributed.run",
            "--nnodes", str(len(lab.nodes)), "--nproc-per-node", "1", "--node-rank", str(rank),
            "--master-addr", master, "--master-port", str(PORT),
            "--no-python", NODE_PYTHON, "-c", BARE_JOB,
        ]  # fmt: skip
        argv = lab.ssh_argv(node, [shlex.join(command)])
        processes.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    failed = [p.stderr.read().decode()[-1500:] for p in processes if p.wait(timeout=300) != 0 and p.stderr]
    if failed:
        raise SystemExit(f"the bare job failed: {failed[0]}")
    return time.monotonic() - started


def whole_check(lab: LabCluster, workdir: Path, extra: list[str]) -> float:
    report = workdir / "run.json"
    argv = check_argv(lab, lab.hosts_file(workdir / "hosts.txt"), report, "-q", *extra)
    started = time.monotonic()
    run = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    elapsed = time.monotonic() - started
    if run.returncode != 0:
        data = json.loads(report.read_text()) if report.exists() else {}
        noisy = [r["summary"] for r in data.get("results", []) if r["status"] != "pass"]
        raise SystemExit(f"the check did not pass (exit {run.returncode}): {noisy or run.stderr[-1500:]}")
    return elapsed


def _print_row(label: str, times: list[float]) -> None:
    print(f"{label:<34}{statistics.median(times):>7.2f}  ({min(times):.2f}-{max(times):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--check-args",
        action="append",
        help="more arguments for preflight check; repeat it to time several checks in the same "
        "rounds, each against the same bare jobs (default: one check, with no more arguments)",
    )
    args = parser.parse_args()
    variants = [shlex.split(extra) for extra in args.check_args or [""]]
    checks: list[list[float]] = [[] for _ in variants]
    bares: list[float] = []
    with LabCluster(args.nodes, env=Path(sys.prefix)) as lab, tempfile.TemporaryDirectory() as tmp:
        bare_job(lab)  # warm the page cache for both
        for _ in range(args.runs):
            for times, extra in zip(checks, variants, strict=True):
                times.append(whole_check(lab, Path(tmp), extra))
            bares.append(bare_job(lab))
    bare_s = statistics.median(bares)
    print(f"{args.nodes} lab nodes, {args.runs} interleaved runs (median seconds, min-max)")
    _print_row("bare torchrun job", bares)
    for times, extra in zip(checks, variants, strict=True):
        print()
        _print_row(" ".join(["preflight check", *extra]), times)
        print(f"{'  ratio of the medians':<34}{statistics.median(times) / bare_s:>7.2f}x")
        # Each check against the bare job of its round: a slow spell on the shared machine
        # then spoils one pair, not both medians.
        paired = sorted(c / b for c, b in zip(times, bares, strict=True))
        print(
            f"{'  median of the paired ratios':<34}{statistics.median(paired):>7.2f}x"
            f"  ({paired[0]:.2f}-{paired[-1]:.2f})"
        )


if __name__ == "__main__":
    main()
