"""Record a real run of the job with its compute phase, one "node" held to a small CPU quota (a
cgroup v1 cpu controller, as the lab's ``limit_cpu`` does): ``.venv/bin/python -m
tests.data.jobs.record_compute`` (root); ``... record_compute intranode`` records the
inside-the-node phase. What it is: SOURCES.md beside this file.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.data.jobs.record import outcome, save
from tests.test_distributed_job import free_port, job_args, run_job

GROUP = Path("/sys/fs/cgroup/cpu/preflight-record")
QUOTA_US = 10_000  # of every 100 ms: a tenth of one core


def limit(node_rank: int) -> Any:
    """A run_job hook: the node's torchrun (and the worker it starts) into the CPU-quota group."""

    def hook(procs: list[subprocess.Popen[str]]) -> None:
        GROUP.mkdir(exist_ok=True)
        (GROUP / "cpu.cfs_period_us").write_text("100000")
        (GROUP / "cpu.cfs_quota_us").write_text(str(QUOTA_US))
        (GROUP / "cgroup.procs").write_text(str(procs[node_rank].pid))

    return hook


def record_intranode() -> None:
    """The inside-the-node phase: three nodes of two ranks each, then of one rank each (skipped)."""
    for name, nproc in (("intranode_two_ranks", 2), ("intranode_one_rank", 1)):
        args = job_args(3)
        args["phases"] = ["intranode", "allreduce"]
        args["timeout_s"] = 60
        port = free_port()
        started = time.monotonic()
        nodes = run_job(3, nproc, args, port=port, timeout_s=300)
        save(name, outcome(nodes, args, time.monotonic() - started, port))


def main() -> None:
    """Three healthy nodes, then the same with node2 held to a tenth of a core."""
    args = job_args(3)
    args["phases"] = ["compute", "allreduce", "ddp"]
    args["compute"] = {"burn_s": 1.0, "matrix": 0}
    args["timeout_s"] = 60
    port = free_port()
    started = time.monotonic()
    nodes = run_job(3, 1, args, port=port, timeout_s=300)
    save("compute_three_nodes", outcome(nodes, args, time.monotonic() - started, port))

    port = free_port()
    started = time.monotonic()
    try:
        nodes = run_job(3, 1, args, port=port, while_running=limit(1), timeout_s=300)
    finally:
        time.sleep(1)
        GROUP.rmdir()
    save("compute_cpu_quota", outcome(nodes, args, time.monotonic() - started, port))


if __name__ == "__main__":
    if sys.argv[1:] == ["intranode"]:
        record_intranode()
    else:
        main()
