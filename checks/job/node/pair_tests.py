"""Pair tests between nodes: rounds of pairs, the pairs of a round at once, each all-reducing over
its own communicator at one message size the whole world agrees on, so that pairs compare like
with like. The first wave and the re-tests it calls for (``allreduce``) run here.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from checks.job.node.cpu_wait import CpuWait
from checks.job.node.planning import (
    FLOAT32_BYTES,
    bus_bandwidth,
    cut_short_time,
    pack_rounds,
    pair_key,
    pair_size,
    plan_iterations,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from checks.job.node.harness import Job, Settings

    JsonDict = dict[str, Any]
    Pair = tuple[int, int]

# A pair test first times a message this small: a link too slow for the full pair message then
# gets a smaller one, so that one op stays well inside the pair's budget and the collective timeout.
PAIR_PROBE_BYTES = 64 * 1024


class PairTests:
    """The pair tests of one job: one communicator per pair of nodes, made once and reused by
    re-tests, destroyed after."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.groups: dict[Pair, Any] = {}

    def group(self, pair: Pair) -> Any:
        """The pair's communicator: made on first use by every rank in the same order (as
        new_group requires), reused by re-tests."""
        if pair not in self.groups:
            job = self.job
            ranks = sorted(job.ranks_of_node.get(pair[0], []) + job.ranks_of_node.get(pair[1], []))
            self.groups[pair] = job.dist.new_group(ranks, timeout=timedelta(seconds=job.timeout_s))
        return self.groups[pair]

    def destroy(self) -> None:
        """Destroy every pair's communicator (after the last re-test)."""
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
        plan = [[pair_key(int(a), int(b)) for a, b in pairs] for pairs in rounds]
        for pairs in plan:
            for pair in pairs:
                self.group(pair)
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

    def _test_round(self, pairs: Sequence[Pair], settings: Settings) -> JsonDict | None:
        """This rank's part of one round: the message size every rank agrees on, then its pair's
        probe and timed ops within the pair's budget; None for a rank whose node sits it out."""
        job = self.job
        torch = job.torch
        target = max(FLOAT32_BYTES, int(settings["pair_bytes"]) // FLOAT32_BYTES * FLOAT32_BYTES)
        budget = float(settings["pair_budget_s"])
        probe_bytes = min(target, PAIR_PROBE_BYTES)
        mine = next((p for p in pairs if job.node_rank in p), None)
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
        ranks = sorted(job.ranks_of_node.get(mine[0], []) + job.ranks_of_node.get(mine[1], []))
        probe_local = job.time_ops(buffer, 1, group, aligned=True)  # allocate() agreed
        probe, spent = job.agree_max([probe_local, time.perf_counter() - started], group)
        requested = max(1, int(settings["iters"]))
        _, timed = plan_iterations(probe, budget - spent, 0, requested)
        waiting = CpuWait()
        per_op_local = job.time_ops(buffer, timed, group, aligned=True)
        return {
            "size_bytes": size, "iters": timed, "probe_s": probe_local,
            "time_s": cut_short_time(per_op_local, timed, requested, probe_local),
            "cpu_wait": waiting.share(per_op_local * timed), "nodes": list(mine), "ranks": ranks,
        }  # fmt: skip


def _by_pair(gathered: Sequence[Sequence[JsonDict]], retest: bool) -> list[JsonDict]:
    """Every rank's measurements as one record a pair and round, in round order: the pair's time is
    its slowest rank's, its CPU wait its most held-back rank's."""
    by_pair: dict[tuple[int, int, int], JsonDict] = {}
    waits: dict[tuple[int, int, int], list[float]] = {}
    for rank_results in gathered:
        for result in rank_results:
            key = (int(result["round"]), int(result["nodes"][0]), int(result["nodes"][1]))
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
            }
        )
    return measurements
