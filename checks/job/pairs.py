"""Which pairs of nodes the job tests, and naming the slow node or link from what they measured:
plan_rounds for the first tests, the job script's own re-test planner, and name_culprits. Pure
and fast, for the judge and for simulations of 64 to 4,096 nodes.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from checks.job.node import (
    first_busbw,
    node_best,
    pack_rounds,
    pair_key,
    retest_plan,
    slow_pairs,
    typical_busbw,
)

__all__ = [
    "FULL_PLAN_MAX_NODES",
    "Culprits",
    "Pair",
    "SlowLink",
    "SlowNode",
    "Unconfirmed",
    "first_busbw",
    "name_culprits",
    "node_best",
    "pack_rounds",
    "pair_key",
    "plan_rounds",
    "retest_plan",
    "slow_pairs",
    "typical_busbw",
]

Pair = tuple[int, int]
PlanMode = Literal["full", "sparse", "auto"]

# Up to this many nodes every pair is tested (n-1 rounds); beyond, one round covers every node.
FULL_PLAN_MAX_NODES = 16


# --------------------------------------------------------------------------- planning


def _round_robin(n_nodes: int) -> list[list[Pair]]:
    """Every pair once, in rounds of disjoint pairs: the circle method (n-1 rounds, n when odd)."""
    seats: list[int | None] = list(range(n_nodes))
    if n_nodes % 2:
        seats.append(None)  # the node facing the empty seat sits the round out
    rounds: list[list[Pair]] = []
    for _ in range(len(seats) - 1):
        pairs = [
            pair_key(a, b)
            for a, b in zip(seats[: len(seats) // 2], reversed(seats[len(seats) // 2 :]), strict=True)
            if a is not None and b is not None
        ]
        rounds.append(sorted(pairs))
        seats = [seats[0], seats[-1], *seats[1:-1]]
    return rounds


def _half_offset(n_nodes: int) -> list[list[Pair]]:
    """Node i with node i + n/2: one round covering every node, each pair crossing the inventory's halves.

    Inventories usually list nodes rack by rack, so pairing neighbours would mostly test links
    inside a rack; a half-offset partner is usually in another rack, behind the spine.
    """
    half = n_nodes // 2
    rounds = [[(i, i + half) for i in range(half)]]
    if n_nodes % 2:
        rounds.append([(0, n_nodes - 1)])
    return rounds


def plan_rounds(n_nodes: int, mode: PlanMode = "auto") -> list[list[Pair]]:
    """Rounds of disjoint node pairs (by node rank) for the pair tests.

    ``full``: every pair once (the complete pair matrix) in n-1 rounds, n when n is odd.
    ``sparse``: every node in one pair, in one round (plus a one-pair round for an odd node).
    ``auto``: full up to ``FULL_PLAN_MAX_NODES`` nodes, sparse beyond.
    """
    if n_nodes < 2:
        return []
    if mode == "auto":
        mode = "full" if n_nodes <= FULL_PLAN_MAX_NODES else "sparse"
    return _round_robin(n_nodes) if mode == "full" else _half_offset(n_nodes)


# --------------------------------------------------------------------------- slow nodes and links


@dataclass(frozen=True)
class SlowNode:
    """A node slow with every partner it was tested with, confirmed against a known-good node."""

    node: int
    busbw_gbps: float  # its best measurement
    ratio: float  # busbw_gbps / typical
    partners: tuple[int, ...]


@dataclass(frozen=True)
class SlowLink:
    """A pair slow in its test and its re-test, both of whose nodes are fast with other partners."""

    nodes: Pair
    busbw_gbps: float  # the better of its test and re-test
    ratio: float
    first_gbps: float
    retest_gbps: tuple[float, ...]


@dataclass(frozen=True)
class Unconfirmed:
    """A pair slow in its first test that no re-test confirmed: a note, not a failure."""

    nodes: Pair
    first_gbps: float
    retest_gbps: tuple[float, ...]
    reason: str


@dataclass(frozen=True)
class Culprits:
    typical_busbw_gbps: float  # the median over nodes of each node's best first-test pair
    median_pair_busbw_gbps: float  # the plain median of the first tests, for reference
    threshold_gbps: float  # slow_ratio x typical
    slow_nodes: tuple[SlowNode, ...] = ()
    slow_links: tuple[SlowLink, ...] = ()
    unconfirmed: tuple[Unconfirmed, ...] = ()
    # Pairs whose best measurement is under the absolute floor (min_pair_busbw_gbps), with it.
    below_floor: tuple[tuple[Pair, float], ...] = ()
    # Each node's best measurement over the typical pair: 1.0 is the median node.
    node_ratio: Mapping[int, float] = field(default_factory=dict)

    @property
    def confirmed(self) -> bool:
        return bool(self.slow_nodes or self.slow_links)


def name_culprits(
    measurements: Iterable[Mapping[str, Any]],
    n_nodes: int,
    slow_ratio: float,
    min_pair_busbw_gbps: float = 0.0,
) -> Culprits:
    """Slow nodes and slow links from pair measurements (first tests and re-tests).

    A pair is slow below ``slow_ratio`` x the typical pair. A finding is confirmed by a
    re-test before it fails a run: a slow node needs two or more partners, all slow, and a
    slow re-test against a node that is fast with someone else; a slow link needs a slow
    re-test and both nodes fast with other partners. ``n_nodes`` sizes the ratio table, so
    that a node no test reached still appears (with no ratio).
    """
    records = list(measurements)
    first = first_busbw(records)
    retests: dict[Pair, list[float]] = {}
    for record in records:
        if record.get("retest"):
            a, b = record["nodes"]
            retests.setdefault(pair_key(int(a), int(b)), []).append(float(record["busbw_gbps"]))
    typical = typical_busbw(first)
    threshold = slow_ratio * typical
    median_pair = float(statistics.median(first.values())) if first else 0.0

    # Everything each node was measured with: (partner, busbw, retest).
    seen: dict[int, list[tuple[int, float, bool]]] = {}
    for (a, b), busbw in first.items():
        seen.setdefault(a, []).append((b, busbw, False))
        seen.setdefault(b, []).append((a, busbw, False))
    for (a, b), values in retests.items():
        for busbw in values:
            seen.setdefault(a, []).append((b, busbw, True))
            seen.setdefault(b, []).append((a, busbw, True))
    fast_with = {node: {p for p, busbw, _ in obs if busbw >= threshold} for node, obs in seen.items()}

    def ratio(busbw: float) -> float:
        return busbw / typical if typical > 0 else 0.0

    slow_nodes: list[SlowNode] = []
    for node in sorted(seen):
        observed = seen[node]
        partners = sorted({p for p, _, _ in observed})
        if fast_with[node] or len(partners) < 2:
            continue
        confirming = [
            p
            for p, busbw, retest in observed
            if retest and busbw < threshold and fast_with.get(p, set()) - {node}
        ]
        if not confirming:
            continue
        best = max(busbw for _, busbw, _ in observed)
        slow_nodes.append(SlowNode(node, best, ratio(best), tuple(partners)))
    slow_set = {s.node for s in slow_nodes}

    slow_links: list[SlowLink] = []
    unconfirmed: list[Unconfirmed] = []
    for pair in sorted(p for p, busbw in first.items() if busbw < threshold):
        a, b = pair
        if a in slow_set or b in slow_set:
            continue  # explained by the slow node
        again = tuple(retests.get(pair, ()))
        if again and all(v < threshold for v in again):
            if fast_with[a] - {b} and fast_with[b] - {a}:
                best = max(first[pair], *again)
                slow_links.append(SlowLink(pair, best, ratio(best), first[pair], again))
                continue
            reason = "slow again on re-test, but a node of it has no fast partner to tell node from link"
        elif again:
            reason = "fast on re-test"
        else:
            reason = "not re-tested"
        unconfirmed.append(Unconfirmed(pair, first[pair], again, reason))

    below_floor: list[tuple[Pair, float]] = []
    if min_pair_busbw_gbps > 0:
        for pair, busbw in sorted(first.items()):
            best = max(busbw, *retests.get(pair, [busbw]))
            if best < min_pair_busbw_gbps:
                below_floor.append((pair, best))

    best_of_node = {node: max(busbw for _, busbw, _ in obs) for node, obs in seen.items()}
    node_ratio = {node: ratio(best_of_node[node]) for node in range(n_nodes) if node in best_of_node}
    return Culprits(
        typical_busbw_gbps=typical,
        median_pair_busbw_gbps=median_pair,
        threshold_gbps=threshold,
        slow_nodes=tuple(slow_nodes),
        slow_links=tuple(slow_links),
        unconfirmed=tuple(unconfirmed),
        below_floor=tuple(below_floor),
        node_ratio=node_ratio,
    )
