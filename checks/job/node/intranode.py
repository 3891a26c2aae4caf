"""The inside-the-node phase: an all-reduce among the ranks of each node, every node at once (its
own path: NVLink, NVSwitch, PCIe or, between CPU processes, the loopback), and each GPU's
host-device copy bandwidth.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from checks.job.node.planning import FLOAT32_BYTES, bus_bandwidth

if TYPE_CHECKING:
    from checks.job.node.harness import Job

    JsonDict = dict[str, Any]

# Each node's all-reduce is timed this many times; the best counts.
INTRANODE_TRIALS = 3
# Host-device copies timed per direction.
COPY_ITERS = 5


def run(job: Job) -> JsonDict:
    """Each rank's part: its node's all-reduce time and busbw, and its GPU's copies."""
    settings = job.settings("intranode")
    start = time.perf_counter()
    local = sorted((node, ranks) for node, ranks in job.ranks_of_node.items() if len(ranks) >= 2)
    # Every rank makes every group, in the same order, as new_group requires.
    groups = {
        node: job.dist.new_group(ranks, timeout=timedelta(seconds=job.timeout_s)) for node, ranks in local
    }
    mine: JsonDict = {"rank": job.rank, "node_rank": job.node_rank}
    group = groups.get(job.node_rank)
    if groups:
        count = max(1, int(settings["size_bytes"]) // FLOAT32_BYTES)
        buffer = job.allocate(count, "the inside-the-node message", group is not None)
        if group is not None:
            job.dist.all_reduce(buffer, group=group)  # connects the group
            # The best of a few trials: a path that is slow stays slow in every trial, while a
            # busy moment on a shared host spoils only one.
            iters = max(1, int(settings["iters"]))
            best = min(job.time_ops(buffer, iters, group) for _ in range(INTRANODE_TRIALS))
            per_op = job.agree_max([best], group)[0]
            size = count * FLOAT32_BYTES
            n_local = len(job.ranks_of_node[job.node_rank])
            mine.update(size_bytes=size, time_s=per_op, busbw_gbps=bus_bandwidth(size, per_op, n_local)[1])
        del buffer
    if job.cuda:
        mine["copy"] = copy_bandwidth(job.torch, job.device, int(settings["copy_bytes"]), COPY_ITERS)
    job.barrier()
    for made in groups.values():
        job.dist.destroy_process_group(made)
    skipped = None if local else "one process per node: no path inside a node to measure"
    return {"ranks": job.gather(mine), "skipped": skipped, "duration_s": time.perf_counter() - start}


def copy_bandwidth(torch: Any, device: Any, size_bytes: int, iters: int) -> dict[str, Any]:
    """Host-to-device and device-to-host copy bandwidth of this rank's GPU in GB/s, from pinned
    host memory, timed with CUDA events (as nvbandwidth and bandwidthTest measure it)."""
    count = max(1, size_bytes // 4)
    host = torch.empty(count, dtype=torch.float32).pin_memory()
    gpu = torch.empty(count, dtype=torch.float32, device=device)
    result: dict[str, Any] = {"size_bytes": count * 4}
    for name, target, source in (("h2d_gbps", gpu, host), ("d2h_gbps", host, gpu)):
        target.copy_(source, non_blocking=True)  # warm-up
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            target.copy_(source, non_blocking=True)
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1000.0
        result[name] = count * 4 * iters / seconds / 1e9 if seconds > 0 else None
    return result
