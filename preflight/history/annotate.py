"""What a run learns from the store, in one place after the checks ran: each finding that failed
before says so, and a GPU or node slower than its own past is named.

A finding's repeats are the earlier findings under its key (the same check, node and cause) and,
where it names a part, the earlier findings of the same check and cause about that part on any
node: "3rd time in 30 days: on node2, then node3". The own-past rule compares each GPU's compute
rate and each node's bus bandwidth with the median of its own earlier runs in the window: peers
that degrade together (after a driver or firmware change) still look alike to the checks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from preflight.history.queries import earlier_failures, median, recent_series
from preflight.history.record import Finding, Rate, RunRecord, findings_of
from preflight.history.settings import iso
from preflight.history.spread import bound_sigmas
from preflight.history.store import Store
from preflight.measures import Measure
from preflight.model import CheckResult
from preflight.registry import kept_measures

CHECK = "history"
SLOWER = "slower_than_own_past"
# The fewest earlier runs a median of one's own past is taken over.
MIN_PAST_RUNS = 3
# The most: a rate's own past is its last this many runs in the window. Enough for a steady
# median and spread (a prediction bound of 4.7 sigmas; 4.1 for 180 runs), recent enough to follow
# a part's own slow drift, and read by index seeks rather than by reading the window's every value
# (a part judged at every run of a 30-day window has 180 of them at a run every 4 hours).
PAST_RUNS = 30
# A rate is below its own past only beyond that past's own spread: its earlier values' robust
# standard deviation (1.4826 x their median absolute deviation, of their logarithms: see
# :func:`lower_bound`) times a prediction bound for one
# new value from that many (:func:`preflight.history.spread.bound_sigmas`: 3 sigmas for a long past,
# more for a short one, whose spread is barely known). A GPU's compute rate moves by a few percent
# run to run and the margin decides; the CPU ranks of a shared machine move by tens of percent, and
# their own spread keeps a healthy run from being named.
MAD_TO_SIGMA = 1.4826
# The order the warnings come in: a GPU's first (a slow GPU slows its node's bus bandwidth too).
_JUDGED_FIRST = ("gpu", "node", "pair", "run")


def ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _started(record: RunRecord) -> datetime:
    return datetime.fromisoformat(record.started_at.replace("Z", "+00:00"))


def with_repeats(
    results: Sequence[CheckResult], record: RunRecord, store: Store, window_days: int
) -> list[CheckResult]:
    """``results`` with each problem that happened before marked: ``details["history"]`` (the
    times, the window, the earlier failures) and a suffix to its summary."""
    rows = {id(r): findings_of(r, record.parts, record.keys) for r in results}
    keys = [f.key for found in rows.values() for f in found]
    parts = [f.part for found in rows.values() for f in found if f.part]
    if not keys:
        return list(results)
    since = iso(_started(record) - timedelta(days=window_days))
    earlier = earlier_failures(store, keys, parts, since, record.started_at)
    marked = []
    for result in results:
        before = _repeats_of(rows[id(result)], earlier)
        if not before:
            marked.append(result)
            continue
        times = len({at for _, _, at in before}) + 1
        nodes = list(dict.fromkeys([*(node for node, _, _ in before), *map(record.key, result.hosts)]))
        where = ", then ".join(nodes)
        note = f"{ordinal(times)} time in {window_days} days: on {where}"
        details: dict[str, Any] = {
            **result.details,
            "history": {
                "times": times,
                "window_days": window_days,
                "before": [{"started_at": at, "node": node, "part": part} for node, part, at in before],
            },
        }
        marked.append(dataclasses.replace(result, summary=f"{result.summary} ({note})", details=details))
    return marked


def _repeats_of(
    found: Sequence[Finding], earlier: Sequence[tuple[str, str, str | None, str, str]]
) -> list[tuple[str, str | None, str]]:
    """(node, part, started_at) of the earlier failures that repeat one of ``found``, oldest first."""
    repeats: dict[tuple[str, str | None, str], None] = {}
    for finding in found:
        for key, node, part, check_cause, at in earlier:
            same_part = finding.part is not None and part == finding.part
            if key == finding.key or (same_part and check_cause == f"{finding.check}/{finding.cause}"):
                repeats[(node, part, at)] = None
    return sorted(repeats, key=lambda row: row[2])


def slower_than_own_past(
    record: RunRecord, store: Store, window_days: int, margin: float
) -> list[CheckResult]:
    """A warning for each rate its check judges against its own past (``Measure.own_past``: a
    GPU's compute rate, a node's bus bandwidth) that is below the median of its own earlier runs
    in the window (the last :data:`PAST_RUNS` of them) by more than ``margin`` (0.1: 10 %) and
    beyond the spread of those runs (:data:`MAD_TO_SIGMA`: a rate that moves that much run to run
    is not named for moving)."""
    since = iso(_started(record) - timedelta(days=window_days))
    found: list[CheckResult] = []
    judged = [m for m in kept_measures().values() if m.own_past]
    for measure in sorted(judged, key=lambda m: _JUDGED_FIRST.index(m.entity)):
        metric = measure.metric
        now = [r for r in record.rates if r.metric == metric]
        if not now:
            continue
        keys = [(r.node, r.part) for r in now]
        past = recent_series(store, metric, keys, since, record.started_at, PAST_RUNS)
        for rate in now:
            values = past.get((rate.node, rate.part), [])
            if len(values) < MIN_PAST_RUNS:
                continue
            typical = median(values)
            if typical > 0 and rate.value < min(typical * (1 - margin), lower_bound(values)):
                found.append(_slower(measure, rate, typical, len(values), record, window_days))
    return found


def lower_bound(values: list[float]) -> float:
    """The lowest a new value of a rate may fall and still be as its past ``values`` were: the
    prediction bound (:func:`preflight.history.spread.bound_sigmas`) below their median, on the
    scale of their logarithms. A rate's noise is a share of it (a busy machine halves a rate, it
    does not take a fixed amount off), and on that scale a noisy past widens the bound towards zero
    without passing it: a rate at a tenth of a past that moved by tens of percent is still named."""
    logs = [math.log(v) for v in values if v > 0]
    if not logs:
        return 0.0
    center = median(logs)
    spread = MAD_TO_SIGMA * median([abs(v - center) for v in logs])
    return math.exp(center - bound_sigmas(len(logs)) * spread)


def _slower(
    measure: Measure, rate: Rate, typical: float, runs: int, record: RunRecord, window_days: int
) -> CheckResult:
    unit = measure.unit
    below = 1 - rate.value / typical
    slot = next((p.slot for p in record.parts.get(rate.node, ()) if p.part == rate.part), None)
    name = record.names.get(rate.node, rate.node)
    hosts: tuple[str, ...] = (name,)
    if measure.entity == "gpu":
        what = f"{name} GPU {slot} ({rate.part})"
    elif measure.entity == "pair":
        hosts = (name, record.names.get(rate.part, rate.part))
        what = " ↔ ".join(hosts)
    else:
        what = name
    summary = (
        f"{what}: {measure.what} {rate.value:.1f} {unit}, {below:.0%} below its own median of "
        f"{typical:.1f} {unit} over {runs} runs in {window_days} days"
    )
    details = {
        "item": SLOWER,
        "metric": rate.metric,
        "node": rate.node,
        "part": rate.part or None,
        "value": rate.value,
        "median": typical,
        "runs": runs,
    }
    return CheckResult(CHECK, "warn", summary, hosts, details)
