"""What ``allreduce`` measures, as the history store, the History section and Prometheus read it
(:mod:`preflight.measures`): each node's and each tested pair's bus bandwidth, the world's at the
largest size, and each node's ratio to its peers; and the sweep by message size, which ``baseline``
reads (:func:`sweep_busbw`) with the pairs' rates (:data:`PAIR_BUSBW`)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from preflight.facts_values import records
from preflight.measures import Gauge, Measure, Sample
from preflight.model import CheckResult
from preflight.view import listed, number


def node_busbw(result: CheckResult) -> list[Sample]:
    """Each node's bus bandwidth: the median of the first pair tests it took part in; in a run of
    two nodes, which is one pair the sweep measures whole, the sweep's largest size when it reached
    it (a pair test of theirs in a larger run is the same traffic)."""
    per_node: dict[str, list[float]] = {}
    for test in records(result.details.get("pairs")):
        busbw = number(test.get("busbw_gbps"))
        if test.get("retest") or busbw is None:
            continue
        for node in listed(test.get("nodes")):
            per_node.setdefault(str(node), []).append(busbw)
    if per_node:
        return [Sample(statistics.median(values), node=node) for node, values in per_node.items()]
    nodes, rows = listed(result.details.get("nodes")), records(result.details.get("sweep"))
    if len(nodes) != 2 or not rows or not result.details.get("sweep_complete"):
        return []
    busbw = number(rows[-1].get("busbw_gbps"))
    if busbw is None or busbw <= 0:
        return []
    return [Sample(busbw, node=str(node)) for node in nodes]


def pair_busbw(result: CheckResult) -> list[Sample]:
    """Each pair's fastest test in the run, its first test or a re-test: a busy fabric or busy
    machines only ever slow a test down (the judge, too, takes a pair's best test for its floor
    and its nodes' ratios), so a control pair re-tested in a slowed wave, or a pair slow once by
    chance, keeps its own rate, and a pair slow in every test stays slow. Node and part: the
    pair's names, sorted."""
    best: dict[tuple[str, str], float] = {}
    for test in records(result.details.get("pairs")):
        busbw, nodes = number(test.get("busbw_gbps")), listed(test.get("nodes"))
        if busbw is None or len(nodes) != 2:
            continue
        first, second = sorted(str(node) for node in nodes)
        best[(first, second)] = max(busbw, best.get((first, second), busbw))
    return [Sample(value, node=first, part=second) for (first, second), value in sorted(best.items())]


def _sweep_rows(result: CheckResult) -> list[tuple[float, float]]:
    """The full-world sweep's ``(size in bytes, busbw in GB/s)`` rows that hold both numbers."""
    sized = [
        (number(row.get("size_bytes")), number(row.get("busbw_gbps")))
        for row in records(result.details.get("sweep"))
    ]
    return [(size, busbw) for size, busbw in sized if size is not None and busbw is not None]


def sweep_busbw(result: CheckResult) -> dict[int, float]:
    """The full-world sweep's bus bandwidth (GB/s) by message size, as other checks read it
    (``baseline`` compares it with a saved run's): empty for a finding that carries no sweep, and
    without the sizes measured at no bandwidth (one rank moves no traffic)."""
    return {int(size): busbw for size, busbw in _sweep_rows(result) if busbw}


def world_busbw(result: CheckResult) -> list[Sample]:
    """The whole world's bus bandwidth at the largest size the sweep measured."""
    measured = _sweep_rows(result)
    if not measured:
        return []
    size, busbw = max(measured)
    return [Sample(busbw, labels=(("size_bytes", str(int(size))),))]


def node_ratio(result: CheckResult) -> list[Sample]:
    """Each node's best pair bandwidth relative to the typical pair's (1 = typical)."""
    ratios = result.details.get("node_ratio")
    if not isinstance(ratios, Mapping):
        return []
    return [
        Sample(value, node=str(node))
        for node, ratio in ratios.items()
        if (value := number(ratio)) is not None
    ]


NODE_BUSBW = Measure("busbw", "GB/s", "node", "bus bandwidth", "node busbw", node_busbw, own_past=True)
PAIR_BUSBW = Measure("pair_busbw", "GB/s", "pair", "bus bandwidth", "pair busbw", pair_busbw)
WORLD_BUSBW = Measure(
    "world_busbw",
    "GB/s",
    "run",
    "all-reduce bus bandwidth at the largest size",
    "world busbw",
    world_busbw,
    kept=False,
    gauge=Gauge(
        "preflight_allreduce_busbw_gbytes_per_second",
        "all-reduce bus bandwidth at the largest size (GB/s)",
    ),
)
NODE_RATIO = Measure(
    "node_ratio",
    "",
    "node",
    "pair bandwidth relative to the typical pair's",
    "node ratio",
    node_ratio,
    kept=False,
    gauge=Gauge("preflight_node_ratio", "a node's measure relative to its peers' (1 = typical), by check"),
)
MEASURES = (NODE_BUSBW, PAIR_BUSBW, WORLD_BUSBW, NODE_RATIO)
