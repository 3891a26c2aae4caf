"""Record real runs of the distributed job (torchrun here, gloo) as JobOutcomes for the judges' tests:
``.venv/bin/python -m tests.data.jobs.record``. What each case is: SOURCES.md beside this file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from checks.job.node.markers import PHASE_MARKER, RANK_MARKER, parse_result_line
from checks.job.outcome import JobOutcome, NodeOutcome
from tests.test_distributed_job import LocalNode, free_port, job_args, run_job

OUT = Path(__file__).parent

# A stand-alone script (not the job): rank 2 arrives late at a gloo monitored barrier.
LATE_RANK = """
import time
from datetime import timedelta
import torch.distributed as dist
dist.init_process_group("gloo", timeout=timedelta(seconds=10))
if dist.get_rank() == 2:
    time.sleep(6)
dist.monitored_barrier(timeout=timedelta(seconds=3), wait_all_ranks=True)
"""


def outcome(nodes: list[LocalNode], args: dict[str, Any], duration_s: float, port: int) -> JobOutcome:
    names = list(args["nodes"])
    return JobOutcome(
        phases=tuple(args["phases"]),
        backend=str(args["backend"]),
        master="127.0.0.1",
        port=port,
        nodes=tuple(
            NodeOutcome(
                host=names[n.node_rank],
                node_rank=n.node_rank,
                exit_status=None if n.killed else n.returncode,
                timed_out=False,
                lost=False,
                killed=n.killed,
                stderr=n.stderr,
            )
            for n in nodes
        ),
        duration_s=round(duration_s, 3),
        document=next((d for d in (parse_result_line(n.stdout) for n in nodes) if d), None),
    )


def save(name: str, job: JobOutcome) -> None:
    (OUT / f"{name}.json").write_text(json.dumps(asdict(job), indent=1) + "\n")
    document = "a document" if job.document else "no document"
    print(
        f"{name}: {document}, exit {[n.exit_status for n in job.nodes]}, "
        f"killed {[n.killed for n in job.nodes]}"
    )


def record(name: str, n_nodes: int, nproc: int, args: dict[str, Any], **options: Any) -> None:
    port = free_port()
    started = time.monotonic()
    nodes = run_job(n_nodes, nproc, args, port=port, **options)
    save(name, outcome(nodes, args, time.monotonic() - started, port))


def kill_worker_in_allreduce(node_rank: int, seen: list[str]) -> Any:
    """A run_job hook: once the node's worker starts the all-reduce phase, SIGKILL the worker only
    (as the OOM killer would); its torchrun notices and fails."""

    def hook(procs: list[subprocess.Popen[str]]) -> None:
        stream = procs[node_rank].stderr
        assert stream is not None

        def watch() -> None:
            worker = None
            for line in stream:
                seen.append(line)
                if RANK_MARKER in line:
                    worker = json.loads(line.split(RANK_MARKER, 1)[1])["pid"]
                if PHASE_MARKER in line and '"allreduce"' in line and worker:
                    time.sleep(0.5)
                    os.kill(worker, signal.SIGKILL)
                    return

        threading.Thread(target=watch, daemon=True).start()

    return hook


def stop_host(node_rank: int) -> Any:
    """A run_job hook: stop the node's script host (SIGSTOP, its whole group) as soon as it starts,
    before any rank of it exists: the node never joins, and never says why."""

    def hook(procs: list[subprocess.Popen[str]]) -> None:
        os.killpg(procs[node_rank].pid, signal.SIGSTOP)

    return hook


def main() -> None:
    record("three_nodes", 3, 1, job_args(3))
    record("one_node_three_ranks", 1, 3, job_args(1))

    seen: list[str] = []
    args = job_args(3, sweep_budget_s=6.0, max_bytes=64 << 20)
    port = free_port()
    started = time.monotonic()
    nodes = run_job(3, 1, args, port=port, while_running=kill_worker_in_allreduce(2, seen))
    nodes[2].stderr = "".join(seen) + nodes[2].stderr
    save("worker_killed", outcome(nodes, args, time.monotonic() - started, port))

    args = job_args(3)
    args["timeout_s"] = 8
    record("master_unreachable", 3, 1, args, ports={1: free_port()})

    args = job_args(3)
    args["join_timeout_s"] = args["timeout_s"] = 8
    record("never_joined", 3, 1, args, while_running=stop_host(2))

    script = OUT / "late_rank.py"
    script.write_text(LATE_RANK)
    try:
        run = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "3",
             "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(script)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        script.unlink()
    (OUT / "monitored_barrier.stderr").write_text(run.stderr)
    print(f"monitored_barrier: exit {run.returncode}")


if __name__ == "__main__":
    main()
