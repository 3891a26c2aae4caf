"""``clocks``: each node's clock offset from the controller, measured over SSH by the midpoint
method with its uncertainty, compared between the nodes; and whether a time service keeps each
node's clock synchronised (``unknown`` where the node cannot tell).

Observed in :mod:`checks.clocks.probe` by the node script :mod:`checks.clocks.node`, judged in
:mod:`checks.clocks.judge`.
"""

from __future__ import annotations

from checks.clocks.judge import NAME, ClockSample, ClocksObservation, best_sample, judge_clocks, signed
from checks.clocks.probe import OBSERVE
from checks.clocks.settings import DURATION, SETTINGS, ClocksSection
from preflight.check import Check, CheckContext
from preflight.model import CheckResult, RunReport
from preflight.view import Block, Presentation, Table, TCell, advice_by_item, listed, node_rows, number, plain

__all__ = ["CHECK", "ClockSample", "ClocksObservation", "best_sample", "judge_clocks"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    if not ctx.live_sessions:
        return [CheckResult(NAME, "skip", "no reachable host to ask")]
    return judge_clocks(ctx.probe(OBSERVE), ctx.config.section(ClocksSection))


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

CHECK = Check(
    name=NAME,
    title="clocks agree between nodes (midpoint over SSH, with its uncertainty) and a time service runs",
    run=_run,
    presentation=PRESENTATION,
    action="fix_config",
    settings=SETTINGS,
    duration=DURATION,
)
