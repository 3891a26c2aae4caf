"""Pair planning and culprit naming on simulated clusters (a pair runs at its slower node's speed times
its link's factor and noise, re-tested as the job plans), and why a recorded job died.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import statistics
from collections.abc import Mapping
from typing import Any

import pytest

from checks.job.failures import (
    NodeFailure,
    RendezvousCount,
    explain_failures,
    last_error_line,
    rank_end,
)
from checks.job.job_findings import job_results
from checks.job.node.markers import END_MARKER
from checks.job.node.planning import first_busbw, robust_spread
from checks.job.node.ranks_host import rank_end as end_record
from checks.job.pairs import (
    FULL_PLAN_MAX_NODES,
    QUIET_SLOW_RATIO,
    Pair,
    PairJudgement,
    name_culprits,
    pack_rounds,
    pair_key,
    plan_rounds,
    retest_plan,
    side_plan,
    typical_busbw,
)
from tests.test_allreduce import JOBS, load_job, replace_node

HEALTHY_GBPS = 20.0


def simulate(
    n_nodes: int,
    *,
    mode: str = "auto",
    slow_nodes: Mapping[int, float] | None = None,
    slow_links: Mapping[Pair, float] | None = None,
    noise: float = 0.0,
    transient: Mapping[Pair, float] | None = None,
    busy_retests: float = 1.0,
    seed: int = 0,
    slow_ratio: float = 0.5,
    plan_seed: int | None = None,
) -> tuple[list[dict[str, Any]], list[list[Pair]], list[list[Pair]]]:
    """The measurements of a job on this cluster: first rounds (a sparse plan's partners drawn from
    ``plan_seed``, in the inventory's order when None), then the re-tests the job plans, then its
    tests of the nodes that still look slow with each other.

    ``slow_nodes``: node -> factor of its speed; ``slow_links``: pair -> factor (a cut between
    groups: every pair across); ``transient``: pair -> factor of its first test only (a burst of
    traffic from someone else); ``busy_retests``: factor of every re-test (the machines or the
    fabric busy with something else by then).
    """
    rng = random.Random(seed)
    speed = {n: HEALTHY_GBPS * (slow_nodes or {}).get(n, 1.0) for n in range(n_nodes)}

    def measure(pair: Pair, round_index: int, retest: bool) -> dict[str, Any]:
        a, b = pair
        busbw = min(speed[a], speed[b]) * (slow_links or {}).get(pair, 1.0)
        if not retest:
            busbw *= (transient or {}).get(pair, 1.0)
        else:
            busbw *= busy_retests
        busbw *= 1 + rng.uniform(-noise, noise)
        return {"round": round_index, "nodes": [a, b], "busbw_gbps": busbw, "retest": retest}

    plan = plan_rounds(n_nodes, mode, seed=plan_seed)  # type: ignore[arg-type]
    records = [measure(p, i, False) for i, pairs in enumerate(plan) for p in pairs]
    retests = retest_plan(first_busbw(records), slow_ratio, QUIET_SLOW_RATIO)
    records += [measure(p, len(plan) + i, True) for i, pairs in enumerate(retests) for p in pairs]
    if retests:
        sides = side_plan(records, slow_ratio, QUIET_SLOW_RATIO)
        first = len(plan) + len(retests)
        records += [measure(p, first + i, True) for i, pairs in enumerate(sides) for p in pairs]
        retests += sides
    return records, plan, retests


def judged(n_nodes: int, **cluster: Any) -> PairJudgement:
    records, _, _ = simulate(n_nodes, **cluster)
    return name_culprits(records, n_nodes, 0.5)


def assert_disjoint(rounds: list[list[Pair]]) -> None:
    for pairs in rounds:
        nodes = [n for pair in pairs for n in pair]
        assert len(nodes) == len(set(nodes)), pairs


# --------------------------------------------------------------------------- planning


@pytest.mark.parametrize("n_nodes", range(2, FULL_PLAN_MAX_NODES + 1))
def test_the_full_plan_tests_every_pair_once_in_disjoint_rounds(n_nodes: int) -> None:
    rounds = plan_rounds(n_nodes, "full")
    assert len(rounds) == (n_nodes - 1 if n_nodes % 2 == 0 else n_nodes)
    assert_disjoint(rounds)
    tested = [pair for pairs in rounds for pair in pairs]
    assert sorted(tested) == list(itertools.combinations(range(n_nodes), 2))


@pytest.mark.parametrize("n_nodes", [17, 18, 64, 65, 1000, 4095, 4096])
@pytest.mark.parametrize("seed", [None, 7])
def test_the_sparse_plan_puts_every_node_in_a_pair(n_nodes: int, seed: int | None) -> None:
    rounds = plan_rounds(n_nodes, "sparse", seed=seed)
    assert_disjoint(rounds)
    assert {n for pairs in rounds for pair in pairs for n in pair} == set(range(n_nodes))
    assert len(rounds) == (1 if n_nodes % 2 == 0 else 2)
    assert all(a < b for pairs in rounds for a, b in pairs)
    if seed is None:  # partners half the inventory apart: across racks, not neighbours
        assert rounds[0][0] == (0, n_nodes // 2)


def test_the_sparse_plan_is_drawn_from_its_seed() -> None:
    assert plan_rounds(64, "sparse", seed=11) == plan_rounds(64, "sparse", seed=11)
    drawn = {tuple(plan_rounds(64, "sparse", seed=seed)[0]) for seed in range(1, 21)}
    assert len(drawn) == 20


def crossing(rounds: list[list[Pair]], group: set[int]) -> int:
    return sum((a in group) != (b in group) for pairs in rounds for a, b in pairs)


def test_a_drawn_plan_crosses_cuts_that_the_inventory_order_never_crosses() -> None:
    # Odd against even inventory positions, and one node of every 16 (a rack whose nodes the
    # inventory lists one per row): partners half the inventory apart never cross either.
    odd, rack = set(range(1, 64, 2)), set(range(5, 64, 16))
    assert crossing(plan_rounds(64, "sparse"), odd) == 0
    assert crossing(plan_rounds(64, "sparse"), rack) == 0
    for seed in range(1, 101):
        rounds = plan_rounds(64, "sparse", seed=seed)
        assert crossing(rounds, odd) >= 6, seed
        assert crossing(rounds, rack) >= 2, seed


def test_with_a_topology_every_sparse_pair_crosses_between_switches() -> None:
    # Eight leaf switches whose nodes the inventory interleaves: node i hangs off switch i % 8.
    switches = [f"leaf{i % 8}" for i in range(64)]
    (pairs,) = plan_rounds(64, "sparse", switches)
    assert {n for pair in pairs for n in pair} == set(range(64))
    assert all(switches[a] != switches[b] for a, b in pairs)
    # Without it, half the pairs would stay inside a switch.
    (plain,) = plan_rounds(64, "sparse")
    assert sum(switches[a] == switches[b] for a, b in plain) == 32
    # Drawn, the pairs still all cross between switches, and which switches face each other
    # changes from run to run (so a cut between two sets of switches is crossed too).
    facing = set()
    for seed in range(1, 11):
        (drawn,) = plan_rounds(64, "sparse", switches, seed)
        assert all(switches[a] != switches[b] for a, b in drawn)
        facing.add(frozenset(frozenset((switches[a], switches[b])) for a, b in drawn))
    assert len(facing) == 10


def test_auto_is_full_up_to_sixteen_nodes_then_sparse() -> None:
    assert plan_rounds(16) == plan_rounds(16, "full")
    assert plan_rounds(17) == plan_rounds(17, "sparse")
    assert plan_rounds(1) == [] and plan_rounds(0) == []
    assert plan_rounds(2) == [[(0, 1)]]


def test_packing_keeps_rounds_disjoint_in_the_given_order() -> None:
    assert pack_rounds([(0, 1), (0, 2), (1, 2), (3, 4)]) == [[(0, 1), (3, 4)], [(0, 2)], [(1, 2)]]


def test_no_retests_when_every_pair_is_fast() -> None:
    records, _, retests = simulate(8, noise=0.05, seed=3)
    assert retests == []
    assert len(records) == 28


def test_a_slow_node_is_retested_against_two_good_nodes_not_pair_by_pair() -> None:
    _, _, retests = simulate(8, slow_nodes={5: 0.01})
    # Slow with seven partners already: tests against two good nodes confirm it; its seven slow
    # pairs are not run again, and it has no other node that looks slow to be tested with.
    (first,), (second,) = retests
    assert 5 in first and 5 in second and first != second


def test_retests_in_sparse_mode_give_each_suspect_a_new_good_partner() -> None:
    _, plan, retests = simulate(64, slow_nodes={40: 0.01})
    assert (8, 40) in plan[0]
    tested = [pair for pairs in retests for pair in pairs]
    assert (8, 40) in tested  # the slow pair itself, once
    partners_of_40 = {a if b == 40 else b for a, b in tested if 40 in (a, b)} - {8}
    partners_of_8 = {a if b == 8 else b for a, b in tested if 8 in (a, b)} - {40}
    # Two good partners each, none shared: one of them behind a slow link cannot decide alone.
    assert len(partners_of_40) == 2 and len(partners_of_8) == 2 and not partners_of_40 & partners_of_8
    assert_disjoint(retests)


def test_the_retest_plan_is_the_same_for_the_same_measurements() -> None:
    records, _, _ = simulate(12, slow_nodes={3: 0.1}, slow_links={(4, 9): 0.1}, noise=0.1, seed=7)
    first = first_busbw(records)
    reordered = dict(reversed(list(first.items())))
    assert retest_plan(first, 0.5, QUIET_SLOW_RATIO) == retest_plan(reordered, 0.5, QUIET_SLOW_RATIO)


# --------------------------------------------------------------------------- naming


def test_a_slow_node_among_eight_is_named_alone() -> None:
    culprits = judged(8, slow_nodes={5: 0.01}, noise=0.05)
    assert [s.node for s in culprits.slow_nodes] == [5]
    assert culprits.slow_links == () and culprits.unconfirmed == ()
    (slow,) = culprits.slow_nodes
    assert slow.ratio == pytest.approx(0.01, rel=0.2)
    assert slow.partners == (0, 1, 2, 3, 4, 6, 7)
    assert culprits.typical_busbw_gbps == pytest.approx(HEALTHY_GBPS, rel=0.1)
    assert culprits.node_ratio[5] < 0.02 and all(culprits.node_ratio[n] > 0.9 for n in range(8) if n != 5)


def test_a_slow_link_among_eight_is_named_and_not_its_nodes() -> None:
    culprits = judged(8, slow_links={(2, 6): 0.08}, noise=0.05)
    assert [link.nodes for link in culprits.slow_links] == [(2, 6)]
    assert culprits.slow_nodes == () and culprits.unconfirmed == ()
    (link,) = culprits.slow_links
    assert link.ratio == pytest.approx(0.08, rel=0.2) and len(link.retest_gbps) == 1


def test_a_slow_node_and_a_slow_link_are_both_named() -> None:
    culprits = judged(8, slow_nodes={1: 0.05}, slow_links={(3, 6): 0.1}, noise=0.05)
    assert [s.node for s in culprits.slow_nodes] == [1]
    assert [link.nodes for link in culprits.slow_links] == [(3, 6)]
    assert culprits.unconfirmed == ()


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("n_nodes", [3, 8, 16, 64])
def test_noise_of_twenty_percent_is_no_finding(n_nodes: int, seed: int) -> None:
    culprits = judged(n_nodes, noise=0.2, seed=seed)
    assert not culprits.confirmed and culprits.unconfirmed == ()


def across(left: range, right: range, factor: float) -> dict[Pair, float]:
    return {(a, b): factor for a in left for b in right}


def test_every_pair_slow_between_two_groups_is_one_cut_naming_both_sides() -> None:
    culprits = judged(4, slow_links=across(range(0, 2), range(2, 4), 0.01), noise=0.05)
    (group,) = culprits.slow_groups
    assert group.sides == ((0, 1), (2, 3))
    assert group.ratio == pytest.approx(0.01, rel=0.2)
    assert group.inside_gbps == pytest.approx(HEALTHY_GBPS, rel=0.1)
    assert culprits.slow_links == () and culprits.slow_nodes == () and culprits.unconfirmed == ()


def test_a_cut_between_two_racks_of_a_larger_cluster_leaves_a_third_rack_alone() -> None:
    # Racks 0-3, 4-7, 8-11: only the route between the first two is slow.
    culprits = judged(12, slow_links=across(range(0, 4), range(4, 8), 0.1), noise=0.1, seed=3)
    (group,) = culprits.slow_groups
    assert group.sides == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert len(group.pairs) == 16
    assert culprits.slow_links == () and culprits.slow_nodes == ()


def cut_off(group: set[int], n_nodes: int, factor: float) -> dict[Pair, float]:
    return {pair_key(a, b): factor for a in group for b in range(n_nodes) if b not in group}


@pytest.mark.parametrize("plan_seed", [1, 2, 3, 4, 5])
def test_a_rack_that_the_inventory_interleaves_is_named_as_one_group_cut_off(plan_seed: int) -> None:
    # One node in every 16 hangs off the switch whose uplink is bad; one round of pairs meets each
    # of them once, so only the job's tests of the nodes that still look slow with each other
    # tell the group from four slow nodes.
    rack = {5, 21, 37, 53}
    records, plan, _ = simulate(64, slow_links=cut_off(rack, 64, 0.01), noise=0.1, plan_seed=plan_seed)
    assert not any(set(pair) <= rack for pair in plan[0])  # (not paired with each other)
    culprits = name_culprits(records, 64, 0.5)
    (group,) = culprits.slow_groups
    assert {frozenset(side) for side in group.sides} == {frozenset(rack), frozenset(range(64)) - rack}
    assert group.ratio == pytest.approx(0.01, rel=0.3)
    assert culprits.slow_nodes == () and culprits.slow_links == ()


@pytest.mark.parametrize("plan_seed", [1, 2, 3])
def test_a_cut_between_odd_and_even_nodes_is_one_finding_not_a_pass(plan_seed: int) -> None:
    # Half the cluster behind the cut: about half the first pairs are slow, and which half is the
    # healthy one is told by the fast pairs (no pair beats its hardware), not by a median.
    odd = set(range(1, 64, 2))
    records, _, _ = simulate(64, slow_links=cut_off(odd, 64, 0.01), noise=0.1, plan_seed=plan_seed)
    culprits = name_culprits(records, 64, 0.5)
    assert culprits.typical_busbw_gbps > 0.85 * HEALTHY_GBPS
    (group,) = culprits.slow_groups
    left, right = map(set, group.sides)
    assert (left <= odd and not right & odd) or (right <= odd and not left & odd)
    assert len(left | right) >= 60
    assert culprits.slow_nodes == () and culprits.slow_links == ()


@pytest.mark.parametrize("plan_seed", [1, 2, 3])
def test_two_groups_cut_off_are_two_findings(plan_seed: int) -> None:
    racks = {8, 9, 10, 11}, {48, 49, 50, 51}
    slow = {**cut_off(racks[0], 64, 0.01), **cut_off(racks[1], 64, 0.01)}
    records, _, _ = simulate(64, slow_links=slow, noise=0.1, plan_seed=plan_seed)
    culprits = name_culprits(records, 64, 0.5)
    named = sorted(min(group.sides, key=len) for group in culprits.slow_groups)
    assert named == [tuple(sorted(rack)) for rack in racks]
    assert all(group.cut_off for group in culprits.slow_groups)


def test_two_groups_cut_off_that_never_met_each_other_are_two_findings() -> None:
    # 40 nodes, one round: nodes 0-1 and 20-21 each a group cut off, each member first paired with
    # a healthy node, then re-tested against two more, then tested with its fellow; no test ever
    # joined the two groups. Each is its own finding, not one half of the other's.
    rng = random.Random(5)
    tests: list[tuple[Pair, bool]] = [((0, 2), False), ((1, 3), False), ((20, 22), False), ((21, 23), False)]
    tests += [((n, n + 1), False) for n in [*range(4, 20, 2), *range(24, 40, 2)]]
    tests += [(pair, True) for pair, _ in tests[:4]]
    good_partners = {0: (4, 6), 1: (8, 10), 20: (24, 26), 21: (28, 30)}
    tests += [((g, partner), True) for g, partners in good_partners.items() for partner in partners]
    tests += [((p, partner), True) for p, partner in ((2, 12), (3, 14), (22, 32), (23, 34))]
    tests += [((0, 1), True), ((20, 21), True)]
    groups = ({0, 1}, {20, 21})

    def speed(pair: Pair) -> float:
        return 0.2 if any(len(set(pair) & group) == 1 for group in groups) else 20.0

    records = [
        {"nodes": list(pair), "retest": retest,
         "busbw_gbps": speed(pair) * rng.uniform(0.97, 1.03)}
        for pair, retest in tests
    ]  # fmt: skip
    culprits = name_culprits(records, 40, 0.5)
    assert sorted(min(group.sides, key=len) for group in culprits.slow_groups) == [(0, 1), (20, 21)]
    assert culprits.slow_nodes == () and culprits.slow_links == ()


def test_the_typical_pair_of_a_cluster_split_in_two_is_the_fast_one() -> None:
    # Each node met one partner; 20 of 32 pairs crossed a cut. The median pair is slow.
    pairs = {(2 * i, 2 * i + 1): 0.2 if i < 20 else 20.0 for i in range(32)}
    assert typical_busbw(pairs) == 20.0
    # A spread within a factor of three is one population (NICs of two generations mixed, 200 and
    # 400 Gb/s): its median, as always.
    pairs = {(2 * i, 2 * i + 1): 10.0 if i < 20 else 20.0 for i in range(32)}
    assert typical_busbw(pairs) == 10.0


def test_two_separate_slow_links_are_not_taken_for_a_cut() -> None:
    culprits = judged(64, slow_links={(5, 37): 0.1, (6, 38): 0.1}, noise=0.1, seed=1)
    assert culprits.slow_groups == ()
    assert [link.nodes for link in culprits.slow_links] == [(5, 37), (6, 38)]


def test_slow_nodes_are_not_a_group_though_they_are_tested_with_each_other() -> None:
    culprits = judged(64, slow_nodes={n: 0.1 for n in (3, 4, 5, 6)}, noise=0.1, seed=1)
    assert [s.node for s in culprits.slow_nodes] == [3, 4, 5, 6] and culprits.slow_groups == ()


def test_a_node_twenty_percent_slow_is_named_on_a_quiet_fabric() -> None:
    culprits = judged(16, slow_nodes={9: 0.8}, noise=0.05, seed=5)
    assert [s.node for s in culprits.slow_nodes] == [9]
    assert culprits.threshold_gbps == pytest.approx(0.9 * culprits.healthy_median_gbps)


def test_the_threshold_falls_with_the_spread_of_the_healthy_pairs() -> None:
    quiet = judged(16, noise=0.05, seed=5)
    noisy = judged(16, noise=0.3, seed=5)
    assert noisy.threshold_gbps < 0.7 * HEALTHY_GBPS < 0.85 * HEALTHY_GBPS < quiet.threshold_gbps
    assert noisy.healthy_spread_gbps > 3 * quiet.healthy_spread_gbps
    assert not noisy.confirmed and not quiet.confirmed


def test_pairs_with_slow_nodes_are_not_taken_for_the_fabrics_noise() -> None:
    # One sparse round at 64 nodes with 8 slow nodes at 0.8x: a quarter of its pairs met one. In
    # this draw the slow pairs lie within three absolute deviations of the median of all 32.
    rng = random.Random(4)
    healthy = [HEALTHY_GBPS * (1 + rng.uniform(-0.05, 0.05)) for _ in range(24)]
    slow = [0.8 * HEALTHY_GBPS * (1 + rng.uniform(-0.05, 0.05)) for _ in range(8)]
    center, sigma, count = robust_spread(healthy + slow, 0.5 * HEALTHY_GBPS, QUIET_SLOW_RATIO)
    assert count == len(healthy)
    assert center == pytest.approx(statistics.fmean(healthy))
    assert sigma == pytest.approx(statistics.pstdev(healthy))
    # The healthy pairs alone: every one of them is the noise, as before.
    assert robust_spread(healthy, 0.5 * HEALTHY_GBPS, QUIET_SLOW_RATIO) == (center, sigma, count)


def test_eight_slow_nodes_among_64_are_each_named_on_a_quiet_fabric() -> None:
    slow = {n: 0.8 for n in (2, 8, 13, 16, 32, 34, 52, 61)}
    culprits = judged(64, mode="sparse", slow_nodes=slow, noise=0.05, seed=5, plan_seed=5)
    assert [s.node for s in culprits.slow_nodes] == sorted(slow)
    assert not culprits.slow_links and not culprits.slow_groups


def test_a_pair_slow_once_and_fast_on_retest_is_only_a_note() -> None:
    culprits = judged(8, transient={(0, 3): 0.1}, noise=0.05)
    assert not culprits.confirmed
    (note,) = culprits.unconfirmed
    assert note.nodes == (0, 3) and note.reason == "fast on re-test" and len(note.retest_gbps) == 1


def test_three_nodes_with_one_slow_node_name_it_though_most_pairs_are_slow() -> None:
    # Two of three pairs are slow: their plain median is the slow value and would hide it.
    culprits = judged(3, slow_nodes={2: 0.02})
    assert [s.node for s in culprits.slow_nodes] == [2]
    assert culprits.median_pair_busbw_gbps < 1.0 < culprits.typical_busbw_gbps


def test_a_busy_retest_wave_confirms_no_link_on_a_small_cluster() -> None:
    # The pair was slow once, and the whole re-test wave ran at 0.45x: so did the control pairs.
    culprits = judged(3, transient={(1, 2): 0.45}, busy_retests=0.45)
    assert not culprits.confirmed
    # A link that is really slow still is, against the same busy wave.
    culprits = judged(3, slow_links={(1, 2): 0.05}, busy_retests=0.45)
    assert [link.nodes for link in culprits.slow_links] == [(1, 2)]


def test_three_nodes_with_one_slow_link() -> None:
    culprits = judged(3, slow_links={(0, 2): 0.08})
    assert [link.nodes for link in culprits.slow_links] == [(0, 2)] and culprits.slow_nodes == ()


def test_sparse_mode_confirms_a_slow_node_against_a_second_partner() -> None:
    culprits = judged(64, slow_nodes={40: 0.01}, noise=0.1, seed=2)
    assert [s.node for s in culprits.slow_nodes] == [40]
    assert len(culprits.slow_nodes[0].partners) == 3  # its first partner and two good ones
    assert culprits.slow_links == () and culprits.unconfirmed == ()


def test_a_healthy_node_whose_good_partner_sits_behind_a_slow_link_is_not_blamed() -> None:
    # 64 nodes, node 49 slow; its first partner meets a good node over a slow link on re-test:
    # the second good partner clears it (with one good partner it was blamed with node 49).
    _, plan, retests = simulate(64, slow_nodes={49: 0.1})
    (partner,) = [a if b == 49 else b for a, b in plan[0] if 49 in (a, b)]
    tested = [pair for pairs in retests for pair in pairs]
    first_good = min((a if b == partner else b) for a, b in tested if partner in (a, b) and 49 not in (a, b))
    culprits = judged(64, slow_nodes={49: 0.1}, slow_links={tuple(sorted((partner, first_good))): 0.2})
    assert [s.node for s in culprits.slow_nodes] == [49]


def test_sparse_mode_tells_a_slow_link_from_its_nodes() -> None:
    culprits = judged(64, slow_links={(8, 40): 0.05}, noise=0.1, seed=2)
    assert [link.nodes for link in culprits.slow_links] == [(8, 40)]
    assert culprits.slow_nodes == ()


def test_a_slow_pair_never_retested_stays_unconfirmed() -> None:
    records, _, _ = simulate(8, slow_links={(2, 6): 0.08})
    first_only = [r for r in records if not r["retest"]]
    culprits = name_culprits(first_only, 8, 0.5)
    assert not culprits.confirmed
    assert [(u.nodes, u.reason) for u in culprits.unconfirmed] == [((2, 6), "not re-tested")]


def test_pairs_under_an_absolute_floor_are_listed_with_their_best_measurement() -> None:
    records, _, _ = simulate(4, noise=0.0)
    culprits = name_culprits(records, 4, 0.5, min_pair_busbw_gbps=HEALTHY_GBPS * 2)
    assert len(culprits.below_floor) == 6 and not culprits.confirmed
    assert name_culprits(records, 4, 0.5, min_pair_busbw_gbps=1.0).below_floor == ()


def test_typical_busbw_is_the_median_nodes_best_pair() -> None:
    assert typical_busbw({(0, 1): 1.0, (0, 2): 1.0, (1, 2): 9.0}) == 9.0
    assert typical_busbw({}) == 0.0


def test_among_four_thousand_nodes_one_slow_node_and_one_slow_link_are_named() -> None:
    # How long planning and judging take at this size: benchmarks/culprit_simulation.py.
    culprits = judged(4096, slow_nodes={1234: 0.01}, slow_links={(7, 2055): 0.05}, noise=0.1, seed=1)
    assert [s.node for s in culprits.slow_nodes] == [1234]
    assert [link.nodes for link in culprits.slow_links] == [(7, 2055)]


# --------------------------------------------------------------------------- why a job died


def test_a_worker_killed_mid_job_is_the_culprit_and_the_others_were_ended() -> None:
    failures = explain_failures(load_job("worker_killed"))
    assert [(f.host, f.kind, f.culprit) for f in failures] == [
        ("node3", "crashed", True),
        ("node1", "ended", False),
        ("node2", "ended", False),
    ]
    assert failures[0].reason.startswith("rank 2 was ended by SIGKILL")
    (result,) = job_results("allreduce", load_job("worker_killed"), "allreduce")
    assert (result.hosts, result.details["item"]) == (("node3",), "killed_by_signal")


def test_a_node_that_cannot_reach_the_master_is_named_even_after_the_master_gave_up() -> None:
    job = load_job("master_unreachable")
    failures = explain_failures(job)
    assert failures[0].host == "node2" and failures[0].kind == "never_joined"
    assert failures[0].reason.startswith("its ranks could not reach the master 127.0.0.1:")
    victims = {f.host: (f.reason, f.culprit) for f in failures[1:]}
    assert victims == {
        "node1": ("stopped because node2 stalled: the rendezvous saw only 2 of 3 nodes join", False),
        "node3": (
            "stopped because node2 stalled: joined the rendezvous, but the other nodes never came",
            False,
        ),
    }


def test_a_node_stopped_before_it_joined_is_named_not_the_node_that_waited_for_it() -> None:
    # A real run: node3's host stopped (SIGSTOP) as the job started. node2 joined and timed out
    # waiting in the store ("DistStoreError: wait timeout"); the master reported its failed join
    # in the document and ended cleanly; node3 was ended, having printed nothing.
    job = load_job("never_joined")
    failures = explain_failures(job)
    assert [(f.host, f.kind, f.culprit) for f in failures] == [
        ("node3", "never_joined", True),
        ("node2", "victim", False),
    ]
    assert "2 of 3 nodes join" in failures[0].reason
    assert failures[1].reason.startswith("stopped because node3 stalled: joined, and waited 7.577 s")
    (result,) = job_results("allreduce", job, "allreduce")
    assert (result.status, result.hosts) == ("fail", ("node3",))
    assert result.details["item"] == "never_joined"


def test_the_end_sentence_of_the_older_recorded_host_decides_nothing() -> None:
    # never_joined.json was recorded when the host wrote a rank's end as a sentence; it is kept
    # verbatim and no reader parses it: the findings are the same without it, and the same with
    # the record the host writes now in its place.
    job = load_job("never_joined")
    node2 = next(n for n in job.nodes if n.host == "node2")
    old = "preflight-job: rank 1 (local_rank 0, pid 6984) exited with status 1\n"
    assert old in node2.stderr
    record = END_MARKER + json.dumps(end_record(1, 0, 6984, 1), sort_keys=True) + "\n"
    expected = job_results("allreduce", job, "allreduce")
    for instead in ("", record):
        changed = replace_node(job, "node2", stderr=node2.stderr.replace(old, instead))
        assert job_results("allreduce", changed, "allreduce") == expected


def test_a_node_silent_before_its_first_heartbeat_is_the_one_that_never_joined() -> None:
    # The launcher gave up on node3: no heartbeat ever, and its connection no longer answered.
    job = replace_node(load_job("never_joined"), "node3", lost=True, silent_s=10.2, killed=False)
    failures = explain_failures(job)
    assert (failures[0].host, failures[0].kind, failures[0].culprit) == ("node3", "never_joined", True)
    assert failures[0].reason.startswith("started no rank: sent nothing for 10.2 s while the others beat")
    assert [f.host for f in failures if f.culprit] == ["node3"]


def test_a_missing_node_with_nothing_in_its_stderr_is_found_by_elimination() -> None:
    # Ended by preflight before it printed anything: only the master's count tells.
    job = replace_node(load_job("master_unreachable"), "node2", stderr="", killed=True, exit_status=None)
    failures = explain_failures(job)
    assert (failures[0].host, failures[0].kind) == ("node2", "never_joined")
    assert "2 of 3 nodes join" in failures[0].reason


def test_a_connection_refused_says_so() -> None:
    job = load_job("master_unreachable")
    node2 = next(n for n in job.nodes if n.host == "node2")
    job = replace_node(job, "node2", stderr=node2.stderr + "\n[Errno 111] Connection refused\n")
    assert explain_failures(job)[0].reason.endswith("(connection refused)")


def test_a_lost_node_is_named_whatever_its_stderr_says() -> None:
    job = replace_node(load_job("worker_killed"), "node3", lost=True, exit_status=None)
    failures = explain_failures(job)
    assert (failures[0].host, failures[0].kind) == ("node3", "lost")


def test_a_silent_node_is_named_with_its_last_phase_and_how_long_it_was_silent() -> None:
    job = replace_node(
        load_job("worker_killed"), "node3", lost=True, exit_status=None, silent_s=10.4, last_phase="allreduce"
    )
    failures = explain_failures(job)
    assert (failures[0].host, failures[0].kind) == ("node3", "lost")
    assert failures[0].reason == (
        "went silent in the allreduce phase: no heartbeat for 10.4 s "
        "(its link is down, or its processes are stopped or hung)"
    )
    # With the moment it was last heard from, to read its own logs at.
    job = replace_node(job, "node3", silent_since="2026-11-26T17:05:12Z")
    assert "no heartbeat for 10.4 s, since 17:05:12 UTC (its link" in explain_failures(job)[0].reason


def _ended(stderr: str) -> NodeFailure:
    """The one failure explained for a job of one node that printed ``stderr`` and exited 1."""
    job = replace_node(load_job("worker_killed"), "node3", stderr=stderr, exit_status=1)
    (failure,) = explain_failures(dataclasses.replace(job, nodes=job.nodes[2:]))
    return failure


def _end_line(global_rank: int, local_rank: int, pid: int, code: int) -> str:
    return END_MARKER + json.dumps(end_record(global_rank, local_rank, pid, code), sort_keys=True) + "\n"


def test_a_rank_ended_by_a_signal_is_read_from_its_hosts_end_record() -> None:
    line = _end_line(5, 1, 4242, -9)
    assert json.loads(line[len(END_MARKER) :]) == {
        "rank": 5, "local_rank": 1, "pid": 4242, "signal": 9, "signal_name": "SIGKILL",
    }  # fmt: skip
    failure = _ended("PREFLIGHT-JOB-RANK {}\n" + line)
    assert (failure.kind, failure.culprit) == ("crashed", True)
    assert failure.reason == "rank 5 was ended by SIGKILL (from outside the job: the out-of-memory killer?)"
    assert _ended(_end_line(5, 1, 4242, -15)).reason == "rank 5 was ended by SIGTERM"
    # A signal the system has no name for is said by its number.
    assert "signal_name" not in json.loads(_end_line(5, 1, 4242, -77)[len(END_MARKER) :])
    assert _ended(_end_line(5, 1, 4242, -77)).reason == "rank 5 was ended by signal 77"


def test_a_rank_that_exited_with_a_status_is_said_from_its_record_unless_an_exception_says_more() -> None:
    line = _end_line(4, 0, 4242, 3)
    assert json.loads(line[len(END_MARKER) :]) == {"rank": 4, "local_rank": 0, "pid": 4242, "status": 3}
    assert rank_end(line) is not None and rank_end(line) == rank_end("noise\n" + line + line)
    failure = _ended("some output\n" + line)
    assert failure.kind == "crashed"
    assert failure.reason == "failed (exit status 1): rank 4 exited with status 3"
    failure = _ended("RuntimeError: boom\n" + line)
    assert failure.reason == "failed (exit status 1): RuntimeError: boom"
    # The record itself is never quoted as the error.
    assert last_error_line(line) is None


def test_torchruns_root_cause_block_still_names_the_rank_and_the_signal() -> None:
    # Third-party text, in the recorded job whose ranks torchrun started.
    ended = rank_end(load_job("worker_killed").nodes[2].stderr)
    assert ended is not None and (ended.rank, ended.signal, ended.signal_name) == (2, 9, "SIGKILL")


def test_the_rendezvous_count_is_carried_as_numbers_not_found_again_in_a_sentence() -> None:
    failures = {f.host: f for f in explain_failures(load_job("master_unreachable"))}
    assert failures["node1"].rendezvous == RendezvousCount(joined=2, total=3)
    assert failures["node2"].rendezvous is None and failures["node3"].rendezvous is None
    # The master that reported its count in the document: the node that never joined carries it.
    never = explain_failures(load_job("never_joined"))[0]
    assert (never.host, never.rendezvous) == ("node3", RendezvousCount(2, 3))
    assert never.reason == "never joined the rendezvous (rendezvous saw only 2 of 3 nodes join)"


def test_the_ranks_a_node_saw_miss_the_barrier_are_carried_with_its_failure() -> None:
    # torchrun's stderr of a real late rank (rank 2) at a monitored barrier, as node1's.
    stderr = (JOBS / "monitored_barrier.stderr").read_text()
    job = replace_node(load_job("three_nodes"), "node1", stderr=stderr, exit_status=1)
    failures = {f.host: f for f in explain_failures(job)}
    assert failures["node1"].ranks == (2,) and failures["node1"].kind == "victim"
    assert failures["node3"].kind == "hung" and failures["node3"].culprit
    (result,) = job_results("ddp", job, "ddp")
    assert (result.hosts, result.details["item"]) == (("node3",), "missed_barrier")


def test_heartbeat_lines_are_never_quoted_as_the_error() -> None:
    stderr = 'RuntimeError: boom\nPREFLIGHT-JOB-BEAT {"phase": "ddp", "rank": 1}\n'
    assert last_error_line(stderr) == "RuntimeError: boom"
    assert last_error_line('PREFLIGHT-JOB-BEAT {"phase": "ddp", "rank": 1}\n') is None


def test_the_quoted_line_is_the_last_exception_without_rank_or_source_prefixes() -> None:
    stderr = (JOBS / "monitored_barrier.stderr").read_text()
    assert (
        last_error_line(stderr)
        == "RuntimeError: [Rank 0]: Ranks 2 failed to pass monitoredBarrier in 3000 ms"
    )
    assert last_error_line("UserWarning: nothing\n\n") is None


def test_a_bad_switch_of_a_hundred_nodes_among_four_thousand_names_every_one_of_them() -> None:
    culprits = judged(4096, slow_nodes={n: 0.05 for n in range(2048, 2148)}, noise=0.1, seed=4)
    assert [s.node for s in culprits.slow_nodes] == list(range(2048, 2148))


# --------------------------------------------------------------------------- within the noise


def test_a_node_slow_within_the_noise_is_a_note_with_the_measured_noise_not_a_culprit() -> None:
    # 20% slow at ±15% noise: its pairs cannot be told from the healthy ones. Neither the node nor
    # its first pair is named; it is listed as within the noise, and the noise is measured.
    found = [judged(64, slow_nodes={7: 0.8}, noise=0.15, seed=seed, plan_seed=seed) for seed in range(1, 6)]
    for culprits in found:
        assert culprits.slow_nodes == () and culprits.slow_links == () and culprits.slow_groups == ()
        assert 0.10 < culprits.noise < 0.25
        assert all(0.5 < w.ratio < 1.0 for w in culprits.within_noise)
    assert any(7 in {w.node for w in c.within_noise} for c in found)


def test_a_node_far_slower_than_the_noise_is_named_and_not_listed_as_within_it() -> None:
    culprits = judged(64, slow_nodes={7: 0.6}, noise=0.05, seed=2, plan_seed=2)
    assert [s.node for s in culprits.slow_nodes] == [7]
    assert 7 not in {w.node for w in culprits.within_noise}
    assert 0.02 < culprits.noise < 0.1
