"""Stragglers on small clusters: with a few nodes there are too few pairs to measure the noise
across them, so a node moderately slow with every partner (a link shaped to 5 Gbit/s among 100)
hides under the fixed slow ratio. There the job repeats every pair when one read slow
(``planning.repeat_plan``): each pair's own repeats measure the run's noise, and a node whose every
pair is STRAGGLER_RATIO of the pairs without it or slower, beyond that noise, is named. Pure:
records in, names out.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checks.job.node.pair import Pair, pair_key
from checks.job.node.planning import STRAGGLER_RATIO
from checks.job.pairs import PairJudgement

# How many standard errors of the pairs' own noise the slow mean must lie below the healthy one.
STRAGGLER_SIGMAS = 4.0


@dataclass(frozen=True)
class Straggler:
    """A node slow with every partner, against the pairs without it: both means, the noise, and how
    many tests each mean holds."""

    node: int
    busbw_gbps: float  # the mean of its pairs' tests
    healthy_gbps: float  # the mean of the other pairs' tests
    noise_gbps: float  # the pairs' own standard deviation, pooled over their repeats
    tests: int
    healthy_tests: int

    @property
    def ratio(self) -> float:
        return self.busbw_gbps / self.healthy_gbps if self.healthy_gbps > 0 else 0.0


def _tests(records: Sequence[Mapping[str, Any]]) -> dict[Pair, list[float]]:
    """Each pair's first test and repeats (re-tests of suspects are not like for like)."""
    found: dict[Pair, list[float]] = {}
    for record in records:
        if record.get("retest") and not record.get("repeat"):
            continue
        a, b = (int(node) for node in record["nodes"])
        found.setdefault(pair_key(a, b), []).append(float(record["busbw_gbps"]))
    return found


def _pooled_noise(tests: Mapping[Pair, Sequence[float]]) -> float | None:
    """The standard deviation of a pair's tests about its own mean, pooled over the pairs."""
    squares, freedom = 0.0, 0
    for values in tests.values():
        if len(values) >= 2:
            mean = statistics.fmean(values)
            squares += sum((v - mean) ** 2 for v in values)
            freedom += len(values) - 1
    return math.sqrt(squares / freedom) if freedom else None


def _against(
    node: int,
    slow: Mapping[Pair, Sequence[float]],
    rest: Mapping[Pair, Sequence[float]],
    noise: float,
) -> Straggler | None:
    """``slow``'s pairs against ``rest``: a straggler when each of them is STRAGGLER_RATIO of the rest
    or slower and their mean lies STRAGGLER_SIGMAS standard errors below it."""
    if not slow or not rest:
        return None
    healthy_values = [v for values in rest.values() for v in values]
    healthy = statistics.fmean(healthy_values)
    if any(statistics.fmean(values) > STRAGGLER_RATIO * healthy for values in slow.values()):
        return None
    slow_values = [v for values in slow.values() for v in values]
    mean = statistics.fmean(slow_values)
    error = noise * math.sqrt(1 / len(slow_values) + 1 / len(healthy_values))
    if healthy - mean < STRAGGLER_SIGMAS * error:
        return None
    return Straggler(node, mean, healthy, noise, len(slow_values), len(healthy_values))


def name_stragglers(records: Sequence[Mapping[str, Any]]) -> list[Straggler]:
    """The slow nodes told by the repeats of a small cluster's pairs; none without them."""
    if not any(record.get("repeat") for record in records):
        return []
    tests = _tests(records)
    noise = _pooled_noise(tests)
    if noise is None:
        return []
    found: list[Straggler] = []
    for node in sorted({n for pair in tests for n in pair}):
        mine = {pair: values for pair, values in tests.items() if node in pair}
        if len(mine) >= 2:
            rest = {pair: values for pair, values in tests.items() if node not in pair}
            if (straggler := _against(node, mine, rest, noise)) is not None:
                found.append(straggler)
    return found


def explained_by_stragglers(culprits: PairJudgement, stragglers: Sequence[Straggler]) -> PairJudgement:
    """``culprits`` without the slow links of a straggler: its pairs are slow because it is, and
    naming one of them as a link would blame its healthy partner."""
    slow = {straggler.node for straggler in stragglers}
    links = tuple(link for link in culprits.slow_links if not slow & set(link.nodes))
    return dataclasses.replace(culprits, slow_links=links)


def stragglers_among(records: Sequence[Mapping[str, Any]], culprits: PairJudgement) -> list[Straggler]:
    """The stragglers the repeats tell that are not slow nodes already."""
    named = {s.node for s in culprits.slow_nodes}
    return [s for s in name_stragglers(records) if s.node not in named]
