"""How long this process waited for a CPU: the run-queue delay the kernel keeps for each thread
(``/proc/self/task/<tid>/schedstat``, its second field, in nanoseconds; kernels built with
CONFIG_SCHED_INFO, which every distribution's is). A test whose ranks spent a large share of its
time runnable but without a CPU measured the node's load, not its link or its GPU.
"""

from __future__ import annotations

import os


def waited_s() -> float | None:
    """Seconds this process's threads have spent waiting for a CPU so far (summed over threads);
    None where the kernel does not say."""
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return None
    total, read = 0, False
    for thread in threads:
        try:
            with open(f"/proc/self/task/{thread}/schedstat") as stats:
                total += int(stats.read().split()[1])
            read = True
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total / 1e9 if read else None


class CpuWait:
    """The share of a stretch of time this process waited for a CPU: started at construction,
    read by ``share(seconds)`` with the stretch's length (None where the kernel does not say)."""

    def __init__(self) -> None:
        self.start = waited_s()

    def share(self, seconds: float) -> float | None:
        end = waited_s()
        if self.start is None or end is None or seconds <= 0:
            return None
        return max(0.0, end - self.start) / seconds
