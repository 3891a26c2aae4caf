"""What the rail tests say, pure, shared by the job (which re-tests the slow ones) and the judge
(``checks.rails``): each test's best bus bandwidth, what a healthy test of each rail does, and
which tests are slow.

A rail test is two nodes (node ranks, the lower first) and a rail: one path a node's traffic takes
to the fabric (a GPU's rank and the NIC nearest it, or one interface of a CPU node).
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from checks.job.node.planning import typical_busbw

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from checks.job.node.pair import Pair

    RailTest = tuple[int, int, int]


def rail_tests(pairs: Iterable[Sequence[int]], rails: int) -> list[RailTest]:
    """Every rail of every pair, pair by pair."""
    return [(int(pair[0]), int(pair[1]), rail) for pair in pairs for rail in range(rails)]


def best_busbw(records: Iterable[Mapping[str, Any]]) -> dict[RailTest, float]:
    """Each rail test's best busbw over its test and re-test: a rail is slow when it never ran well."""
    best: dict[RailTest, float] = {}
    for record in records:
        nodes, rail, busbw = record.get("nodes"), record.get("rail"), record.get("busbw_gbps")
        if not isinstance(nodes, list) or len(nodes) != 2 or not isinstance(rail, int):
            continue
        if isinstance(busbw, bool) or not isinstance(busbw, (int, float)):
            continue
        a, b = sorted(int(n) for n in nodes)
        key = (a, b, rail)
        best[key] = max(float(busbw), best.get(key, 0.0))
    return best


def rail_typicals(busbw: Mapping[RailTest, float]) -> dict[int, float]:
    """Each rail's typical test: the median over nodes of each node's best test on that rail
    (planning.typical_busbw, which one slow node cannot drag down)."""
    per_rail: dict[int, dict[Pair, float]] = {}
    for (a, b, rail), value in busbw.items():
        per_rail.setdefault(rail, {})[(a, b)] = value
    return {rail: typical_busbw(pairs) for rail, pairs in sorted(per_rail.items())}


def healthy_rail(busbw: Mapping[RailTest, float]) -> float:
    """What a healthy rail test does: the upper median of the rails' typical tests. Rails are alike
    (one NIC a GPU, or the interfaces a job stripes over), so a rail slow on every node is slow
    too, and with two rails the healthy one is the measure."""
    typical = list(rail_typicals(busbw).values())
    return float(statistics.median_high(typical)) if typical else 0.0


def slow_tests(
    busbw: Mapping[RailTest, float], slow_ratio: float, healthy: float | None = None
) -> list[RailTest]:
    """The tests below ``slow_ratio`` times what a healthy rail test does (``healthy``, or what these
    tests say), in order."""
    reference = healthy_rail(busbw) if healthy is None else healthy
    return sorted(test for test, value in busbw.items() if value < slow_ratio * reference)
