"""``[gpu_memory]``: GPU memory and health thresholds."""

from __future__ import annotations

from dataclasses import dataclass

from preflight.settings import Settings


@dataclass(frozen=True)
class GpuMemorySection:
    """GPU memory and health thresholds."""

    # A GPU with less than this fraction of its memory free is busy with someone else's work.
    min_free_fraction: float = 0.9
    # Total memory of one GPU may differ across nodes by this fraction before it is a finding
    # (drivers reserve slightly different amounts).
    total_tolerance: float = 0.01
    # GPUs expected on every node; 0 means "not stated" (then the nodes are compared).
    gpus_per_node: int = 0


SETTINGS = Settings(GpuMemorySection)
