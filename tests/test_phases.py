"""The job's phases on the controller: the node side's, in its order, each with what it is sent, its
time and its name, declared once (checks/job/phases.py)."""

from __future__ import annotations

from checks.job.node.phases import PHASES as NODE_PHASES
from checks.job.phases import DDP_S, INTRANODE_S, PHASES
from preflight.config import Config
from preflight.registry import all_checks


def test_the_controller_knows_the_node_sides_phases_in_order_each_judged_by_a_check() -> None:
    assert list(PHASES) == list(NODE_PHASES)
    checks = {c.name for c in all_checks()}
    assert all(phase.check in checks for phase in PHASES.values())
    assert [p.label for p in PHASES.values()] == [
        "compute",
        "inside-the-node",
        "all-reduce",
        "per-rail",
        "DDP",
    ]


def test_a_small_cluster_has_time_for_its_repeats_and_a_large_one_does_not_pay_for_them() -> None:
    allreduce = PHASES["allreduce"]
    small = allreduce.settings(Config(), [f"node{i}" for i in range(3)], False)
    large = allreduce.settings(Config(), [f"node{i}" for i in range(16)], False)
    per_round = small["pair_budget_s"] + 1
    # Three nodes: three rounds, nine for re-tests, and the repeats' two times three.
    assert allreduce.budget_s(small) == small["sweep_budget_s"] * 1.5 + (3 + 9 + 2 * 3) * per_round
    assert allreduce.budget_s(large) == large["sweep_budget_s"] * 1.5 + (15 + 9) * per_round
    assert PHASES["ddp"].budget_s({}) == DDP_S and PHASES["intranode"].budget_s({}) == INTRANODE_S
