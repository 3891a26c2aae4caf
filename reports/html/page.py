"""The whole page: the verdict as a sentence, the grid, the sections and the nodes, rendered
with the Jinja2 template into one self-contained file under a strict Content-Security-Policy
(the one stylesheet and script allowed by their hashes, no network)."""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from preflight.errors import ExitCode
from preflight.escape import printable
from preflight.model import RunReport
from preflight.registry import all_checks
from preflight.status import overall, severity
from preflight.units import duration
from reports import charts
from reports.html.grid import ICONS, LABELS, GridRow, build_grid, check_heads, node_statuses
from reports.html.handback import HandbackView, handback_view
from reports.html.history import HistoryView, history_view
from reports.html.nodes import FactView, NodeView, chips, node_facts
from reports.html.sections import Finding, Section, build_sections, finding_view
from reports.html.text import Anchors, script_json, text, when
from reports.html.timeline import TimelineView, timeline_view
from reports.summary import headline, ordered

EXIT_MEANING = {
    ExitCode.OK: "every check passed",
    ExitCode.CHECK_FAILED: "a check failed",
    ExitCode.USAGE_ERROR: "usage or input error",
    ExitCode.HOSTS_UNCHECKED: "hosts could not be checked",
    ExitCode.INTERRUPTED: "interrupted",
}


@dataclass(frozen=True)
class Page:
    title: str
    verdict: str
    verdict_label: str
    sentence: str
    exit_code: int
    exit_meaning: str
    duration: str
    started_at: str
    started_iso: str
    tool_version: str
    schema_version: int
    reachable: int
    total: int
    counts: Sequence[tuple[str, int]]
    checks: Sequence[Section]
    problems: Sequence[Finding]
    passes: Sequence[Finding]
    handback: HandbackView | None
    grid_checks: Sequence[tuple[str, str]]  # (title, anchor)
    grid: Sequence[GridRow]
    grid_hidden: int
    history: HistoryView | None
    timeline: TimelineView | None
    nodes: Sequence[NodeView]
    common: Sequence[FactView]
    data_json: Markup
    css: Markup
    js: Markup
    csp: str


@cache
def _asset(name: str) -> str:
    return resources.files("reports").joinpath("templates", name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


@cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("reports", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals.update(labels=LABELS, icons=ICONS, known={c.name for c in all_checks()}, draw=charts.draw)
    return env


def _summary_data(report: RunReport, sentence: str) -> dict[str, Any]:
    """What a script or a scraper needs: the verdict and the findings, without the details."""
    return {
        "schema_version": report.schema_version,
        "tool_version": report.tool_version,
        "started_at": report.started_at,
        "duration_s": report.duration_s,
        "verdict": report.verdict,
        "exit_code": int(report.exit_code),
        "headline": sentence,
        "hosts": [{"name": h.name, "reachable": h.reachable} for h in report.hosts],
        "results": [
            {"check": r.check, "status": r.status, "hosts": list(r.hosts), "summary": r.summary}
            for r in report.results
        ],
    }


def _clean(value: Any) -> Any:
    """Every string (and key) made printable: what a node sent cannot carry escape sequences
    or control characters into any part of the page."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Mapping):
        return {printable(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def printable_report(report: RunReport) -> RunReport:
    return RunReport.from_dict(_clean(report.to_dict()))


def build_page(report: RunReport) -> Page:
    report = printable_report(report)
    anchors = Anchors(report.hosts)
    said = text(headline(report))
    label, _, sentence = said.partition(" — ")
    if not sentence:
        label, sentence = report.verdict.upper(), said
    findings = {i: finding_view(r, i, anchors) for i, r in enumerate(report.results)}
    order = ordered(list(report.results))
    index_of = {id(r): i for i, r in enumerate(report.results)}
    problems = [findings[index_of[id(r)]] for r in order if r.status in ("fail", "error", "warn")]
    passes = [findings[index_of[id(r)]] for r in order if r.status in ("pass", "skip")]
    _, grid, hidden = build_grid(report, anchors)
    statuses = node_statuses(report)
    common, per_host = node_facts(report.hosts)
    nodes = []
    for host in sorted(report.hosts, key=lambda h: severity(overall(statuses[h.name].values()))):
        facts, shared = per_host[host.name]
        nodes.append(
            NodeView(
                name=text(host.name),
                anchor=anchors(host.name),
                hostname=text(host.hostname or ""),
                address=text(host.address),
                status=overall(statuses[host.name].values()),
                reachable=host.reachable,
                error=text(f"{host.error.kind}: {host.error.message}") if host.error else "",
                chips=chips(host),
                facts=facts,
                shared=shared,
            )
        )
    counts = Counter(r.status for r in report.results)
    css, js = _asset("report.css"), _asset("report.js")
    csp = (
        f"default-src 'none'; style-src {_sha256(css)}; script-src {_sha256(js)}; "
        "img-src 'none'; base-uri 'none'; form-action 'none'"
    )
    return Page(
        title=f"{label}: {sentence}" if len(sentence) < 120 else f"{label}: {sentence[:117]}…",
        verdict="interrupted" if report.interrupted else report.verdict,
        verdict_label=label,
        sentence=sentence,
        exit_code=int(report.exit_code),
        exit_meaning=EXIT_MEANING.get(report.exit_code, ""),
        duration=duration(report.duration_s),
        started_at=when(report.started_at),
        started_iso=text(report.started_at),
        tool_version=text(report.tool_version),
        schema_version=report.schema_version,
        reachable=sum(1 for h in report.hosts if h.reachable),
        total=len(report.hosts),
        counts=[(s, counts[s]) for s in ("fail", "error", "warn", "pass", "skip") if counts[s]],
        checks=build_sections(report, findings),
        problems=problems,
        passes=passes,
        handback=handback_view(report),
        grid_checks=check_heads(report),
        grid=grid,
        grid_hidden=hidden,
        history=history_view(report),
        timeline=timeline_view(report),
        nodes=nodes,
        common=common,
        data_json=script_json(_summary_data(report, said)),
        css=Markup(css),
        js=Markup(js),
        csp=csp,
    )


def render(report: RunReport) -> str:
    """The whole report as one HTML document."""
    return _environment().get_template("report.html.j2").render(page=build_page(report))
