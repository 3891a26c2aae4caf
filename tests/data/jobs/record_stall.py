"""Record a real run of the job in which one node stalls mid-phase, as a JobOutcome for the
attribution tests: ``.venv/bin/python -m tests.data.jobs.record_stall``. What it is: SOURCES.md.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import threading
import time
from typing import Any

from checks.job.node.markers import PHASE_MARKER, RANK_MARKER
from checks.job.stalled_node import read_progress
from tests.data.jobs.record import outcome, save
from tests.test_distributed_job import free_port, job_args, run_job

# Seconds after the all-reduce phase starts when node2's ranks are stopped, and how long for.
INTO_THE_PHASE_S = 0.3
STOPPED_S = 12.0


def stall_in_allreduce(node_rank: int, seen: list[str]) -> Any:
    """A run_job hook: INTO_THE_PHASE_S after the node's ranks start the all-reduce phase, stop
    every one of them (SIGSTOP) for STOPPED_S, then let them go on."""

    def hook(procs: list[subprocess.Popen[str]]) -> None:
        stream = procs[node_rank].stderr
        assert stream is not None

        def watch() -> None:
            ranks: list[int] = []
            for line in stream:
                seen.append(line)
                if RANK_MARKER in line:
                    ranks.append(json.loads(line.split(RANK_MARKER, 1)[1])["pid"])
                if PHASE_MARKER in line and '"allreduce"' in line:
                    time.sleep(INTO_THE_PHASE_S)
                    for pid in ranks:
                        os.kill(pid, signal.SIGSTOP)
                    time.sleep(STOPPED_S)
                    for pid in ranks:
                        os.kill(pid, signal.SIGCONT)
                    break
            seen.extend(stream)

        threading.Thread(target=watch, daemon=True).start()

    return hook


def main() -> None:
    seen: list[str] = []
    args = job_args(3, phases=("intranode", "allreduce"))
    args["timeout_s"] = 6
    port = free_port()
    started = time.monotonic()
    nodes = run_job(3, 2, args, port=port, while_running=stall_in_allreduce(1, seen), grace_s=8)
    nodes[1].stderr = "".join(seen) + nodes[1].stderr
    job = outcome(nodes, args, time.monotonic() - started, port)
    # What the launcher reads from the heartbeats before it drops them from the kept stderr.
    with_progress = tuple(dataclasses.replace(n, progress=read_progress(n.stderr)) for n in job.nodes)
    save("stalled_mid_job", dataclasses.replace(job, nodes=with_progress))


if __name__ == "__main__":
    main()
