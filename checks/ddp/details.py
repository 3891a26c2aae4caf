"""The ``ddp`` check's name and the JSON contract of its details: what the judge writes in the
details of its first finding (the loss by step, and each rank's step times, hashes and checksums,
by rank and with its node) and the presenter reads back.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

NAME = "ddp"


class RankRow(TypedDict):
    """One rank's numbers, with the node it ran on."""

    rank: int
    host: str | None
    compute_step_s: float | None
    wall_step_s: float | None
    param_hash: str | None
    grad_hash: str | None


class DdpDetails(TypedDict):
    """The details of the first finding of a job that printed DDP results, in this order. The
    per-rank lists (by rank, ``None`` where a rank gave no number) are what charts read;
    ``ranks`` has the same numbers with each rank's node."""

    world_size: int
    steps: int
    losses: list[float | None] | None  # the global loss at each step, as the job printed it
    loss_first: float | None
    loss_last: float | None
    joined: int
    ones_allreduce: float | None  # as the job printed it
    median_compute_step_s: float
    compute_work: NotRequired[str]  # what the compute timing ran (a GEMM on GPUs, the MLP on CPUs)
    duration_s: float | None
    compute_step_s: list[float | None]
    wall_step_s: list[float | None]
    param_hashes: list[str | None]
    grad_hashes: list[str | None]
    param_checksums: list[float | None]
    grad_checksums: list[float | None]
    ranks: list[RankRow]
