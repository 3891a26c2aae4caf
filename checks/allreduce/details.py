"""The ``allreduce`` check's name and the JSON contract of its details: what the judge writes in the
details of its first finding (the sweep, the pair tests and matrix, each node's ratio, NCCL's
transport) and the presenter reads back.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

NAME = "allreduce"


class SweepRow(TypedDict):
    """One message size of the whole-world sweep, as the job script measured it."""

    size_bytes: int
    count: int
    warmup_iters: int
    iters: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int  # elements that came back wrong
    # The share of the timed ops its most held-back rank waited for a CPU (None: not readable).
    cpu_wait: NotRequired[float | None]


class PairTest(TypedDict):
    """One pair test or re-test: the job script's record, with the nodes by name."""

    round: int
    nodes: list[str]  # inventory names
    ranks: list[int]
    size_bytes: int
    iters: int
    # Its probe op at the pair's message; in time_s's mean too when it stalled and cut the test short.
    probe_s: NotRequired[float]
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    retest: bool
    alone: NotRequired[bool]  # a re-test run alone (CPU ranks re-test in turn)
    # The share of the test its most held-back rank waited for a CPU (None: not readable).
    cpu_wait: NotRequired[float | None]
    node_ranks: list[int]  # the job's node ranks, as the script gave them in "nodes"


class UnconfirmedPair(TypedDict):
    link: str  # "node1-node3"
    first_gbps: float
    retest_gbps: list[float]
    reason: str


class AllreduceDetails(TypedDict):
    """The details of the first finding of a job that printed all-reduce results, in this order.

    The keys after ``nodes`` are set after the first ones (JSON keeps the order they are
    written in): the pair tables when the job tested pairs, NCCL's transport per node (empty
    over gloo) always, and notes on pairs slow once when there are any.
    """

    sweep: list[SweepRow]
    sweep_complete: bool | None
    duration_s: float | None
    world_size: int
    backend: str
    nodes: list[str]  # inventory names by node rank
    pairs: NotRequired[list[PairTest]]
    # The draw of the sparse pair plan ([allreduce] pair_seed replays it); absent for the full plan.
    pair_seed: NotRequired[int]
    pair_matrix: NotRequired[dict[str, dict[str, float]]]
    typical_pair_busbw_gbps: NotRequired[float]
    median_pair_busbw_gbps: NotRequired[float]
    slow_threshold_gbps: NotRequired[float]
    # The healthy first tests the threshold adapted to: their center, spread and count.
    healthy_pair_busbw_gbps: NotRequired[float]
    healthy_spread_gbps: NotRequired[float]
    healthy_pairs: NotRequired[int]
    # The run's noise: two standard deviations of the healthy pairs over their center (0.0: too few).
    noise: NotRequired[float]
    # Nodes with no fast pair that no finding names (within the noise) -> their pairs' mean ratio.
    within_noise: NotRequired[dict[str, float]]
    node_ratio: NotRequired[dict[str, float]]
    unconfirmed: NotRequired[list[UnconfirmedPair]]
    transport: NotRequired[dict[str, str]]  # one line per node (transport_text)
    transport_details: NotRequired[dict[str, dict[str, Any]]]  # NcclTransport.to_dict() per node
    nccl_loaded: NotRequired[dict[str, str]]  # per node, the NCCL version its ranks ran
    notes: NotRequired[list[str]]
