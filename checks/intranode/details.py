"""The JSON contract of the ``intranode`` check's details: each node's busbw inside itself and each
GPU's copy bandwidth (the pass, or added to the first finding), and what each finding measured.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class Measured(TypedDict):
    """What the phase measured, in this order: each node's busbw among its own ranks (GB/s, the
    slowest rank's), the nodes named slow, the phase's seconds, the median node's busbw (when any
    node gave one), and each rank's host-to-device and device-to-host copy bandwidth (GB/s)."""

    node_busbw_gbps: dict[str, float]
    slow_hosts: list[str]
    duration_s: float | None
    median_busbw_gbps: NotRequired[float]
    copy_gbps: NotRequired[dict[str, dict[str, float]]]  # by rank: "h2d_gbps", "d2h_gbps"


class SlowInside(TypedDict):
    """A node whose all-reduce among its own ranks is slow against the median node."""

    item: str  # "slow_inside_node"
    node: str
    ratio: float
    busbw_gbps: float


class SlowCopy(TypedDict):
    """A rank whose GPU copies to or from the host slowly against the median GPU."""

    item: str  # "slow_copy"
    rank: int
