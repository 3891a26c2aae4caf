"""Cuts between sets of nodes, from pair measurements: a group cut off from the rest (a switch
uplink), or two sets whose every pair across is slow (a route, a spine), as one finding instead of
one slow link per pair. Pure, for the judge (``checks.job.pairs.name_culprits``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from checks.job.node.pair import Pair, pair_key
from checks.job.node.planning import SPLIT_RATIO

# Slow pairs that one split of the nodes in two puts all across: a cut between two large sets
# (see find_cuts), not as many slow links.
MANY_ACROSS = 6


@dataclass(frozen=True)
class SlowGroup:
    """Two sets of nodes whose every tested pair across is slow: a group cut off from every other
    node (a switch uplink), or a cut between two sets (a route, a spine); one finding instead of
    one slow link per pair."""

    sides: tuple[tuple[int, ...], tuple[int, ...]]
    busbw_gbps: float  # the median over the pairs across of each pair's best measurement
    ratio: float
    inside_gbps: float  # the median pair inside the sides (0.0 when none was tested)
    pairs: tuple[Pair, ...]
    # The smaller side is a group cut off from every other node (the larger side is all the rest).
    cut_off: bool = False


# A cut as it is found: its two sides, the slow pairs across, and whether the second side is every
# node but the first (a group cut off from the rest).
_Cut = tuple[set[int], set[int], list[Pair], bool]


class _Sides:
    """Union-find over node ranks: the sets of nodes that are fast with each other."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, node: int) -> int:
        root = self.parent.setdefault(node, node)
        while root != self.parent[root]:
            root = self.parent[root]
        while self.parent[node] != root:
            self.parent[node], node = root, self.parent[node]
        return root

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def members(self) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        for node in sorted(self.parent):
            found.setdefault(self.find(node), []).append(node)
        return found


def _slow_with(side: set[int], across: Iterable[Pair]) -> dict[int, set[int]]:
    """Each node of ``side`` -> its partners outside it in ``across``."""
    partners: dict[int, set[int]] = {node: set() for node in side}
    for a, b in across:
        for node, partner in ((a, b), (b, a)):
            if node in side and partner not in side:
                partners[node].add(partner)
    return partners


def _pieces(edges: Iterable[Pair]) -> list[dict[int, int]]:
    """The connected pieces of the graph of ``edges`` (sides joined by a slow pair), each split in
    two (side -> 0 or 1) such that every edge crosses between the halves; a piece that no such
    split exists for (an odd cycle) is left out."""
    graph: dict[int, set[int]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set()).add(a)
    pieces: list[dict[int, int]] = []
    seen: set[int] = set()
    for start in sorted(graph):
        if start in seen:
            continue
        half = {start: 0}
        queue, split = [start], True
        while queue:
            here = queue.pop()
            for there in sorted(graph[here]):
                if there not in half:
                    half[there] = 1 - half[here]
                    queue.append(there)
                elif half[there] == half[here]:
                    split = False
        seen.update(half)
        if split:
            pieces.append(half)
    return pieces


def _complete(side: set[int], across: Iterable[Pair]) -> bool:
    """Every node of ``side`` slow with two or more partners across: what tells a cut between two
    sets from as many separate slow links, one per node."""
    return all(len(partners) >= 2 for partners in _slow_with(side, across).values())


