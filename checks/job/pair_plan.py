"""Which pairs of nodes the job tests in its first wave: every pair in rounds of disjoint pairs up to
FULL_PLAN_MAX_NODES nodes, one round covering every node beyond, its partners drawn anew each run
(across switches where a topology says where the nodes hang). Pure and fast.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from checks.job.node.pair import Pair, pair_key

PlanMode = Literal["full", "sparse", "auto"]
Pairwise = Literal["auto", "always", "never"]

# Up to this many nodes every pair is tested (n-1 rounds); beyond, one round covers every node.
FULL_PLAN_MAX_NODES = 16
# The sparse plan pairs no nodes this close in the inventory (rack-mates, often), where it can.
NEIGHBOURS = 8


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


def _half_offset(order: Sequence[int]) -> list[list[Pair]]:
    """The node at position i of ``order`` with the one at i + n/2: one round covering every node,
    each pair crossing between the order's halves (plus a one-pair round for an odd node)."""
    half = len(order) // 2
    rounds = [sorted(pair_key(order[i], order[i + half]) for i in range(half))]
    if len(order) % 2:
        rounds.append([pair_key(order[0], order[-1])])
    return rounds


def _drawn_order(n_nodes: int, switches: Sequence[str] | None, seed: int | None) -> list[int]:
    """The order the sparse plan pairs across: drawn from ``seed``, by switch when known.

    A fixed order would leave some cut between node sets uncrossed run after run (with partners
    half the inventory apart, never one between odd and even positions when n/2 is even); a
    drawn one crosses any cut between sizeable sets in nearly every run, and each run crosses
    others. With switches, the switches come in a drawn order and their nodes together, each in
    a drawn order: every pair then crosses between switches (when none holds over half the
    nodes), and which switches face each other changes from run to run. ``seed`` None keeps the
    inventory's order: node i with node i + n/2.
    """
    rng = random.Random(seed) if seed is not None else None
    nodes = list(range(n_nodes))
    if rng is not None:
        rng.shuffle(nodes)
    if not switches:
        return nodes
    names = sorted(set(switches))
    if rng is not None:
        rng.shuffle(names)
    rank = {name: index for index, name in enumerate(names)}
    return sorted(nodes, key=lambda node: rank[switches[node]])


def _kept_apart(pairs: Sequence[Pair], rng: random.Random, distance: int) -> list[Pair]:
    """``pairs`` with partners swapped between pairs, drawn, until no two partners are within
    ``distance`` inventory positions of each other (where a swap can do it)."""
    kept = list(pairs)
    for index, (a, b) in enumerate(kept):
        if b - a >= distance:
            continue
        for other in rng.sample(range(len(kept)), len(kept)):
            c, d = kept[other]
            if other == index:
                continue
            if abs(a - d) >= distance and abs(c - b) >= distance:
                kept[index], kept[other] = pair_key(a, d), pair_key(c, b)
                break
            if abs(a - c) >= distance and abs(b - d) >= distance:
                kept[index], kept[other] = pair_key(a, c), pair_key(b, d)
                break
    return sorted(kept)


def plan_mode(n_nodes: int, mode: PlanMode = "auto") -> Literal["full", "sparse"]:
    """The plan ``mode`` stands for at ``n_nodes``: ``auto`` is full up to ``FULL_PLAN_MAX_NODES``
    nodes, sparse beyond."""
    if mode == "auto":
        return "full" if n_nodes <= FULL_PLAN_MAX_NODES else "sparse"
    return mode


def pairs_tested(n_nodes: int, pairwise: Pairwise = "auto") -> bool:
    """Whether the job tests pairs of nodes at ``n_nodes``: ``auto`` from 3 nodes, ``always``
    from 2, ``never`` not."""
    return (pairwise == "always" or (pairwise == "auto" and n_nodes >= 3)) and n_nodes >= 2


def plan_rounds(
    n_nodes: int,
    mode: PlanMode = "auto",
    switches: Sequence[str] | None = None,
    seed: int | None = None,
) -> list[list[Pair]]:
    """Rounds of disjoint node pairs (by node rank) for the pair tests.

    ``full``: every pair once (the complete pair matrix) in n-1 rounds, n when n is odd.
    ``sparse``: every node in one pair, in one round (plus a one-pair round for an odd node),
    partners drawn from ``seed`` (see ``_drawn_order``); across switches when ``switches`` (each
    node's switch, from a topology file) says where the nodes hang.
    ``auto``: full up to ``FULL_PLAN_MAX_NODES`` nodes, sparse beyond.
    """
    if n_nodes < 2:
        return []
    if plan_mode(n_nodes, mode) == "full":
        return _round_robin(n_nodes)
    rounds = _half_offset(_drawn_order(n_nodes, switches, seed))
    if seed is None or switches:
        return rounds
    # Nodes a few inventory positions apart often share a rack: drawn partners are kept apart, as
    # the inventory's own order keeps them half the inventory apart.
    rounds[0] = _kept_apart(rounds[0], random.Random(seed), min(NEIGHBOURS, n_nodes // 4))
    return rounds


def ring_pairs(n_nodes: int) -> list[Pair]:
    """Each node with the next in a ring (node ranks, lower first): two partners a node, so that a
    card slow with both is told from a partner's; two nodes are one pair."""
    if n_nodes < 2:
        return []
    if n_nodes == 2:
        return [(0, 1)]
    return sorted({pair_key(i, (i + 1) % n_nodes) for i in range(n_nodes)})
