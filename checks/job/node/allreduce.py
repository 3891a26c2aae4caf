"""The all-reduce phase: the sweep over the whole world, then the pair tests between nodes, the
re-tests every rank plans alike from the first wave (``planning.retest_plan``), and the tests of
the nodes that still look slow with each other (``planning.side_plan``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from checks.job.node.pair_tests import PairTests
from checks.job.node.planning import first_busbw, retest_plan, side_plan
from checks.job.node.sweep import sweep

if TYPE_CHECKING:
    from checks.job.node.harness import Job

    JsonDict = dict[str, Any]


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
        if plan:
            pairs += tests.run(plan, settings, len(rounds), retest=True)
            sides = side_plan(pairs, slow_ratio, quiet_ratio)
            if sides:
                pairs += tests.run(sides, settings, len(rounds) + len(plan), retest=True)
            plan += sides
        result["pairs_duration_s"] = time.perf_counter() - pair_start
        result["retest_rounds"] = [[list(p) for p in r] for r in plan]
        if "pair_seed" in settings:
            result["pair_seed"] = settings["pair_seed"]
        tests.destroy()
    result["pairs"] = pairs
    result["duration_s"] = time.perf_counter() - start
    return result