def find_cuts(
    measured: Mapping[Pair, list[float]],
    blamed: Callable[[Sequence[float]], bool],
    join: float,
    fast: float,
    excluded: set[int],
    typical: float,
    floor: float,
) -> list[SlowGroup]:
    """Cuts between node sets, from the pairs slow in every measurement (nodes slow with every
    partner, ``excluded``, left out). The nodes of those pairs are joined into sides by their
    pairs among themselves that are not slow (``join`` and up); then:

    - a side of two or more nodes whose every tested pair with a node outside it is slow, one
      re-tested, each of its nodes that met one outside slow with two or more there, is a group
      cut off from the rest (a switch uplink), wherever the others are (``_cut_off``);
    - the other slow pairs join sides into pieces; a piece whose sides split in two halves with
      every slow pair across, both of two or more nodes, two or more pairs across, one re-tested,
      is a cut between the halves (a route, a spine) when every node of one half is slow with two
      or more partners across, or when ``MANY_ACROSS`` pairs or more cross, their median under
      ``floor`` (a cut between large sets, where each node met the other half once only). Where
      no such split exists, the pairs are no cut. The halves are then grown
      (``_spread_halves``), and a group cut off that met only one half is a piece of the other.
    """
    slow = {pair: values for pair, values in measured.items() if blamed(values) and not excluded & set(pair)}
    suspects = {n for pair in slow for n in pair}
    sides = _Sides()
    for node in suspects:
        sides.find(node)
    for (a, b), values in measured.items():
        if a in suspects and b in suspects and max(values) >= join:
            sides.join(a, b)
    members = sides.members()
    nodes = {n for pair in measured for n in pair} - excluded
    off = _cut_off(measured, slow, nodes, members, sides)
    explained = {n for own, _, _, _ in off for n in own}
    rest = [p for p in slow if not explained & set(p) and sides.find(p[0]) != sides.find(p[1])]
    cuts: list[_Cut] = []
    for half in _pieces(pair_key(sides.find(a), sides.find(b)) for a, b in rest):
        left = {n for root, h in half.items() if h == 0 for n in members[root]}
        right = {n for root, h in half.items() if h == 1 for n in members[root]}
        across = sorted(p for p in rest if sides.find(p[0]) in half)
        if min(len(left), len(right)) < 2 or len(across) < 2:
            continue
        if not any(len(measured[p]) >= 2 for p in across):
            continue  # no pair across was re-tested: not confirmed
        if not (_complete(left, across) or _complete(right, across)):
            # Each node met the other half once or so: a forest of slow pairs splits in two halves
            # whatever they are, so only many pairs, slow beyond doubt, make a cut.
            deep = statistics.median(max(measured[p]) for p in across) < floor
            if len(across) < MANY_ACROSS or not deep:
                continue  # slow links, not a cut
        _spread_halves(measured, join, excluded, left, right, across)
        cuts.append((left, right, across, False))
    splits = list(cuts)
    for own, everyone_else, pairs, cut_off in off:
        # A group that met only one half of a cut between large sets is a piece of the other half.
        met = {b if a in own else a for a, b in pairs}
        for left, right, across, _ in splits:
            near, far = (left, right) if met <= left else (right, left) if met <= right else (None, None)
            if near is not None and far is not None:
                far.update(own)
                across.extend(pairs)
                break
        else:
            cuts.append((own, everyone_else, pairs, cut_off))
    return [
        _group(measured, own, other, cut_pairs, cut_off, fast, typical)
        for own, other, cut_pairs, cut_off in cuts
    ]


def _group(
    measured: Mapping[Pair, list[float]],
    own: set[int],
    other: set[int],
    cut_pairs: Sequence[Pair],
    cut_off: bool,
    fast: float,
    typical: float,
) -> SlowGroup:
    """A cut as its finding reads it: its sides in order, the best of its pairs across against the
    typical pair, and how fast the pairs inside either side ran."""
    inside = [
        max(values)
        for (a, b), values in measured.items()
        if ({a, b} <= own or {a, b} <= other) and max(values) >= fast
    ]
    best = float(statistics.median(max(measured[p]) for p in cut_pairs))
    left_side, right_side = sorted(own), sorted(other)
    return SlowGroup(
        sides=(tuple(left_side), tuple(right_side))
        if left_side < right_side
        else (tuple(right_side), tuple(left_side)),
        busbw_gbps=best,
        ratio=best / typical if typical > 0 else 0.0,
        inside_gbps=float(statistics.median(inside)) if inside else 0.0,
        pairs=tuple(sorted(set(cut_pairs))),
        cut_off=cut_off,
    )


