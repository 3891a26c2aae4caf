"""The all-reduce phase: the sweep over the whole world, then the pair tests between nodes, the
re-tests every rank plans alike from the first wave (``planning.retest_plan``), the tests of the
nodes that still look slow with each other (``planning.side_plan``), and on a small cluster where
a pair read slow, every pair again (``planning.repeat_plan``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from checks.job.node.pair_tests import PairTests, next_round
from checks.job.node.planning import first_busbw, repeat_plan, retest_plan, side_plan
from checks.job.node.sweep import sweep

if TYPE_CHECKING:
    from checks.job.node.harness import Job

    JsonDict = dict[str, Any]


# The re-tests of a CPU job run in turn for as long as this many rounds' budgets, of the nine the
# launcher allows for re-tests (checks.allreduce.phase): the rest, and the side tests, in rounds.
IN_TURN_ROUNDS = 5


def run(job: Job) -> JsonDict:
    """The sweep's rows and every pair measurement, first tests and re-tests."""
    settings = job.settings("allreduce")
    start = time.perf_counter()
    result = sweep(job, settings)
    pairs: list[JsonDict] = []
    rounds = settings["rounds"]
    if settings["pairwise"] and rounds and len(job.ranks_of_node) >= 2:
        slow_ratio = float(settings["slow_ratio"])
        quiet_ratio = float(settings["quiet_slow_ratio"])
        tests = PairTests(job)
        pair_start = time.perf_counter()
        pairs = tests.run(rounds, settings, 0, retest=False)
        # Every rank has the same measurements, so every rank plans the same re-tests.
        plan = retest_plan(first_busbw(pairs), slow_ratio, quiet_ratio)
        # GPUs re-test in rounds, beside busy peers as in the first wave; CPU ranks in turn, for a
        # share of the re-tests' budget (see PairTests.run).
        in_turn_s = 0.0 if job.cuda else IN_TURN_ROUNDS * (float(settings["pair_budget_s"]) + 1)
        if plan:
            pairs += tests.run(plan, settings, next_round(pairs), retest=True, in_turn_s=in_turn_s)
            sides = side_plan(pairs, slow_ratio, quiet_ratio)
            if sides:
                pairs += tests.run(sides, settings, next_round(pairs), retest=True)
            plan += sides
        repeats = repeat_plan(first_busbw(pairs))
        if repeats:
            pairs += [
                {**p, "repeat": True} for p in tests.run(repeats, settings, next_round(pairs), retest=True)
            ]
            plan += repeats
        result["pairs_duration_s"] = time.perf_counter() - pair_start
        result["retest_rounds"] = [[list(p) for p in r] for r in plan]
        if "pair_seed" in settings:
            result["pair_seed"] = settings["pair_seed"]
        tests.destroy()
    result["pairs"] = pairs
    result["duration_s"] = time.perf_counter() - start
    return result
