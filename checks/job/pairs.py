"""Naming the slow node, link or group from what the pair tests measured (name_culprits), with the
first wave's plan (checks.job.pair_plan) and the job script's own re-test planner re-exported for
the judge and the simulations. Pure and fast, for simulations of 64 to 4,096 nodes.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checks.job.cuts import SlowGroup, find_cuts
from checks.job.node.pair import Pair, pair_key
from checks.job.node.planning import (
    CONTROL_PAIRS,
    MIN_SPREAD_PAIRS,
    RETEST_SIGMAS,
    SPREAD_SIGMAS,
    first_busbw,
    node_best,
    pack_rounds,
    retest_plan,
    retest_threshold,
    robust_spread,
    side_plan,
    slow_everywhere,
    spread_threshold,
    typical_busbw,
)
from checks.job.pair_plan import (
    FULL_PLAN_MAX_NODES,
    pairs_tested,
    plan_mode,
    plan_rounds,
)
from checks.job.settings import AllreduceSection

__all__ = [
    "FULL_PLAN_MAX_NODES",
    "QUIET_SLOW_RATIO",
    "SPREAD_SIGMAS",
    "Pair",
    "PairJudgement",
    "SlowGroup",
    "SlowLink",
    "SlowNode",
    "Unconfirmed",
    "WithinNoise",
    "first_busbw",
    "name_culprits",
    "node_best",
    "pack_rounds",
    "pair_key",
    "pairs_tested",
    "plan_mode",
    "plan_rounds",
    "retest_plan",
    "retest_threshold",
    "side_plan",
    "typical_busbw",
]

# The configuration's quiet_slow_ratio, for callers that judge without a configuration at hand
# (simulations, tests); the job itself is sent the run's own.
QUIET_SLOW_RATIO = AllreduceSection().quiet_slow_ratio
# See name_culprits: a pair clears its nodes (is fast) this many robust standard deviations below
# the median or above; what a finding blames is slow on average this many below it.
FAST_SIGMAS = 1.0
CONFIRM_SIGMAS = 2.5
# A slow link is named only when its mean is this many standard errors below each of its nodes'
# mean with their other partners (see _link_stands_out); a node counts as healthy there while its
# other pairs are less than CLEAR_SIGMAS standard errors below the healthy pairs' center. A cut
# is named only when its pairs across are, on average, OUTSIDE_SIGMAS below that center.
LINK_SIGMAS = 3.0
CLEAR_SIGMAS = 3.0
OUTSIDE_SIGMAS = 3.0


# --------------------------------------------------------------------------- slow nodes, links, groups


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
class WithinNoise:
    """A node with no fast pair that no finding names: its pairs ran within the run's noise of the
    healthy ones, or no re-test against known-fast partners confirmed it. A note, not a failure."""

    node: int
    ratio: float  # its pairs' mean over the healthy pairs' center


@dataclass(frozen=True)
class PairJudgement:
    """What the pair tests of one run say: the typical pair and the threshold below which a pair is
    slow, the slow nodes, links and groups named, the tests left unconfirmed, each node's ratio."""

    typical_busbw_gbps: float  # the median over nodes of each node's best first-test pair
    median_pair_busbw_gbps: float  # the plain median of the first tests, for reference
    threshold_gbps: float  # below it a pair is slow (slow_threshold: adapts to the spread)
    slow_nodes: tuple[SlowNode, ...] = ()
    slow_links: tuple[SlowLink, ...] = ()
    unconfirmed: tuple[Unconfirmed, ...] = ()
    # Pairs whose best measurement is under the absolute floor (min_pair_busbw_gbps), with it.
    below_floor: tuple[tuple[Pair, float], ...] = ()
    # Each node's best measurement over the typical pair: 1.0 is the median node.
    node_ratio: Mapping[int, float] = field(default_factory=dict)
    slow_groups: tuple[SlowGroup, ...] = ()
    # The healthy first tests: their median and robust standard deviation (what the threshold
    # adapted to), and how many there were.
    healthy_median_gbps: float = 0.0
    healthy_spread_gbps: float = 0.0
    healthy_pairs: int = 0
    within_noise: tuple[WithinNoise, ...] = ()

    @property
    def noise(self) -> float:
        """The run's measured noise: two standard deviations of the healthy pairs over their center
        (0.0 where too few pairs were healthy to tell)."""
        if self.healthy_pairs < MIN_SPREAD_PAIRS or self.healthy_median_gbps <= 0:
            return 0.0
        return 2 * self.healthy_spread_gbps / self.healthy_median_gbps

    @property
    def confirmed(self) -> bool:
        return bool(self.slow_nodes or self.slow_links or self.slow_groups)


