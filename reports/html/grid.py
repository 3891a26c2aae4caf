"""The node x check grid: each node's status per check, nodes with the same statuses folded into
one row (``gpu[01-30]``), culprits on rows of their own, failures first. Checks in registry
order, headed by each check's own heading."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from preflight.model import CheckResult, RunReport
from preflight.nodeset import fold, natural_key
from preflight.registry import all_checks, presentation_of
from preflight.status import LABELS as STATUS_LABELS
from preflight.status import overall, severity, worst
from preflight.view import TCell
from reports.html.text import Anchors, text

LABELS = {**STATUS_LABELS, "unchecked": "not checked"}


ICONS = {"pass": "✓", "warn": "!", "fail": "✕", "error": "?", "skip": "\u2013", "unchecked": "·"}


@dataclass(frozen=True)
class GridRow:
    label: str
    anchor: str  # a node's anchor when the row is one node
    count: int
    note: str
    cells: Sequence[TCell]
    status: str


def checks_of(report: RunReport) -> list[str]:
    seen = list(dict.fromkeys(r.check for r in report.results))
    order = [c.name for c in all_checks()]
    known = [c for c in order if c in seen]
    return known + [c for c in seen if c not in order]


def heading(check: str) -> str:
    presentation = presentation_of(check)
    return presentation.heading if presentation else text(check)


def check_anchor(check: str, index: int) -> str:
    """``check-versions``; a check whose name is not a plain word gets ``check-N``."""
    return f"check-{check}" if re.fullmatch(r"[a-z0-9_]+", check) else f"check-{index}"


def check_heads(report: RunReport) -> list[tuple[str, str]]:
    return [(heading(c), check_anchor(c, i)) for i, c in enumerate(checks_of(report))]


def node_statuses(report: RunReport) -> dict[str, dict[str, str]]:
    """host -> check -> status: the worst finding naming the host; a cluster-wide finding (no
    hosts named) for every node; pass when the check ran and did not name it."""
    checks = checks_of(report)
    table: dict[str, dict[str, str]] = {}
    by_check: dict[str, list[CheckResult]] = {c: report.results_for(c) for c in checks}
    for host in report.hosts:
        row: dict[str, str] = {}
        for check in checks:
            results = by_check[check]
            named = [r.status for r in results if host.name in r.hosts]
            if named:
                row[check] = worst(named)
                continue
            if not host.reachable:
                row[check] = "unchecked"
                continue
            wide = [r.status for r in results if not r.hosts and r.status in ("fail", "error", "warn")]
            if wide:
                row[check] = worst(wide)
            elif all(r.status == "skip" for r in results):
                row[check] = "skip"
            else:
                row[check] = "pass"
        table[host.name] = row
    return table


def build_grid(
    report: RunReport, anchors: Anchors, *, max_rows: int = 400
) -> tuple[list[str], list[GridRow], int]:
    """Rows of the node x check grid, failures first. Nodes with the same statuses fold into
    one row (``gpu[01-30]``); a node named by any finding that did not pass is its own row."""
    checks = checks_of(report)
    statuses = node_statuses(report)
    culprits = {h for r in report.results if r.status != "pass" for h in r.hosts}
    summaries: dict[tuple[str, str], list[str]] = {}
    for r in report.results:
        for h in r.hosts:
            summaries.setdefault((h, r.check), []).append(f"{LABELS[r.status]}: {text(r.summary)}")
    groups: dict[tuple[str, ...], list[str]] = {}
    singles: list[str] = []
    hosts = {h.name: h for h in report.hosts}
    for host in report.hosts:
        if host.name in culprits:
            singles.append(host.name)
        else:
            groups.setdefault(tuple(statuses[host.name][c] for c in checks), []).append(host.name)
    rows: list[GridRow] = []
    for name in singles:
        row = statuses[name]
        cells = [
            TCell(
                ICONS[row[c]], f"st-{row[c]}", "\n".join(summaries.get((name, c), [f"{c}: {LABELS[row[c]]}"]))
            )
            for c in checks
        ]
        host = hosts[name]
        note = text(host.hostname) if host.hostname and host.hostname != name else ""
        rows.append(GridRow(text(name), anchors(name), 1, note, cells, overall(row.values())))
    for key, names in groups.items():
        cells = [TCell(ICONS[s], f"st-{s}", f"{c}: {LABELS[s]}") for c, s in zip(checks, key, strict=True)]
        anchor = anchors(names[0]) if len(names) == 1 else ""
        note = ""
        if len(names) == 1:
            host = hosts[names[0]]
            note = text(host.hostname) if host.hostname and host.hostname != names[0] else ""
        rows.append(GridRow(text(fold(names)), anchor, len(names), note, cells, overall(key)))
    rows.sort(key=lambda r: (severity(r.status), r.count, natural_key(r.label)))
    hidden = max(0, len(rows) - max_rows)
    return checks, rows[:max_rows], hidden
