"""The report's ``history`` key: what the store says about the run's own nodes and parts within
the window, as ``preflight history --json`` answers it for them, with each trend's latest values
and this run's own value for the report's sparklines."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from preflight.history.queries import flaky_of, offenders_of, trends_of
from preflight.history.record import PAIR_BUSBW, RunRecord
from preflight.history.settings import iso
from preflight.history.store import Store

# A trend's values the report carries: those of the last this many runs that checked the run's
# nodes, enough for a sparkline (at 1,000 nodes of 8 GPUs the key is about 3 MB of the report's
# JSON), read from these runs only, not the whole window.
POINTS = 20
# Significant digits of the values kept: a sparkline shows no more.
DIGITS = 4


def run_history(store: Store, record: RunRecord, window_days: int) -> dict[str, Any]:
    """Repeat offenders among the run's nodes and parts, its nodes' flaky findings, and the trends
    of its nodes, of the pairs it tested and of its GPUs, from ``window_days`` before the run to
    the run itself."""
    started = datetime.fromisoformat(record.started_at.replace("Z", "+00:00"))
    since = iso(started - timedelta(days=window_days))
    nodes = [h.name for h in record.hosts]
    parts = [p.part for found in record.parts.values() for p in found]
    now = {(r.metric, r.node, r.part): r.value for r in record.rates}
    pairs = [(r.node, r.part) for r in record.rates if r.metric == PAIR_BUSBW]
    trends = []
    for trend, values in trends_of(store, since, nodes, parts, pairs, points=POINTS):
        trends.append(
            {
                **trend.to_dict(),
                "now": now.get((trend.metric, trend.node, trend.part)),
                "values": [float(f"{v:.{DIGITS}g}") for v in values],
            }
        )
    return {
        "store": store.target,
        "since": since,
        "window_days": window_days,
        "offenders": [o.to_dict() for o in offenders_of(store, since, nodes, parts)],
        "flaky": [f.to_dict() for f in flaky_of(store, since, nodes)],
        "trends": trends,
    }
