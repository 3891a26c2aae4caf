"""The all-reduce sweep over the whole world, as nccl-tests runs it: message sizes growing from
1 KiB, each probed, checked for exact sums and timed, within a time budget and the ranks' memory.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from checks.job.node.cpu_wait import CpuWait
from checks.job.node.pattern import PATTERN_PERIOD, count_unlike, expected_sums, fill_periodic, pattern_values
from checks.job.node.planning import FLOAT32_BYTES, bus_bandwidth, plan_iterations, sweep_sizes

if TYPE_CHECKING:
    from checks.job.node.harness import Job, Settings

    JsonDict = dict[str, Any]


def sweep(job: Job, settings: Settings) -> JsonDict:
    """The sweep's rows (one per size: time, bandwidths, wrong elements), where and why it stopped."""
    budget = float(settings["sweep_budget_s"])
    warmup = int(settings["warmup_iters"])
    iters = max(1, int(settings["iters"]))
    asked = int(settings["max_bytes"])
    capped = job.memory_cap(asked)
    sizes = sweep_sizes(capped, factor=int(settings["sweep_factor"]))
    # What this rank puts in for the correctness check, and the sums every element must reach.
    pattern = [pattern_values(k, job.rank) for k in range(PATTERN_PERIOD)]
    sums = expected_sums(job.world)
    rows: list[JsonDict] = []
    stopped: str | None = None
    start = time.perf_counter()
    elapsed = 0.0
    last_per_op = 0.0
    for size in sizes:
        if rows:
            # The next size takes about as much longer per op as it is larger; it needs a
            # probe, one timed op and the check, or the sweep stops growing here.
            estimate = last_per_op * size / rows[-1]["size_bytes"]
            if elapsed + 3.0 * estimate > budget:
                stopped = f"the {budget:g} s budget would run out at {size} bytes"
                break
        count = size // FLOAT32_BYTES
        buffer = job.allocate(count, f"the {size}-byte sweep message")
        # The probe op is also the correctness check: every rank puts in its own values, and
        # every element must come back as their exact sum. A wrong element anywhere counts.
        fill_periodic(job.torch, buffer, pattern)
        probe_local = job.time_ops(buffer, 1, aligned=True)  # allocate() agreed
        wrong_local = count_unlike(job.torch, buffer, sums)
        buffer.zero_()  # the timed ops add zeros, which no number of ops can overflow
        probe, elapsed = job.agree_max([probe_local, time.perf_counter() - start])
        remaining = budget - elapsed
        if rows and remaining < 2.0 * probe:
            stopped = f"the {budget:g} s budget ran out at {size} bytes"
            break
        # As nccl-tests does, the warm-ups run once, before the first size; at every later
        # size the probe op is its only untimed op.
        warm, timed = plan_iterations(probe, remaining, 0 if rows else max(0, warmup - 1), iters)
        for _ in range(warm):
            job.dist.all_reduce(buffer, group=job.group)
        waiting = CpuWait()
        per_op_local = job.time_ops(buffer, timed, aligned=warm == 0)
        wait_local = waiting.share(per_op_local * timed)
        del buffer
        per_op, elapsed, wrong, wait = job.agree_max(
            [per_op_local, time.perf_counter() - start, float(wrong_local),
             -1.0 if wait_local is None else wait_local]
        )  # fmt: skip
        last_per_op = per_op
        algbw, busbw = bus_bandwidth(size, per_op, job.world)
        rows.append(
            {
                "size_bytes": size,
                "count": count,
                "warmup_iters": warm + 1,
                "iters": timed,
                "time_s": per_op,
                "algbw_gbps": algbw,
                "busbw_gbps": busbw,
                "wrong": int(wrong),
                # The share of the timed ops the most held-back rank waited for a CPU.
                "cpu_wait": wait if wait >= 0 else None,
            }
        )
    return {
        "sweep": rows,
        "sweep_budget_s": budget,
        "sweep_max_bytes": sizes[-1],
        "sweep_complete": bool(rows) and rows[-1]["size_bytes"] == sizes[-1],
        "sweep_stopped": stopped,
        "memory_cap_bytes": capped if capped < asked else None,
        "sweep_duration_s": time.perf_counter() - start,
    }
