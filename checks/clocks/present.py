"""How the ``clocks`` check shows itself: each node's offset from the controller and from the other
nodes, its uncertainty and its time service, in a table, and what to do about each kind of finding.
"""

from __future__ import annotations

from checks.clocks.judge import NAME, signed
from preflight.model import RunReport
from preflight.view import Block, Presentation, Table, TCell, advice_by_item, listed, node_rows, number, plain


def _seconds(value: object) -> str:
    found = number(value)
    return "\u2014" if found is None else signed(found)


def _table(report: RunReport) -> list[Block]:
    nodes, named = node_rows(report, NAME)
    rows = []
    for host, row in nodes:
        uncertainty = number(row.get("uncertainty_s"))
        services = listed(row.get("services"))
        rows.append(
            [
                TCell(plain(host), "mono odd odd-fail" if host in named else "mono"),
                TCell(_seconds(row.get("offset_s")), "num"),
                TCell("\u2014" if uncertainty is None else f"\u00b1{uncertainty * 1000:.1f} ms", "num"),
                TCell(_seconds(row.get("from_nodes_s")), "num"),
                TCell(plain(row.get("service") or "unknown")),
                TCell(plain(", ".join(str(s) for s in services) or "\u2014"), "mono"),
            ]
        )
    if not rows:
        return []
    head = ("node", "offset from controller", "uncertainty", "offset from nodes", "kernel clock", "services")
    return [Table(head, rows, title="Clocks by node")]


PRESENTATION = Presentation(
    heading="Clocks",
    about="every node's clock agrees with the others' and is kept synchronised by a time service",
    evidence=_table,
    advice=advice_by_item(
        {
            "offset": "Synchronise the node's clock (chronyc makestep, or restart chronyd/ntpd) and "
            "check that its time service reaches the same servers as the others.",
            "unsynchronised": "Run a time service on every node (chrony, ntpd, systemd-timesyncd or "
            "ptp4l) pointed at the cluster's time servers; chronyc tracking says whether it is in step.",
        }
    ),
)