@dataclass(frozen=True)
class _Evidence:
    """Every measurement of a job's pair tests, arranged for naming."""

    first: Mapping[Pair, float]
    retests: Mapping[Pair, list[float]]
    measured: Mapping[Pair, list[float]]  # first test and re-tests of every pair
    seen: Mapping[int, list[tuple[int, float, bool]]]  # node -> (partner, busbw, retest)
    typical: float

    @classmethod
    def of(cls, records: Sequence[Mapping[str, Any]]) -> _Evidence:
        first = first_busbw(records)
        retests: dict[Pair, list[float]] = {}
        typical = typical_busbw(first)
        for record in records:
            if record.get("retest") and not record.get("repeat"):  # repeats: checks.job.stragglers
                a, b = record["nodes"]
                # Alone (CPU ranks in turn), a pair outruns the first wave's shared rounds: it counts
                # as the typical pair at most.
                busbw = min(float(record["busbw_gbps"]), typical if record.get("alone") else float("inf"))
                retests.setdefault(pair_key(int(a), int(b)), []).append(busbw)
        measured: dict[Pair, list[float]] = {pair: [busbw] for pair, busbw in first.items()}
        for pair, values in retests.items():
            measured.setdefault(pair, []).extend(values)
        seen: dict[int, list[tuple[int, float, bool]]] = {}
        for (a, b), busbw in first.items():
            seen.setdefault(a, []).append((b, busbw, False))
            seen.setdefault(b, []).append((a, busbw, False))
        for (a, b), values in retests.items():
            for busbw in values:
                seen.setdefault(a, []).append((b, busbw, True))
                seen.setdefault(b, []).append((a, busbw, True))
        return cls(first, retests, measured, seen, typical)

    def ratio(self, busbw: float) -> float:
        return busbw / self.typical if self.typical > 0 else 0.0


@dataclass(frozen=True)
class _Named:
    threshold: float
    slow_nodes: tuple[SlowNode, ...]
    slow_groups: tuple[SlowGroup, ...]
    slow_links: tuple[SlowLink, ...]
    unconfirmed: tuple[Unconfirmed, ...]
    within_noise: tuple[WithinNoise, ...] = ()

    def blamed_pairs(self, evidence: _Evidence) -> set[Pair]:
        """Every pair a finding explains: the slow nodes' pairs, the cuts' and the links'."""
        nodes = {s.node for s in self.slow_nodes}
        pairs = {p for p in evidence.measured if nodes & set(p)}
        pairs.update(p for g in self.slow_groups for p in g.pairs)
        pairs.update(link.nodes for link in self.slow_links)
        return pairs


def _busy_retests_scaled(evidence: _Evidence, threshold: float) -> _Evidence:
    """The evidence with its re-tests scaled back by how much slower the control pairs (fast in the
    first wave, re-tested on small clusters) ran in the re-test wave: a wave slowed by a busy
    fabric or busy machines blames no link. Only ever scaled up, never down."""
    ratios = [
        values[0] / evidence.first[pair]
        for pair, values in evidence.retests.items()
        if evidence.first.get(pair, 0.0) >= threshold > 0 and values
    ]
    if len(ratios) < CONTROL_PAIRS or statistics.median(ratios) >= 1.0:
        return evidence
    factor = float(statistics.median(ratios))
    retests = {pair: [v / factor for v in values] for pair, values in evidence.retests.items()}
    records: list[dict[str, Any]] = [
        {"nodes": list(pair), "busbw_gbps": busbw, "retest": False} for pair, busbw in evidence.first.items()
    ]
    records += [
        {"nodes": list(pair), "busbw_gbps": v, "retest": True}
        for pair, values in retests.items()
        for v in values
    ]
    return _Evidence.of(records)