def _spread_halves(
    measured: Mapping[Pair, list[float]],
    join: float,
    excluded: set[int],
    left: set[int],
    right: set[int],
    across: list[Pair],
) -> None:
    """The halves of a cut grown in place: a node fast with one half and with none of the other is
    of it (one fast with both is a third party, as a rack that reaches both), and a node slow with
    every partner (``excluded``) that met two or more of one half and, of the other, none or only
    nodes it ran at least SPLIT_RATIO x faster with, is of the other (it met the far side, and is
    no slow node), its pairs with the far side then across, with its partners of neither half
    that are fast with none of its own."""
    grew = True
    while grew:
        fast_with: dict[int, set[int]] = {}  # node outside the halves -> the halves (0, 1) it is fast with
        for (a, b), values in measured.items():
            if max(values) < join or excluded & {a, b}:
                continue
            for node, partner in ((a, b), (b, a)):
                if node not in left and node not in right:
                    if partner in left:
                        fast_with.setdefault(node, set()).add(0)
                    elif partner in right:
                        fast_with.setdefault(node, set()).add(1)
        joining = {node: halves.pop() for node, halves in fast_with.items() if len(halves) == 1}
        for node, half in joining.items():
            (left, right)[half].add(node)
        grew = bool(joining)
    for node in sorted(excluded):
        best = {p: max(v) for (a, b), v in measured.items() if node in (a, b) for p in (a, b) if p != node}
        for near, far in ((left, right), (right, left)):
            met = {p: busbw for p, busbw in best.items() if p in near}
            if len(met) < 2:
                continue
            own = [busbw for p, busbw in best.items() if p in far]
            if not own or max(own) >= SPLIT_RATIO * max(met.values()):
                far.add(node)
                # Its partners of neither half that are fast with no node of its own are of the
                # half it met.
                for p in sorted(set(best) - near - far):
                    if not any(p in q and far & set(q) and max(v) >= join for q, v in measured.items()):
                        near.add(p)
                across += [pair_key(node, p) for p in sorted(best) if p in near]
                break


def _cut_off(
    measured: Mapping[Pair, list[float]],
    slow: Mapping[Pair, list[float]],
    nodes: set[int],
    members: Mapping[int, list[int]],
    sides: _Sides,
) -> list[_Cut]:
    """Groups cut off from the rest (see find_cuts), each with every other node and its pairs
    with them; two such sides that met only each other, as one cut between them."""
    outside: dict[int, list[Pair]] = {}  # side -> every pair it was tested in with a node outside it
    for a, b in measured:
        for node, partner in ((a, b), (b, a)):
            if node in sides.parent and partner in nodes and partner not in members[sides.find(node)]:
                outside.setdefault(sides.find(node), []).append((a, b))
    far_sides: dict[int, set[int]] = {}  # side -> the sides (or lone nodes) its partners are in
    for root, pairs in sorted(outside.items()):
        group = set(members[root])
        if len(group) < 2 or len(group) * 2 > len(nodes):
            continue
        if not all(p in slow for p in pairs) or not any(len(measured[p]) >= 2 for p in pairs):
            continue
        # Each member that met a node outside met two or more there (a member tested only inside,
        # with another member, is a member all the same).
        met = [partners for partners in _slow_with(group, pairs).values() if partners]
        if len(met) >= 2 and all(len(partners) >= 2 for partners in met):
            far = {n for partners in met for n in partners}
            far_sides[root] = {sides.find(n) if n in sides.parent else n for n in far}
    found: list[_Cut] = []
    for root, far in sorted(far_sides.items()):
        (other,) = far if len(far) == 1 else (None,)
        if other is not None and other in far_sides:
            # Everything it met is in one other such side: the two are one cut (named once).
            if far_sides[other] == {root} and root < other:
                found.append((set(members[root]), set(members[other]), sorted(outside[root]), False))
            continue
        if any(len(members[o]) < len(members[root]) and root in far_sides[o] for o in far & far_sides.keys()):
            continue  # the far side of a smaller such side's cut: that one is the group
        found.append((set(members[root]), nodes - set(members[root]), sorted(outside[root]), True))
    return found
