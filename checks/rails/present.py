"""How the ``rails`` check shows itself: its heading, each rail test between two nodes in a table
(the slow ones first), and what to do about a slow rail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checks.compute import root_cause
from checks.job.evidence import merged_details
from checks.rails.details import NAME
from preflight.model import RunReport
from preflight.view import MAX_TABLE_ROWS, Block, Presentation, Table, TCell, advice_by_item, listed, number


def _row(test: Mapping[str, Any], measured: str, share: float | None, named: bool) -> list[TCell]:
    odd = "num odd odd-fail" if named else "num"
    kind = "latency" if test.get("latency") else "bandwidth"
    return [
        TCell(" \u2013 ".join(str(n) for n in listed(test.get("nodes")))),
        TCell(str(test.get("rail")), "num"),
        TCell(f"{kind}, re-test" if test.get("retest") else kind),
        TCell(measured, odd),
        TCell(f"{share:.2f}x" if share is not None else "-", odd),
    ]


def _measured(test: Mapping[str, Any], details: Mapping[str, Any]) -> tuple[str, float | None]:
    """A test's figure as read (GB/s busbw, or microseconds an all-reduce at 8 bytes) and its share
    of a healthy rail test's (below 1: slower)."""
    if test.get("latency"):
        micros = (number(test.get("time_s")) or 0.0) * 1e6
        healthy = number(details.get("healthy_latency_us"))
        return f"{micros:.3g} \u00b5s", healthy / micros if healthy and micros else None
    busbw = number(test.get("busbw_gbps")) or 0.0
    healthy = number(details.get("healthy_gbps"))
    return f"{busbw:.3g} GB/s", busbw / healthy if healthy else None


def evidence(report: RunReport) -> Sequence[Block]:
    details = merged_details(report.results_for(NAME))
    slow = {h for r in report.results_for(NAME) if r.status in ("fail", "warn") for h in r.hosts}
    rows: list[tuple[float, list[TCell]]] = []
    for test in (t for t in listed(details.get("tests")) if isinstance(t, Mapping)):
        measured, share = _measured(test, details)
        named = bool(slow & set(map(str, listed(test.get("nodes"))))) and share is not None and share < 1
        rows.append((share if share is not None else 1.0, _row(test, measured, share, named)))
    if not rows:
        return []
    rows.sort(key=lambda row: row[0])
    note = f"{len(rows) - MAX_TABLE_ROWS} more tests in the JSON report" if len(rows) > MAX_TABLE_ROWS else ""
    table = Table(
        ["nodes", "rail", "test", "measured", "of a healthy rail"],
        [cells for _, cells in rows[:MAX_TABLE_ROWS]],
        title="Each rail between ring neighbours, slowest first",
        note=note,
    )
    return [table]


PRESENTATION = Presentation(
    heading="Each rail between nodes",
    about="each rail (a GPU and the NIC nearest it, or one of a CPU node's interfaces) all-reduced on its "
    "own with the same rail of the node's ring neighbours",
    evidence=evidence,
    advice=advice_by_item(
        {
            "slow_rail": "On GPU nodes, nvidia-smi topo -m shows the NIC nearest that GPU; check that NIC's "
            "port (ibstat: rate and state, its error counters), cable and switch port, and the GPU's PCIe "
            "link. On CPU nodes, that interface's speed (ethtool), cable and switch port.",
            "slow_on_every_rail": "Every rail of the node is slow: look at the node (its CPU frequency, "
            "PCIe, a shared setting of its NICs) before any one card.",
            "slow_rail_pair": "Run again with a third node: with two, which side of the rail is slow cannot "
            "be told. Check both nodes' NICs on that rail.",
            "slow_rail_link": "Check the cables and switch ports between the two nodes on that rail.",
            "slow_rail_everywhere": "Check that rail's switch (or its leaf), and the NIC settings on that "
            "rail every node shares.",
            "rail_latency": "A card slow to answer small messages: check that NIC's port (ibstat), its "
            "firmware and link settings against the same NIC elsewhere, and the switch port's congestion "
            "or adaptive-routing settings on that rail.",
            root_cause.ITEM: root_cause.ADVICE,
        }
    ),
)
