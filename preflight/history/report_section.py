"""The report's ``history`` key: what the store says about the run's own nodes and parts within
the window, as ``preflight history --json`` answers it for them.

At 1,000 nodes of 8 GPUs a run has some 11,000 rates. The key gives each its runs, mean and this
run's value (enough to find the nodes, GPUs and pairs furthest below their own mean), and the full
trend (low, high, first and last time) with its latest values only to those the report draws as
sparklines (:mod:`.drawn`: at most 40): its reads are two aggregates of each rate over the window,
then a few seeks on the rates' index.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from preflight.history.drawn import drawn, key_of, reasons, slower_keys
from preflight.history.queries import flaky_of, latest_values, means_of, offenders_of, trends_by_key
from preflight.history.record import RunRecord
from preflight.history.settings import iso
from preflight.history.store import Store
from preflight.model import CheckResult
from preflight.registry import kept_metrics

# A drawn trend's values the report carries: its last this many in the window, enough for a
# sparkline.
POINTS = 20
# Significant digits of the values kept: a sparkline shows no more.
DIGITS = 4


@dataclass(frozen=True)
class _UndrawnRate:
    """A rate of the run as the key gives it when it is not drawn."""

    metric: str
    node: str
    part: str
    runs: int
    mean: float
    now: float | None


def run_history(
    store: Store, record: RunRecord, window_days: int, results: Iterable[CheckResult] = ()
) -> dict[str, Any]:
    """Repeat offenders among the run's nodes and parts, its nodes' flaky findings, and the trends
    of its nodes, of the pairs it tested and of its GPUs, from ``window_days`` before the run to
    the run itself. ``results``: the run's findings, whose ``history`` warnings name the rates
    slower than their own past (drawn first)."""
    started = datetime.fromisoformat(record.started_at.replace("Z", "+00:00"))
    since = iso(started - timedelta(days=window_days))
    nodes = [record.key(h.name) for h in record.hosts]
    parts = [p.part for found in record.parts.values() for p in found]
    now = {(r.metric, r.node, r.part): r.value for r in record.rates}
    pair_metrics = kept_metrics("pair")
    pairs = [(r.metric, r.node, r.part) for r in record.rates if r.metric in pair_metrics]
    offenders = offenders_of(store, since, nodes, parts)
    seen = [
        _UndrawnRate(m.metric, m.node, m.part, m.runs, m.mean, now.get((m.metric, m.node, m.part)))
        for m in means_of(store, since, nodes, parts, pairs)
    ]
    why = reasons(seen, slower_keys(results), {(o.by, o.name) for o in offenders})
    chosen = [key_of(t) for t in drawn(seen, why)]
    full = {(t.metric, t.node, t.part): t for t in trends_by_key(store, since, chosen)}
    values = latest_values(store, since, chosen, POINTS)
    trends = []
    for t in seen:
        key = key_of(t)
        if key in full:
            shown = [float(f"{v:.{DIGITS}g}") for v in values.get(key, [])]
            trends.append({**full[key].to_dict(), "now": t.now, "values": shown})
        else:
            trends.append(
                {
                    "metric": t.metric,
                    "node": t.node,
                    "part": t.part,
                    "runs": t.runs,
                    "mean": t.mean,
                    "now": t.now,
                }
            )
    named = _in_this_runs_names(record)
    return {
        "store": store.target,
        "since": since,
        "window_days": window_days,
        "identities": [
            {"name": name, "node": i.key, "source": i.source}
            for name, i in sorted(record.identities.items())
            if i.differs
        ],
        "offenders": [named(o.to_dict()) for o in offenders],
        "flaky": [named(f.to_dict()) for f in flaky_of(store, since, nodes)],
        "trends": [named(t) for t in trends],
    }


def _in_this_runs_names(record: RunRecord) -> Any:
    """A function that gives a row of the key with this run's nodes named as the report names them
    (the names that reached them); the store keeps them by identity, and ``identities`` says which
    is which where the two differ."""
    names = record.names
    pair_metrics = kept_metrics("pair")

    def named(row: dict[str, Any]) -> dict[str, Any]:
        row = dict(row)
        if "node" in row:
            row["node"] = names.get(row["node"], row["node"])
        if row.get("metric") in pair_metrics:
            row["part"] = names.get(row["part"], row["part"])
        if row.get("by") == "node":
            row["name"] = names.get(row["name"], row["name"])
        elif row.get("by") == "part":
            row["others"] = [names.get(n, n) for n in row["others"]]
        if "failures" in row:
            row["failures"] = [{**f, "node": names.get(f["node"], f["node"])} for f in row["failures"]]
        return row

    return named
