"""Record a real run of the job with its compute phase, one "node" held to a small CPU quota (a
cgroup v1 cpu controller, as the lab's ``limit_cpu`` does): ``.venv/bin/python -m
tests.data.jobs.record_compute`` (root); ``... record_compute quota_retest`` the same with a smaller
quota, slow in the re-test too; ``... record_compute slow_once`` a run where one node's worker is
stopped for a moment during the first burn only; ``... record_compute intranode`` the
inside-the-node phase. What each is: SOURCES.md beside this file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from checks.job.node.markers import PHASE_MARKER, RANK_MARKER
from tests.data.jobs.record import outcome, save
from tests.test_distributed_job import free_port, job_args, run_job

GROUP = Path("/sys/fs/cgroup/cpu/preflight-record")
QUOTA_US = 10_000  # of every 100 ms: a tenth of one core
# The recording with the re-test: a twentieth of one core, so that the node stays under the margin
# however loaded the machine's two cores are (the others' share of them shrinks with the load).
RETEST_QUOTA_US = 5_000
# The first burn lasts 1 s: its worker is stopped STOP_AFTER_S after the phase starts, for STOP_S.
STOP_AFTER_S = 0.3
STOP_S = 1.2


def limit(node_rank: int, quota_us: int = QUOTA_US) -> Any:
    """A run_job hook: the node's torchrun (and the worker it starts) into the CPU-quota group."""

    def hook(procs: list[subprocess.Popen[str]]) -> None:
        GROUP.mkdir(exist_ok=True)
        (GROUP / "cpu.cfs_period_us").write_text("100000")
        (GROUP / "cpu.cfs_quota_us").write_text(str(quota_us))
        (GROUP / "cgroup.procs").write_text(str(procs[node_rank].pid))

    return hook


def stop_in_first_burn(node_rank: int, seen: list[str]) -> Any:
    """A run_job hook: once the node's worker starts the compute phase, stop it (SIGSTOP) for
    STOP_S and let it go on (SIGCONT), as a scheduler that gives its core to something else would;
    the re-test that follows finds it as fast as the others."""

    def hook(procs: list[subprocess.Popen[str]]) -> None:
        stream = procs[node_rank].stderr
        assert stream is not None

        def watch() -> None:
            worker = None
            for line in stream:
                seen.append(line)
                if RANK_MARKER in line:
                    worker = json.loads(line.split(RANK_MARKER, 1)[1])["pid"]
                if PHASE_MARKER in line and '"compute"' in line and worker:
                    time.sleep(STOP_AFTER_S)
                    os.kill(worker, signal.SIGSTOP)
                    time.sleep(STOP_S)
                    os.kill(worker, signal.SIGCONT)
                    return

        threading.Thread(target=watch, daemon=True).start()

    return hook


def record_slow_once() -> None:
    """Three nodes of one rank each; node2's worker stopped for a moment during the first burn."""
    args = compute_args()
    seen: list[str] = []
    port = free_port()
    started = time.monotonic()
    nodes = run_job(3, 1, args, port=port, while_running=stop_in_first_burn(1, seen), timeout_s=300)
    nodes[1].stderr = "".join(seen) + nodes[1].stderr
    save("compute_slow_once", outcome(nodes, args, time.monotonic() - started, port))


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


def compute_args() -> dict[str, Any]:
    """The launcher's arguments for three CPU nodes, with the compute phase first."""
    args = job_args(3, phases=("compute", "allreduce", "ddp"))
    args["timeout_s"] = 60
    return args


def record_quota(name: str = "compute_cpu_quota", quota_us: int = QUOTA_US) -> None:
    """Three nodes of one rank each, node2 held to ``quota_us`` of every 100 ms."""
    args = compute_args()
    port = free_port()
    started = time.monotonic()
    try:
        nodes = run_job(3, 1, args, port=port, while_running=limit(1, quota_us), timeout_s=300)
    finally:
        time.sleep(1)
        GROUP.rmdir()
    save(name, outcome(nodes, args, time.monotonic() - started, port))


def main() -> None:
    """Three healthy nodes, then the same with node2 held to a tenth of a core."""
    args = compute_args()
    port = free_port()
    started = time.monotonic()
    nodes = run_job(3, 1, args, port=port, timeout_s=300)
    save("compute_three_nodes", outcome(nodes, args, time.monotonic() - started, port))
    record_quota()


if __name__ == "__main__":
    if sys.argv[1:] == ["intranode"]:
        record_intranode()
    elif sys.argv[1:] == ["slow_once"]:
        record_slow_once()
    elif sys.argv[1:] == ["quota_retest"]:
        record_quota("compute_cpu_quota_retest", RETEST_QUOTA_US)
    else:
        main()
