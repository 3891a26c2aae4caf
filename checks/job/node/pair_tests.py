"""Pair tests between nodes: rounds of pairs, the pairs of a round at once, each all-reducing over
its own communicator at one message size the whole world agrees on, so that pairs compare like
with like. The first wave and the re-tests it calls for (``allreduce``), and the tests of each rail
between two nodes (``rails``: a test is then a pair and a rail, and its ranks are that rail's), run
here.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from checks.job.node.cpu_wait import CpuWait
from checks.job.node.pair import pair_key
from checks.job.node.planning import (
    FLOAT32_BYTES,
    bus_bandwidth,
    cut_short_time,
    pack_rounds,
    pair_size,
    plan_iterations,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from checks.job.node.harness import Job, Settings

    JsonDict = dict[str, Any]
    # A test: the two nodes (node ranks, the lower first), then, for a rail's test, the rail.
    Test = tuple[int, ...]

# A pair test first times a message this small: a link too slow for the full pair message then
# gets a smaller one, so that one op stays well inside the pair's budget and the collective timeout.
PAIR_PROBE_BYTES = 64 * 1024


def next_round(measurements: Sequence[Mapping[str, Any]]) -> int:
    """The round after the last of ``measurements`` (0 for none)."""
    return max((int(m["round"]) for m in measurements), default=-1) + 1


class PairTests:
    """The pair tests of one job: one communicator per test, made once and reused by re-tests,
    destroyed after.

    ``members`` are a test's ranks (by default every rank of its two nodes); ``environment``, the
    variables this rank sets while the test's communicator is made (a rail's interface for gloo,
    which reads GLOO_SOCKET_IFNAME as each group starts), put back after."""

    def __init__(
        self,
        job: Job,
        members: Callable[[Test], list[int]] | None = None,
        environment: Callable[[Test], Mapping[str, str]] | None = None,
    ) -> None:
        self.job = job
        self.groups: dict[Test, Any] = {}
        self.members = members or self._node_ranks
        self.environment = environment

    def _node_ranks(self, test: Test) -> list[int]:
        ranks_of_node = self.job.ranks_of_node
        return sorted(ranks_of_node.get(test[0], []) + ranks_of_node.get(test[1], []))

    def group(self, test: Test) -> Any:
        """The test's communicator: made on first use by every rank in the same order (as
        new_group requires), reused by re-tests."""
        if test not in self.groups:
            job = self.job
            wanted = dict(self.environment(test)) if self.environment else {}
            before = {name: os.environ.get(name) for name in wanted}
            os.environ.update(wanted)
            try:
                made = job.dist.new_group(self.members(test), timeout=timedelta(seconds=job.timeout_s))
            finally:
                for name, value in before.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
            self.groups[test] = made
        return self.groups[test]

    def destroy(self) -> None:
        """Destroy every test's communicator (after the last re-test)."""
        for group in self.groups.values():
            self.job.dist.destroy_process_group(group)
        self.groups.clear()

    def run(
        self,
        rounds: Sequence[Sequence[Sequence[int]]],
        settings: Settings,
        first_round: int,
        retest: bool,
        in_turn_s: float = 0.0,
    ) -> list[JsonDict]:
        """Run rounds of pair tests (the pairs of a round at once, all at one message size that the
        whole world agrees on, so that pairs compare like with like); every rank returns every
        measurement. A pair's budget counts its communicator's start-up.

        With ``in_turn_s``, each pair runs alone, in the rounds' order, for up to that many seconds;
        the pairs left then run in rounds again. CPU ranks that share cores (several per node, or
        nodes on one machine) slow each other by the scheduler's luck: a pair slow alone is slow
        on its own."""
        job = self.job
        plan = [[(*pair_key(int(t[0]), int(t[1])), *map(int, t[2:])) for t in tests] for tests in rounds]
        for tests in plan:
            for test in tests:
                self.group(test)
        alone = in_turn_s > 0
        if alone:
            plan = [[pair] for pairs in plan for pair in pairs]
        local: list[JsonDict] = []
        began = time.perf_counter()
        index = 0
        while index < len(plan):
            if in_turn_s > 0 and job.agree_max([time.perf_counter() - began])[0] > in_turn_s:
                plan = plan[:index] + pack_rounds(pair for pairs in plan[index:] for pair in pairs)
                in_turn_s, alone = 0.0, False
            measured = self._test_round(plan[index], settings)
            if measured is not None:
                measured.update(round=first_round + index, alone=len(plan[index]) == 1 and alone)
                local.append(measured)
            # Rounds must not overlap: a pair still running would slow the next round's pairs.
            job.barrier()
            index += 1
        return _by_pair(job.gather(local), retest)

    def _test_round(self, pairs: Sequence[Test], settings: Settings) -> JsonDict | None:
        """This rank's part of one round: the message size every rank agrees on, then its pair's
        probe and timed ops within the pair's budget; None for a rank whose node sits it out."""
        job = self.job
        torch = job.torch
        target = max(FLOAT32_BYTES, int(settings["pair_bytes"]) // FLOAT32_BYTES * FLOAT32_BYTES)
        budget = float(settings["pair_budget_s"])
        probe_bytes = min(target, PAIR_PROBE_BYTES)
        mine = next((p for p in pairs if job.rank in self.members(p)), None)
        group = self.groups[mine] if mine is not None else None
        started = time.perf_counter()
        proposal = float(target)
        if group is not None:
            small = torch.zeros(probe_bytes // FLOAT32_BYTES, dtype=torch.float32, device=job.device)
            # The first op connects the pair's communicator (NCCL makes it lazily): it counts
            # against the budget, but not as a measurement.
            job.dist.all_reduce(small, group=group)
            probe_local = job.time_ops(small, 1, group, aligned=True)
            probe, spent = job.agree_max([probe_local, time.perf_counter() - started], group)
            proposal = float(pair_size(target, probe_bytes, probe, max(budget - spent, budget / 3)))
        size = int(job.agree_min([proposal])[0])
        buffer = job.allocate(size // FLOAT32_BYTES, f"the {size}-byte pair message", group is not None)
        if mine is None or group is None:
            return None
        ranks = self.members(mine)
        probe_local = job.time_ops(buffer, 1, group, aligned=True)  # allocate() agreed
        probe, spent = job.agree_max([probe_local, time.perf_counter() - started], group)
        requested = max(1, int(settings["iters"]))
        _, timed = plan_iterations(probe, budget - spent, 0, requested)
        waiting = CpuWait()
        per_op_local = job.time_ops(buffer, timed, group, aligned=True)
        return {
            "size_bytes": size, "iters": timed, "probe_s": probe_local,
            "time_s": cut_short_time(per_op_local, timed, requested, probe_local),
            "cpu_wait": waiting.share(per_op_local * timed), "nodes": list(mine[:2]), "ranks": ranks,
            **({"rail": mine[2]} if len(mine) > 2 else {}),
        }  # fmt: skip


def _by_pair(gathered: Sequence[Sequence[JsonDict]], retest: bool) -> list[JsonDict]:
    """Every rank's measurements as one record a pair and round, in round order: the pair's time is
    its slowest rank's, its CPU wait its most held-back rank's."""
    by_pair: dict[tuple[int, ...], JsonDict] = {}
    waits: dict[tuple[int, ...], list[float]] = {}
    for rank_results in gathered:
        for result in rank_results:
            key = (int(result["round"]), *map(int, result["nodes"]), int(result.get("rail", -1)))
            known = by_pair.get(key)
            # A pair runs at its slowest member's pace (nccl-tests averages over ranks by
            # default, -a 1; -a 3 takes the maximum, as here).
            if known is None or result["time_s"] > known["time_s"]:
                by_pair[key] = result
            if result.get("cpu_wait") is not None:
                waits.setdefault(key, []).append(float(result["cpu_wait"]))
    measurements: list[JsonDict] = []
    for key in sorted(by_pair):
        result = by_pair[key]
        algbw, busbw = bus_bandwidth(int(result["size_bytes"]), float(result["time_s"]), len(result["ranks"]))
        measurements.append(
            {
                "round": result["round"],
                "nodes": result["nodes"],
                "ranks": result["ranks"],
                "size_bytes": result["size_bytes"],
                "iters": result["iters"],
                "probe_s": result["probe_s"],
                "time_s": result["time_s"],
                "algbw_gbps": algbw,
                "busbw_gbps": busbw,
                "retest": retest,
                "alone": bool(result.get("alone")),
                "cpu_wait": max(waits[key]) if key in waits else None,
                **({"rail": result["rail"]} if "rail" in result else {}),
            }
        )
    return measurements
