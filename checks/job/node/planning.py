"""The job's pure planning: bus bandwidth, the sweep's sizes and iterations, the pair message, the
spread of the healthy pairs and the re-tests the ranks plan from the first ones. The judge
(``checks.job.pairs``) imports it too, so that the job and the judge share one copy.
"""

from __future__ import annotations

import random
import statistics
from typing import TYPE_CHECKING, Any, TypeVar

from checks.job.node.pair import Pair, pair_key

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

Test = TypeVar("Test", bound="tuple[int, ...]")

GB = 1e9
FLOAT32_BYTES = 4
# The sweep starts at 1 KiB: smaller messages only measure launch latency, which says
# nothing about the links.
SWEEP_START_BYTES = 1024


def bus_bandwidth(size_bytes: int, time_s: float, n_ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s of one all-reduce as nccl-tests defines them (GB = 1e9 bytes)."""
    if time_s <= 0:
        return 0.0, 0.0
    algbw = size_bytes / time_s / GB
    return algbw, algbw * (2.0 * (n_ranks - 1) / n_ranks if n_ranks > 0 else 0.0)


def sweep_sizes(max_bytes: int, start_bytes: int = SWEEP_START_BYTES, *, factor: int) -> list[int]:
    """Message sizes from ``start_bytes`` up to ``max_bytes`` (always included), each ``factor``
    times the one before (nccl-tests' ``-f``); the top two are a doubling apart, so that the plateau
    a fabric reaches at large messages is seen at two sizes whatever the factor."""
    top = max(FLOAT32_BYTES, max_bytes - max_bytes % FLOAT32_BYTES)
    factor = max(2, int(factor))
    sizes: list[int] = []
    size = min(start_bytes, top)
    while size < top:
        sizes.append(size)
        size *= factor
    half = top // 2 - (top // 2) % FLOAT32_BYTES
    if sizes and half > sizes[-1]:
        sizes.append(half)
    sizes.append(top)
    return sizes


def plan_iterations(probe_s: float, remaining_s: float, warmup_iters: int, iters: int) -> tuple[int, int]:
    """(warm-ups, timed iterations) that fit ``remaining_s``, keeping one op for the correctness check.

    Timed iterations come first (at least one); warm-ups get what is left. The probe op that
    measured ``probe_s`` was itself the first warm-up.
    """
    per_op = max(probe_s, 1e-9)
    available = remaining_s - per_op
    timed = max(1, min(iters, int(available / per_op)))
    warm = max(0, min(warmup_iters, int((available - timed * per_op) / per_op)))
    return warm, timed


# A probe op this many times slower than the timed ops that followed it waited out a stall (a
# retransmission timeout is 200 ms at least, an op of the lab's 4 MiB pair message 5 ms).
STALLED_PROBE_FACTOR = 4.0


def cut_short_time(per_op_s: float, timed: int, requested: int, probe_s: float) -> float:
    """The time per op a test reports: its timed ops' mean, or, when a stalled probe left the budget
    room for fewer ops than ``requested``, the mean over the probe and those ops. On a lossy link
    an op in several waits out a retransmission; the one or two ops that fit after such a probe
    may all be lucky, and a pair is not fast for them (at 10% loss on one node, its pairs run 30x
    slow over 20 ops, and can run at full speed over the 1 or 2 ops that follow a stalled probe)."""
    if timed >= requested or probe_s < STALLED_PROBE_FACTOR * per_op_s:
        return per_op_s
    return (probe_s + timed * per_op_s) / (timed + 1)


def pair_size(target_bytes: int, probe_bytes: int, probe_s: float, budget_s: float) -> int:
    """The pair message: ``target_bytes``, or a power of two at least ``probe_bytes`` small enough that
    one op (estimated from the probe, as if bandwidth-bound) takes a third of the budget at most."""
    if probe_s <= 0 or 3 * probe_s * target_bytes / probe_bytes <= budget_s:
        return target_bytes
    fits = probe_bytes * (budget_s / 3) / probe_s
    size = probe_bytes
    while size * 2 <= min(fits, target_bytes):
        size *= 2
    return size


def node_best(busbw_by_pair: Mapping[Pair, float]) -> dict[int, float]:
    """Each node's best pair busbw: what the node can do when its partner is healthy."""
    best: dict[int, float] = {}
    for (a, b), busbw in busbw_by_pair.items():
        for node in (a, b):
            if node not in best or busbw > best[node]:
                best[node] = busbw
    return best


# Node bests this many times apart are two populations (see typical_busbw), not one spread: more
# than NIC generations mixed in one cluster (200 against 400 Gb/s) set apart.
SPLIT_RATIO = 3.0


def typical_busbw(busbw_by_pair: Mapping[Pair, float]) -> float:
    """The median over nodes of each node's best pair: what a healthy pair does.

    A plain median of pairs fails on small clusters: with three nodes and one bad node, two
    of the three pairs are slow and the median is the slow value. A bad node drags down only
    its own best; a bad link drags down no node's best.

    When a quarter of the nodes or more did better than SPLIT_RATIO x the median node (a cut
    across the middle of the cluster, where most nodes met the other side only), the fast ones
    are what a healthy pair does: a pair cannot beat its hardware, and their median is taken
    instead.
    """
    best = sorted(node_best(busbw_by_pair).values())
    if not best:
        return 0.0
    middle = float(statistics.median(best))
    upper = best[(3 * len(best)) // 4]
    if middle < upper / SPLIT_RATIO:
        middle = float(statistics.median(v for v in best if v >= upper / SPLIT_RATIO))
    return middle


# Slow adapts to the spread of the run's own healthy pairs: their median minus some robust
# standard deviations (MAD_TO_SIGMA x the median absolute deviation), never above quiet_slow_ratio
# x that median (a quiet fabric) nor below slow_ratio x the typical pair (a noisy one). The job
# re-tests the pairs RETEST_SIGMAS below the median of the first tests (a wide net: the spread of
# a few dozen pairs is itself uncertain); the judge, with the re-tests as more samples, calls a
# measurement slow SPREAD_SIGMAS below it. Fewer healthy pairs than MIN_SPREAD_PAIRS tell no
# spread from a fault: the threshold is then slow_ratio alone. Measurements below a gap of
# GAP_SIGMAS standard deviations in the lower half are a slower cluster, not noise.
RETEST_SIGMAS = 1.5
SPREAD_SIGMAS = 2.0
WINDOW_SIGMAS = 3.0
MAD_TO_SIGMA = 1.4826
MIN_SPREAD_PAIRS = 8
GAP_SIGMAS = 2.0


def healthy_spread(values: Iterable[float], floor: float) -> tuple[float, float, int]:
    """(median, robust standard deviation, count) of the measurements at or above ``floor``."""
    healthy = [value for value in values if value >= floor]
    if not healthy:
        return 0.0, 0.0, 0
    center = float(statistics.median(healthy))
    deviation = float(statistics.median(abs(value - center) for value in healthy))
    return center, MAD_TO_SIGMA * deviation, len(healthy)


def _slow_cluster_top(values: Iterable[float], floor: float) -> float:
    """The lowest measurement above a gap that sets the slower part of ``values`` apart (``floor``
    where none does): the widest gap between consecutive measurements at or above ``floor`` in
    their lower half, when it is GAP_SIGMAS standard deviations of the measurements above it or
    wider. Pairs with a slow node form such a cluster: where a quarter of the pairs met one, their
    median and absolute deviation would take them in as noise."""
    ordered = sorted(value for value in values if value >= floor)
    if len(ordered) < 2 * MIN_SPREAD_PAIRS:
        return floor
    index = max(range(1, len(ordered) // 2 + 1), key=lambda i: ordered[i] - ordered[i - 1])
    above = ordered[index:]
    if ordered[index] - ordered[index - 1] < GAP_SIGMAS * statistics.pstdev(above):
        return floor
    return ordered[index]


def robust_spread(values: Iterable[float], floor: float, quiet_ratio: float) -> tuple[float, float, int]:
    """(center, standard deviation, count) of the healthy measurements: those at or above ``floor``,
    and above the gap that sets a cluster of slower ones apart where there is one (see
    ``_slow_cluster_top``), give a first median and robust deviation; the mean and standard
    deviation are then taken over those within WINDOW_SIGMAS of that median, either side, and again
    within a narrower window of those (no slow pair widens them, and over a few dozen pairs they
    are far steadier than the median and its absolute deviation)."""
    values = list(values)
    edge = _slow_cluster_top(values, floor)
    center, sigma, count = healthy_spread(values, edge)
    if count < MIN_SPREAD_PAIRS:
        return center, sigma, count
    # Twice: the window of the second pass is drawn by the steadier first estimate.
    for width in (WINDOW_SIGMAS, WINDOW_SIGMAS - 0.5):
        low = max(floor, center - width * sigma)
        window = [value for value in values if max(low, edge) <= value <= 2 * center - low]
        if len(window) < MIN_SPREAD_PAIRS:
            break
        center, sigma, count = float(statistics.fmean(window)), float(statistics.pstdev(window)), len(window)
    return center, sigma, count


def spread_threshold(
    spread: tuple[float, float, int], floor: float, quiet_ratio: float, sigmas: float
) -> float:
    """``sigmas`` robust standard deviations below the median of ``spread`` (center, sigma, count),
    within [floor, quiet_ratio x center]; ``floor`` when too few pairs were healthy or quiet_ratio
    is not above the floor's ratio."""
    center, sigma, count = spread
    if count < MIN_SPREAD_PAIRS or quiet_ratio * center <= floor:
        return floor
    return max(floor, min(quiet_ratio * center, center - sigmas * sigma))


def retest_threshold(busbw_by_pair: Mapping[Pair, float], slow_ratio: float, quiet_ratio: float) -> float:
    """busbw below which the job re-tests a pair, from the first tests (see RETEST_SIGMAS)."""
    floor = slow_ratio * typical_busbw(busbw_by_pair)
    spread = robust_spread(busbw_by_pair.values(), floor, quiet_ratio)
    return spread_threshold(spread, floor, quiet_ratio, RETEST_SIGMAS)


def slow_everywhere(measured: Mapping[Pair, Sequence[float]], threshold: float) -> set[int]:
    """Nodes measured with two or more partners and below ``threshold`` in every measurement of
    ``measured`` (each pair's first test and re-tests): slow nodes, or nodes of a group cut off,
    whose pairs measure them rather than the fabric's noise."""
    partners: dict[int, set[int]] = {}
    fast: set[int] = set()
    for (a, b), values in measured.items():
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
        if max(values) >= threshold:
            fast.update((a, b))
    return {node for node, others in partners.items() if len(others) >= 2 and node not in fast}


def pack_rounds(
    tests: Iterable[Test], parts: Callable[[Test], Iterable[int]] | None = None
) -> list[list[Test]]:
    """Tests packed first-fit into rounds in which no part is in two tests, in the order given; a
    test's parts are its nodes (its first two numbers) unless ``parts`` says (a rail test's ranks)."""
    rounds: list[list[Test]] = []
    busy: list[set[int]] = []
    for test in tests:
        taken = set(parts(test)) if parts else {test[0], test[1]}
        for index, used in enumerate(busy):
            if not taken & used:
                rounds[index].append(test)
                used.update(taken)
                break
        else:
            rounds.append([test])
            busy.append(taken)
    return rounds


# Known-good partners each suspect node is re-tested with, and fast pairs re-tested as controls
# on small clusters (see retest_plan).
RETEST_GOOD_PARTNERS = 2
CONTROL_PAIRS = 2


def _good_partners(
    busbw_by_pair: Mapping[Pair, float],
    lonely: Sequence[int],
    fast: set[int],
    partners: Mapping[int, set[int]],
    slow_count: Mapping[int, int],
    planned: set[Pair],
) -> list[Pair]:
    """RETEST_GOOD_PARTNERS known-good partners for each node slow with all its partners: the good
    node with the fewest uses, fewest slow pairs, not yet its partner, drawn from around the
    cluster (see retest_plan); the tests in order, none of them in ``planned``."""
    planned = set(planned)
    tests: list[Pair] = []
    good = sorted(fast, key=lambda node: (slow_count.get(node, 0), node))
    usage = {node: 0 for node in good}
    # Good nodes whose best pair was under the median: fast, but near the edge of the spread, so a
    # slow node's test with one may confirm nothing; taken after the others.
    middle = statistics.median(busbw_by_pair.values())
    best = node_best(busbw_by_pair)
    weak = {node for node in good if best[node] < middle}
    by_position = sorted(good)
    for node in lonely:
        for draw in range(RETEST_GOOD_PARTNERS):
            # The good node with the fewest uses, fewest slow pairs, not yet its partner, and the
            # first from a place drawn for this node and partner (the same on every rank): scanned
            # in that last order, so the scan stops at the first that nothing can beat. Drawn, not
            # the next in rank order: neighbours in the inventory often share a switch, and a node
            # of a group cut off with it would look fast with its own.
            least_used = min(usage.values())
            start = random.Random(node * RETEST_GOOD_PARTNERS + draw).randrange(len(by_position))
            partner, top = None, None
            for index in range(len(by_position)):
                g = by_position[(start + index) % len(by_position)]
                if g == node or pair_key(node, g) in planned:
                    continue
                rank = (g in partners[node], usage[g], slow_count.get(g, 0), g in weak)
                if top is None or rank < top:
                    partner, top = g, rank
                if rank == (False, least_used, 0, False):
                    break
            if partner is None:
                break
            usage[partner] += 1
            key = pair_key(node, partner)
            planned.add(key)
            tests.append(key)
    return tests


def retest_plan(
    busbw_by_pair: Mapping[Pair, float], slow_ratio: float, quiet_ratio: float
) -> list[list[Pair]]:
    """Rounds of re-tests for the pairs below ``retest_threshold``; deterministic.

    Every slow pair is re-tested once, and every node that was slow with all its partners is
    tested against two known-good nodes (fast with some partner, fewest slow pairs first, a
    partner it has not had yet preferred, then one well inside the spread, drawn from around
    the cluster rather than its neighbours in rank order). Two, because one good partner may
    sit behind a slow link: a healthy node that met a slow node and then crossed a slow link
    would be blamed. A node already slow with two or more partners is judged by its tests
    against good nodes alone: re-testing each of its pairs would only repeat the same slow
    number, one round per pair.
    """
    threshold = retest_threshold(busbw_by_pair, slow_ratio, quiet_ratio)
    slow = sorted(pair for pair, busbw in busbw_by_pair.items() if busbw < threshold)
    if not slow:
        return []
    partners: dict[int, set[int]] = {}
    fast: set[int] = set()
    slow_count: dict[int, int] = {}
    for (a, b), busbw in busbw_by_pair.items():
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
        if busbw >= threshold:
            fast.update((a, b))
        else:
            slow_count[a] = slow_count.get(a, 0) + 1
            slow_count[b] = slow_count.get(b, 0) + 1
    lonely = sorted({node for pair in slow for node in pair} - fast)
    judged_alone = {node for node in lonely if len(partners[node]) >= 2}
    tests: list[Pair] = [p for p in slow if p[0] not in judged_alone and p[1] not in judged_alone]
    planned = set(tests)
    for key in _good_partners(busbw_by_pair, lonely, fast, partners, slow_count, planned):
        planned.add(key)
        tests.append(key)
    # Too few pairs to measure the spread: the fast pairs nearest their median are re-tested too,
    # as controls. Slower in the re-test wave, they say the whole fabric (or the machines) was
    # busy then, and the judge scales the re-tests back by as much.
    # The slow pairs are then re-tested once more, after the controls: a link slow three times,
    # seconds apart, is no passing burst of someone else's work.
    fast_pairs = [(busbw, pair) for pair, busbw in busbw_by_pair.items() if busbw >= threshold]
    if fast_pairs and len(fast_pairs) < MIN_SPREAD_PAIRS:
        middle = statistics.median(busbw for busbw, _ in fast_pairs)
        for _, pair in sorted(fast_pairs, key=lambda item: (abs(item[0] - middle), item[1]))[:CONTROL_PAIRS]:
            if pair not in planned:
                planned.add(pair)
                tests.append(pair)
        tests += [pair for pair in slow if pair in planned]
    # Suspects are also tested with each other, in a chain: nodes fast among themselves but slow
    # with the others are a group cut off from them (a switch uplink), not so many slow nodes.
    if len(lonely) >= 3:
        for offset in (0, 1):
            for index in range(offset, len(lonely) - 1, 2):
                key = pair_key(lonely[index], lonely[index + 1])
                if key not in planned and key not in busbw_by_pair:
                    planned.add(key)
                    tests.append(key)
    return pack_rounds(tests)


def side_plan(
    measurements: Iterable[Mapping[str, Any]], slow_ratio: float, quiet_ratio: float
) -> list[list[Pair]]:
    """Rounds testing with each other the nodes that still look slow after the re-tests; deterministic.

    A node slow with its first partner and far too slow with a known-good node it was re-tested
    against (beyond the healthy pairs' window) is a slow node or one of a group cut off from the
    rest (a switch uplink; a known-good node may be of the group too, paired with another of it
    in the first wave): only a test with another such node tells (fast together: a group).
    Each is tested with the next two in rank order (about four rounds), so that a group is
    joined through its members' tests with each other wherever the inventory lists them, and
    past one slow node between them.
    """
    records = list(measurements)
    first = first_busbw(records)
    threshold = retest_threshold(first, slow_ratio, quiet_ratio)
    floor = slow_ratio * typical_busbw(first)
    # Slow beyond doubt: outside the healthy pairs' window (see robust_spread).
    spread = robust_spread(first.values(), floor, quiet_ratio)
    clearly = spread_threshold(spread, floor, quiet_ratio, WINDOW_SIGMAS)
    good = {node for pair, busbw in first.items() if busbw >= threshold for node in pair}
    tested: set[Pair] = set()
    with_good: dict[int, list[float]] = {}
    for record in records:
        a, b = (int(node) for node in record["nodes"])
        tested.add(pair_key(a, b))
        for node, partner in ((a, b), (b, a)):
            if node not in good and partner in good:
                with_good.setdefault(node, []).append(float(record["busbw_gbps"]))
    looks_slow = sorted(node for node, values in with_good.items() if min(values) < clearly)
    tests: list[Pair] = []
    for step in (1, 2):
        for index in range(len(looks_slow) - step):
            key = pair_key(looks_slow[index], looks_slow[index + step])
            if key not in tested:
                tested.add(key)
                tests.append(key)
    return pack_rounds(tests)


# Small clusters: with at most SMALL_PAIRS pairs there are too few to measure the noise across
# them. When a pair there reads STRAGGLER_RATIO of the typical pair or slower, the first wave's
# pairs run REPEATS more times, in rounds as the first wave ran them: each pair's repeats measure
# the run's own noise, and a node slow with every partner beyond it is told (checks.job.stragglers).
SMALL_PAIRS = 10
STRAGGLER_RATIO = 0.8
REPEATS = 2


def repeat_plan(busbw_by_pair: Mapping[Pair, float]) -> list[list[Pair]]:
    """Rounds repeating every pair of a small cluster REPEATS times when one read slow; deterministic."""
    typical = typical_busbw(busbw_by_pair)
    if not busbw_by_pair or len(busbw_by_pair) > SMALL_PAIRS or typical <= 0:
        return []
    if all(busbw >= STRAGGLER_RATIO * typical for busbw in busbw_by_pair.values()):
        return []
    rounds = pack_rounds(sorted(busbw_by_pair))
    return [list(pairs) for _ in range(REPEATS) for pairs in rounds]


def first_busbw(measurements: Iterable[Mapping[str, Any]]) -> dict[Pair, float]:
    """busbw of each pair's first test (re-tests left out)."""
    found: dict[Pair, float] = {}
    for record in measurements:
        if record.get("retest"):
            continue
        a, b = record["nodes"]
        found.setdefault(pair_key(int(a), int(b)), float(record["busbw_gbps"]))
    return found