class _Naming:
    """Slow nodes, cuts and links under the thresholds that ``spread`` sets: each rule a method."""

    def __init__(
        self, evidence: _Evidence, spread: tuple[float, float, int], floor: float, quiet_ratio: float
    ):
        self.evidence = evidence
        self.floor = floor
        self.threshold = spread_threshold(spread, floor, quiet_ratio, SPREAD_SIGMAS)
        # A measurement just above the slow threshold tells neither way: a pair clears its nodes
        # only from fast_threshold up, and what a finding blames must be slow on average, well
        # below the threshold (one unlucky measurement and its unlucky re-test are not a fault).
        self.fast_threshold = max(self.threshold, spread_threshold(spread, floor, quiet_ratio, FAST_SIGMAS))
        self.blame_threshold = spread_threshold(spread, floor, quiet_ratio, CONFIRM_SIGMAS)
        self.fast_with = {
            node: {p for p, busbw, _ in obs if busbw >= self.fast_threshold}
            for node, obs in evidence.seen.items()
        }
        self.center, self.sigma, count = spread
        self.measured_spread = count >= MIN_SPREAD_PAIRS and self.sigma > 0

    def blamed(self, values: Sequence[float]) -> bool:
        return max(values) < self.threshold and statistics.fmean(values) < self.blame_threshold

    def slow_node(self, node: int, others: set[int], explained: set[Pair]) -> SlowNode | None:
        """``node`` as a slow node, judged without its pairs with ``others`` (slow nodes already)
        and the pairs ``explained`` (by a cut)."""
        seen = self.evidence.seen
        observed = [
            (p, busbw, retest)
            for p, busbw, retest in seen[node]
            if p not in others and pair_key(node, p) not in explained
        ]
        partners = sorted({p for p, _, _ in observed})
        if self.fast_with[node] or len(partners) < 2:
            return None
        # Slow on average, and in two measurements at least, most of its own, even without its
        # worst partner when it had three or more: one slow link beside middling pairs is no
        # slow node.
        by_partner: dict[int, list[float]] = {}
        for p, busbw, _ in observed:
            by_partner.setdefault(p, []).append(busbw)
        worst = min(by_partner, key=lambda p: (statistics.fmean(by_partner[p]), p))
        values = [busbw for p, busbw, _ in observed if p != worst or len(by_partner) < 3]
        below = sum(busbw < self.threshold for busbw in values)
        if statistics.fmean(values) >= self.blame_threshold or below < 2 or 2 * below <= len(values):
            return None
        confirming = [
            p
            for p, busbw, retest in observed
            if retest and busbw < self.threshold and self.fast_with.get(p, set()) - {node}
        ]
        if not confirming:
            return None
        best = max(busbw for _, busbw, _ in seen[node])
        return SlowNode(node, best, self.evidence.ratio(best), tuple(sorted({p for p, _, _ in seen[node]})))

    def level(self, node: int, without: set[int]) -> list[float]:
        """``node``'s measurements with partners outside ``without``, less its worst partner's when
        two or more remain (one of them may sit behind another slow link)."""
        by_partner: dict[int, list[float]] = {}
        for p, busbw, _ in self.evidence.seen[node]:
            if p not in without:
                by_partner.setdefault(p, []).append(busbw)
        if len(by_partner) >= 2:
            del by_partner[min(by_partner, key=lambda p: (statistics.fmean(by_partner[p]), p))]
        return [busbw for values in by_partner.values() for busbw in values]

    def cleared(self, node: int, without: set[int]) -> bool:
        """Whether ``node`` ran like a healthy node with partners outside ``without``: its mean there
        less than CLEAR_SIGMAS standard errors below the healthy pairs' center."""
        values = self.level(node, without)
        gap = self.center - statistics.fmean(values) if values else 0.0
        return bool(values) and gap < CLEAR_SIGMAS * self.sigma / len(values) ** 0.5

    def link_stands_out(self, pair: Pair, values: Sequence[float], slow_set: set[int]) -> bool:
        """Whether ``pair`` is slower than both its nodes are with other partners, beyond the run's
        noise: a node slow within the noise slows its own pairs alike, and names no link."""
        if not self.measured_spread:
            return True
        a, b = pair
        mean = statistics.fmean(values)
        for node, other in ((a, b), (b, a)):
            others = self.level(node, {other} | slow_set)
            if not self.cleared(node, {other} | slow_set):
                return False
            error = self.sigma * (1 / len(values) + 1 / len(others)) ** 0.5
            if statistics.fmean(others) - mean < LINK_SIGMAS * error:
                return False
        return True

    def cut_stands_out(self, group: SlowGroup) -> bool:
        """Whether the pairs across a cut ran OUTSIDE_SIGMAS below the healthy center on average, and
        each node of its smaller side that met the other side ran with its own side beyond the
        noise faster than across: slow nodes are slow with each other too, and make no group."""
        if not self.measured_spread:
            return True
        measured = self.evidence.measured
        across = [v for pair in group.pairs for v in measured[pair]]
        if statistics.fmean(across) >= self.center - OUTSIDE_SIGMAS * self.sigma:
            return False
        small = set(group.sides[0] if len(group.sides[0]) <= len(group.sides[1]) else group.sides[1])
        for node in sorted({n for pair in group.pairs for n in pair} & small):
            mine = [v for pair in group.pairs if node in pair for v in measured[pair]]
            inside = [
                v for pair, values in measured.items() if node in pair and set(pair) <= small for v in values
            ]
            if not inside:
                continue  # met only the other side (a cut between large sets): the mean above decides
            inside_mean = statistics.fmean(inside)
            error = self.sigma * (1 / len(mine) + 1 / len(inside)) ** 0.5
            if inside_mean - statistics.fmean(mine) < LINK_SIGMAS * error:
                return False
        return True

    def links(self, slow_set: set[int], in_groups: set[Pair]) -> tuple[list[SlowLink], list[Unconfirmed]]:
        """The pairs slow in the first wave that no slow node or cut explains: slow links where the
        re-test confirms them and both nodes are fast elsewhere, notes otherwise."""
        first, retests, fast_with = self.evidence.first, self.evidence.retests, self.fast_with
        slow_links: list[SlowLink] = []
        unconfirmed: list[Unconfirmed] = []
        for pair in sorted(p for p, busbw in first.items() if busbw < self.threshold):
            a, b = pair
            if a in slow_set or b in slow_set or pair in in_groups:
                continue  # explained by the slow node or the cut
            again = tuple(retests.get(pair, ()))
            if again and self.blamed([first[pair], *again]):
                if (
                    fast_with[a] - {b}
                    and fast_with[b] - {a}
                    and self.link_stands_out(pair, [first[pair], *again], slow_set)
                ):
                    best = max(first[pair], *again)
                    slow_links.append(SlowLink(pair, best, self.evidence.ratio(best), first[pair], again))
                    continue
                reason = "slow again on re-test, but a node of it has no fast partner to tell node from link"
            elif first[pair] >= self.blame_threshold:
                continue  # at the edge of the spread, and not again: noise, not worth a note
            elif again:
                reason = "fast on re-test"
            else:
                reason = "not re-tested"
            unconfirmed.append(Unconfirmed(pair, first[pair], again, reason))
        return slow_links, unconfirmed

    def name(self) -> _Named:
        """Cuts first, among the nodes that are not slow with every partner; then slow nodes, each
        without the pairs a cut explains, and again without its pairs with the other slow nodes (a
        healthy node that met a slow node is not blamed for that pair); then links."""
        evidence, seen = self.evidence, self.evidence.seen
        everywhere = slow_everywhere(evidence.measured, self.threshold)
        slow_groups = find_cuts(
            evidence.measured, self.blamed, self.threshold, self.fast_threshold, everywhere, evidence.typical,
            self.floor,
        )  # fmt: skip
        slow_groups = [group for group in slow_groups if self.cut_stands_out(group)]
        in_groups = {pair for group in slow_groups for pair in group.pairs}
        suspects = {node for node in seen if self.slow_node(node, set(), in_groups) is not None}
        found = [self.slow_node(node, suspects - {node}, in_groups) for node in sorted(suspects)]
        slow_nodes = [s for s in found if s is not None]
        slow_set = {s.node for s in slow_nodes}
        slow_links, unconfirmed = self.links(slow_set, in_groups)
        in_group_nodes = {n for group in slow_groups for pair in group.pairs for n in pair}
        linked = {n for link in slow_links for n in link.nodes}
        within_noise = [
            WithinNoise(node, statistics.fmean(busbw for _, busbw, _ in seen[node]) / self.center)
            for node in sorted(seen)
            if not self.fast_with[node] and node not in slow_set | in_group_nodes | linked and self.center > 0
        ]
        return _Named(
            self.threshold,
            tuple(slow_nodes),
            tuple(slow_groups),
            tuple(slow_links),
            tuple(unconfirmed),
            tuple(within_noise),
        )


