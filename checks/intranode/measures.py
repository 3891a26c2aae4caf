"""What ``intranode`` measures, as the history store, the History section and Prometheus read it
(:mod:`preflight.measures`): each node's bus bandwidth among its own GPUs (ranks)."""

from __future__ import annotations

from collections.abc import Mapping

from preflight.measures import Gauge, Measure, Sample
from preflight.model import CheckResult
from preflight.view import number


def inside_busbw(result: CheckResult) -> list[Sample]:
    """Each node's all-reduce bus bandwidth among its own ranks (the slowest rank's), GB/s."""
    by_node = result.details.get("node_busbw_gbps")
    if not isinstance(by_node, Mapping):
        return []
    return [Sample(value, node=str(node)) for node, busbw in by_node.items() if (value := number(busbw))]


INSIDE_BUSBW = Measure(
    "inside_busbw",
    "GB/s",
    "node",
    "bus bandwidth among the node's own GPUs",
    "inside busbw",
    inside_busbw,
    gauge=Gauge(
        "preflight_inside_busbw_gbytes_per_second",
        "all-reduce bus bandwidth among each node's own GPUs (GB/s)",
    ),
)
MEASURES = (INSIDE_BUSBW,)
