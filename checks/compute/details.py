"""The ``compute`` check's name and the JSON contract of its details: each rank's throughput in the
burn, its ratio to the median rank, and what its GPU said (identity, clocks, reasons, heat, power).
"""

from __future__ import annotations

from typing import TypedDict

NAME = "compute"


class ComputeRank(TypedDict):
    """One rank's burn, with the node it ran on and its GPU where NVML named it."""

    rank: int
    host: str | None
    local_rank: int | None
    dtype: str | None
    flops_per_s: float | None
    ratio: float | None  # to the median rank
    gpu_index: int | None
    gpu_serial: str | None
    sm_clock_mhz: float | None  # median during the burn
    max_sm_clock_mhz: float | None
    reasons: list[str]  # clock-event reasons active in any sample (idle left out)
    temperature_c_max: float | None
    power_w_max: float | None
    nvml: str | None  # why NVML could not say, when it could not
    # In the re-test, when the rank burned in it: its throughput, and its ratio to the controls' median.
    retest_flops_per_s: float | None
    retest_ratio: float | None


class ComputeRetest(TypedDict):
    """The second, shorter burn of the ranks slow in the first one, beside typical ranks."""

    burn_s: float
    suspects: list[int]  # the ranks slow in the first burn
    controls: list[int]  # typical ranks of the first burn, burning beside them
    reference_flops_per_s: float | None  # the controls' median throughput in the re-test
    in_turn: bool  # each burned alone in turn (CPU ranks), not all together (GPUs)


class ComputeDetails(TypedDict):
    """The details of the first finding of a job that printed compute results."""

    burn_s: float
    duration_s: float | None  # the phase's own seconds inside the job (set-up, burn, gather)
    dtype: str | None
    median_flops_per_s: float
    slow_ratio: float
    slow_hosts: list[str]  # nodes with a rank below the ratio or the floor: other checks refer here
    ranks: list[ComputeRank]
    retest: ComputeRetest | None  # None: no rank was slow, so none was re-tested