def _name(evidence: _Evidence, spread: tuple[float, float, int], floor: float, quiet_ratio: float) -> _Named:
    """Slow nodes, cuts and links under the thresholds that ``spread`` sets."""
    return _Naming(evidence, spread, floor, quiet_ratio).name()


def name_culprits(
    measurements: Iterable[Mapping[str, Any]],
    n_nodes: int,
    slow_ratio: float,
    min_pair_busbw_gbps: float = 0.0,
    quiet_ratio: float = QUIET_SLOW_RATIO,
) -> PairJudgement:
    """Slow nodes, slow groups of nodes and slow links from pair measurements (first tests and re-tests).

    A pair is slow below a threshold that adapts to the spread of the healthy pairs (see
    ``robust_spread``; at most ``quiet_ratio`` x their center, at least ``slow_ratio`` x the typical
    pair). A finding is confirmed by a re-test before it fails a run: a slow node needs two or more
    partners, none fast, and a slow re-test against a node that is fast with someone else; a slow
    group (a cut) needs two sets of nodes, fast inside, with two or more pairs across, all slow; a
    slow link needs a slow re-test and both nodes fast with other partners. ``n_nodes`` sizes the
    ratio table, so that a node no test reached still appears (with no ratio).

    The spread is judged twice: from the first tests (what the job planned its re-tests by), then
    from every measurement that the first naming left unexplained (the re-tests of healthy
    suspects are more samples of it); the wider of the two decides, so that a few dozen first
    tests that happened to look quiet blame no healthy node. Both leave out the pairs of nodes
    that were below the job's re-test threshold with every partner, re-tests included: where
    8 of 64 nodes are slow, their pairs would otherwise widen the noise until none is named.
    """
    records = list(measurements)
    evidence = _Evidence.of(records)
    first = evidence.first
    median_pair = float(statistics.median(first.values())) if first else 0.0
    floor = slow_ratio * evidence.typical
    spread = robust_spread(first.values(), floor, quiet_ratio)
    evidence = _busy_retests_scaled(evidence, spread_threshold(spread, floor, quiet_ratio, SPREAD_SIGMAS))
    retests = evidence.retests
    apart = slow_everywhere(evidence.measured, spread_threshold(spread, floor, quiet_ratio, RETEST_SIGMAS))
    apart_pairs = {p for p in evidence.measured if apart & set(p)}
    kept = robust_spread((v for p, v in first.items() if p not in apart_pairs), floor, quiet_ratio)
    spread = kept if kept[2] >= MIN_SPREAD_PAIRS else spread
    named = _name(evidence, spread, floor, quiet_ratio)
    explained = named.blamed_pairs(evidence) | apart_pairs
    unexplained = [v for pair, values in evidence.measured.items() if pair not in explained for v in values]
    pooled = robust_spread(unexplained, floor, quiet_ratio)
    if spread_threshold(pooled, floor, quiet_ratio, SPREAD_SIGMAS) < named.threshold:
        spread = pooled
        named = _name(evidence, spread, floor, quiet_ratio)
    center, sigma, healthy_count = spread

    below_floor: list[tuple[Pair, float]] = []
    if min_pair_busbw_gbps > 0:
        for pair, busbw in sorted(first.items()):
            best = max(busbw, *retests.get(pair, [busbw]))
            if best < min_pair_busbw_gbps:
                below_floor.append((pair, best))

    best_of_node = {node: max(busbw for _, busbw, _ in obs) for node, obs in evidence.seen.items()}
    node_ratio = {node: evidence.ratio(best_of_node[node]) for node in range(n_nodes) if node in best_of_node}
    return PairJudgement(
        typical_busbw_gbps=evidence.typical,
        median_pair_busbw_gbps=median_pair,
        threshold_gbps=named.threshold,
        slow_nodes=named.slow_nodes,
        slow_links=named.slow_links,
        unconfirmed=named.unconfirmed,
        below_floor=tuple(below_floor),
        node_ratio=node_ratio,
        slow_groups=named.slow_groups,
        healthy_median_gbps=center,
        healthy_spread_gbps=sigma,
        healthy_pairs=healthy_count,
        within_noise=named.within_noise,
    )
