"""A small cluster's straggler: with three or four nodes too few pairs measure the noise across them,
so a node moderately slow with every partner is told by each pair's own repeats; judged on real lab
runs (tests/data/pairs/SOURCES.md) and on the planner's own rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.culprit_simulation import Faults, run_trial
from checks.job.node.planning import REPEATS, SMALL_PAIRS, pair_key, repeat_plan
from checks.job.pairs import PairJudgement, SlowLink, name_culprits
from checks.job.stragglers import STRAGGLER_SIGMAS, Straggler, explained_by_stragglers, name_stragglers

PAIRS = Path(__file__).parent / "data" / "pairs"


def capture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAIRS / f"{name}.json").read_text())
    return data


@pytest.mark.parametrize(
    ("name", "slow"),
    [("lab_three_nodes_one_at_6500_mbit", 2), ("lab_four_nodes_one_at_5000_mbit", 3)],
)
def test_a_node_moderately_slow_with_every_partner_is_named_alone(name: str, slow: int) -> None:
    run = capture(name)
    # The fixed slow ratio names nobody: the node is above half the typical pair.
    assert not name_culprits(run["pairs"], len(run["nodes"]), 0.5).confirmed
    (straggler,) = name_stragglers(run["pairs"])
    assert straggler.node == slow
    assert straggler.ratio < 0.8
    assert straggler.healthy_gbps - straggler.busbw_gbps > STRAGGLER_SIGMAS * straggler.noise_gbps / 2


def test_healthy_nodes_whose_pairs_were_repeated_name_nobody() -> None:
    run = capture("lab_three_healthy_nodes_repeated")
    assert any(p.get("repeat") for p in run["pairs"])
    assert name_stragglers(run["pairs"]) == []


def test_without_repeats_nothing_is_told() -> None:
    run = capture("lab_three_nodes_one_at_6500_mbit")
    assert name_stragglers([p for p in run["pairs"] if not p.get("repeat")]) == []


def test_the_job_repeats_every_pair_of_a_small_cluster_when_one_read_slow() -> None:
    run = capture("lab_three_nodes_one_at_6500_mbit")
    first = {pair_key(*p["nodes"]): p["busbw_gbps"] for p in run["pairs"] if not p["retest"]}
    plan = repeat_plan(first)
    assert sorted(pair for pairs in plan for pair in pairs) == sorted(list(first) * REPEATS)
    # Nothing read slow, or too many pairs to call the cluster small: no repeats.
    assert repeat_plan(dict.fromkeys(first, 1.0)) == []
    many = {pair_key(a, b): 1.0 if a else 0.5 for a in range(6) for b in range(a + 1, 6)}
    assert len(many) > SMALL_PAIRS and repeat_plan(many) == []


def test_a_straggler_explains_the_slow_links_the_pair_rules_name_on_its_pairs() -> None:
    # A simulated four-node cluster (benchmarks/culprit_simulation.py, seed 3:4:23): node 2 at
    # 0.6x, each test within ±30% noise. The pair rules, on its test and re-test, name the link
    # 2-3, blaming its healthy partner; the repeats tell node 2, which explains that link.
    faults = Faults(slow_nodes=1, slow_links=0, noise=0.3, slow_node_factor=0.6)
    trial = run_trial(4, faults, 0.5, "3:4:23")
    assert trial.slow_nodes == {2}
    assert trial.named_nodes == {2} and trial.named_links == frozenset()
    culprits = PairJudgement(1.0, 1.0, 0.5, slow_links=(SlowLink((2, 3), 0.4, 0.4, 0.4, (0.4,)),))
    straggler = Straggler(2, 0.6, 1.0, 0.1, 6, 9)
    assert explained_by_stragglers(culprits, [straggler]).slow_links == ()
