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


def _row(test: Mapping[str, Any], share: float | None, slow: bool) -> list[TCell]:
    busbw = number(test.get("busbw_gbps")) or 0.0
    odd = "odd odd-fail" if slow else ""
    return [
        TCell(" \u2013 ".join(str(n) for n in listed(test.get("nodes")))),
        TCell(str(test.get("rail")), "num"),
        TCell("re-test" if test.get("retest") else ""),
        TCell(f"{busbw:.3g}", f"num {odd}".strip()),
        TCell(f"{share:.2f}x" if share is not None else "-", f"num {odd}".strip()),
    ]


def evidence(report: RunReport) -> Sequence[Block]:
    details = merged_details(report.results_for(NAME))
    healthy = number(details.get("healthy_gbps"))
    slow = {h for r in report.results_for(NAME) if r.status in ("fail", "warn") for h in r.hosts}
    rows: list[tuple[float, list[TCell]]] = []
    for test in (t for t in listed(details.get("tests")) if isinstance(t, Mapping)):
        busbw = number(test.get("busbw_gbps"))
        share = busbw / healthy if busbw is not None and healthy else None
        named = bool(slow & set(map(str, listed(test.get("nodes"))))) and share is not None and share < 1
        rows.append((share if share is not None else 1.0, _row(test, share, named)))
    if not rows:
        return []
    rows.sort(key=lambda row: row[0])
    note = f"{len(rows) - MAX_TABLE_ROWS} more tests in the JSON report" if len(rows) > MAX_TABLE_ROWS else ""
    table = Table(
        ["nodes", "rail", "", "busbw GB/s", "of a healthy rail"],
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
            root_cause.ITEM: root_cause.ADVICE,
        }
    ),
)
