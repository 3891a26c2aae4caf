"""The HTML report: one self-contained page (inline CSS, SVG and a little script, no network)
that says the verdict, shows which node or link is to blame and what to do, and keeps every
node's facts one click away.

``render(report)`` turns a ``RunReport`` into a view (plain dataclasses built here, charts
drawn by :mod:`reports.charts`) and renders it with Jinja2, autoescaping every string. The
page's Content-Security-Policy allows nothing but its own stylesheet and script, by hash.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from preflight.errors import ExitCode
from preflight.escape import printable
from preflight.model import CheckResult, HostReport, RunReport
from preflight.nodeset import fold
from preflight.registry import all_checks, presentation_of
from preflight.status import LABELS as STATUS_LABELS
from preflight.status import overall, severity, worst
from preflight.units import duration, gib, significant
from preflight.view import Block, Table, TCell
from reports import charts
from reports.summary import headline, ordered

# --------------------------------------------------------------------------- vocabulary

LABELS = {**STATUS_LABELS, "unchecked": "not checked"}
ICONS = {"pass": "✓", "warn": "!", "fail": "✕", "error": "?", "skip": "\u2013", "unchecked": "·"}
EXIT_MEANING = {
    ExitCode.OK: "every check passed",
    ExitCode.CHECK_FAILED: "a check failed",
    ExitCode.USAGE_ERROR: "usage or input error",
    ExitCode.HOSTS_UNCHECKED: "hosts could not be checked",
    ExitCode.INTERRUPTED: "interrupted",
}

_MAX_RAW_CHARS = 16_000  # raw JSON shown per finding; the JSON report has all of it
_MAX_TABLE_ROWS = 200
_MATRIX_MAX_NODES = 64


# --------------------------------------------------------------------------- view model


@dataclass(frozen=True)
class KV:
    """One key of a generic details view: a short text, a table, or (pretty) JSON."""

    key: str
    text: str = ""
    table: Table | None = None
    code: str = ""


@dataclass(frozen=True)
class Culprit:
    name: str
    anchor: str


@dataclass(frozen=True)
class Finding:
    anchor: str
    check: str
    check_title: str
    status: str
    summary: str
    hosts: str  # folded
    host_count: int
    culprits: Sequence[Culprit]
    advice: str
    blocks: Sequence[Block]
    raw: Sequence[KV]


@dataclass(frozen=True)
class Section:
    check: str
    anchor: str
    title: str
    about: str
    status: str
    headline: str
    findings: Sequence[Finding]
    blocks: Sequence[Block]


@dataclass(frozen=True)
class GridRow:
    label: str
    anchor: str  # a node's anchor when the row is one node
    count: int
    note: str
    cells: Sequence[TCell]
    status: str


@dataclass(frozen=True)
class FactView:
    key: str
    text: str
    note: str = ""


@dataclass(frozen=True)
class NodeView:
    name: str
    anchor: str
    hostname: str
    address: str
    status: str
    reachable: bool
    error: str
    chips: Sequence[str]
    facts: Sequence[FactView]
    shared: int  # facts identical to the common ones, not repeated


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
    grid_checks: Sequence[tuple[str, str]]  # (title, anchor)
    grid: Sequence[GridRow]
    grid_hidden: int
    nodes: Sequence[NodeView]
    common: Sequence[FactView]
    data_json: Markup
    css: Markup
    js: Markup
    csp: str


# --------------------------------------------------------------------------- small helpers


def _text(value: Any) -> str:
    """Node-provided text made printable (no escapes, no control characters)."""
    return printable(str(value), keep_newlines=False)


def _natural_key(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _when(started_at: str) -> str:
    """``2026-11-22 10:00:00 UTC``; another offset is kept as written."""
    try:
        moment = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    except ValueError:
        return _text(started_at)
    shown = moment.strftime("%Y-%m-%d %H:%M:%S")
    offset = moment.utcoffset()
    if offset is None:
        return shown
    return f"{shown} UTC" if offset == timedelta(0) else f"{shown} {moment.strftime('%z')}"


def _json(value: Any, *, limit: int = _MAX_RAW_CHARS) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    text = printable(text)
    if len(text) > limit:
        return text[:limit] + f"\n… {len(text) - limit:,} more characters in the JSON report"
    return text


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _script_json(data: Any) -> Markup:
    """JSON safe inside a <script> element: no ``<``, ``>`` or ``&`` survives literally."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


class _Anchors:
    """Stable, safe ids for nodes: ``node-1``, ``node-2``... by inventory order."""

    def __init__(self, hosts: Sequence[HostReport]) -> None:
        self._ids = {h.name: f"node-{i}" for i, h in enumerate(hosts, start=1)}

    def __call__(self, name: str) -> str:
        return self._ids.get(name, "")


# --------------------------------------------------------------------------- generic details


def generic_details(details: Mapping[str, Any]) -> list[KV]:
    """Any details as readable keys: scalars as text, short lists joined, lists of records as
    tables, everything else as pretty JSON."""
    out: list[KV] = []
    for key, value in details.items():
        out.append(_kv(_text(key), value))
    return out


def _kv(key: str, value: Any) -> KV:
    if _is_scalar(value):
        return KV(key, text=_scalar(value))
    if isinstance(value, list) and len(value) <= 40 and all(_is_scalar(v) for v in value):
        return KV(key, text=", ".join(_scalar(v) for v in value) or "(none)")
    if (
        isinstance(value, Mapping)
        and 0 < len(value) <= _MAX_TABLE_ROWS
        and all(map(_is_scalar, value.values()))
    ):
        rows = [[TCell(_text(k), "mono"), TCell(_scalar(v))] for k, v in value.items()]
        return KV(key, table=Table(head=("", ""), rows=rows, css="kv"))
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        columns = list(dict.fromkeys(k for v in value for k in v))
        if len(columns) <= 8 and all(_is_scalar(x) for v in value for x in v.values()):
            rows = [[TCell(_scalar(v.get(c))) for c in columns] for v in value[:_MAX_TABLE_ROWS]]
            extra = len(value) - _MAX_TABLE_ROWS
            more = f"{extra} more rows in the JSON report" if extra > 0 else ""
            return KV(key, table=Table(head=[_text(c) for c in columns], rows=rows, note=more))
    return KV(key, code=_json(value))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _scalar(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return significant(value)
    return _text(value)


# --------------------------------------------------------------------------- node x check grid


def _checks_of(report: RunReport) -> list[str]:
    seen = list(dict.fromkeys(r.check for r in report.results))
    order = [c.name for c in all_checks()]
    known = [c for c in order if c in seen]
    return known + [c for c in seen if c not in order]


def check_anchor(check: str, index: int) -> str:
    """``check-versions``; a check whose name is not a plain word gets ``check-N``."""
    return f"check-{check}" if re.fullmatch(r"[a-z0-9_]+", check) else f"check-{index}"


def _check_heads(report: RunReport) -> list[tuple[str, str]]:
    return [(_heading(c), check_anchor(c, i)) for i, c in enumerate(_checks_of(report))]


def node_statuses(report: RunReport) -> dict[str, dict[str, str]]:
    """host -> check -> status: the worst finding naming the host; a cluster-wide finding (no
    hosts named) for every node; pass when the check ran and did not name it."""
    checks = _checks_of(report)
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
    report: RunReport, anchors: _Anchors, *, max_rows: int = 400
) -> tuple[list[str], list[GridRow], int]:
    """Rows of the node x check grid, failures first. Nodes with the same statuses fold into
    one row (``gpu[01-30]``); a node named by any finding that did not pass is its own row."""
    checks = _checks_of(report)
    statuses = node_statuses(report)
    culprits = {h for r in report.results if r.status != "pass" for h in r.hosts}
    summaries: dict[tuple[str, str], list[str]] = {}
    for r in report.results:
        for h in r.hosts:
            summaries.setdefault((h, r.check), []).append(f"{LABELS[r.status]}: {_text(r.summary)}")
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
        note = _text(host.hostname) if host.hostname and host.hostname != name else ""
        rows.append(GridRow(_text(name), anchors(name), 1, note, cells, overall(row.values())))
    for key, names in groups.items():
        cells = [TCell(ICONS[s], f"st-{s}", f"{c}: {LABELS[s]}") for c, s in zip(checks, key, strict=True)]
        anchor = anchors(names[0]) if len(names) == 1 else ""
        note = ""
        if len(names) == 1:
            host = hosts[names[0]]
            note = _text(host.hostname) if host.hostname and host.hostname != names[0] else ""
        rows.append(GridRow(_text(fold(names)), anchor, len(names), note, cells, overall(key)))
    rows.sort(key=lambda r: (severity(r.status), r.count, _natural_key(r.label)))
    hidden = max(0, len(rows) - max_rows)
    return checks, rows[:max_rows], hidden


# --------------------------------------------------------------------------- node facts


def _majority_json(values: Sequence[str]) -> str | None:
    if len(values) < 2:
        return None
    value, count = Counter(values).most_common(1)[0]
    return value if count >= 2 and count * 2 > len(values) else None


def node_facts(hosts: Sequence[HostReport]) -> tuple[list[FactView], dict[str, tuple[list[FactView], int]]]:
    """Facts shared by most nodes once (``common``), and per node only what differs from them:
    at 1,000 nodes the page holds one copy of the package list, not a thousand."""
    reachable = [h for h in hosts if h.reachable]
    keys = list(dict.fromkeys(k for h in reachable for k in h.facts))
    common: dict[str, Any] = {}
    common_json: dict[str, str] = {}
    for key in keys:
        if key == "hostname":
            continue
        encoded = [json.dumps(h.facts[key], sort_keys=True) for h in reachable if key in h.facts]
        majority = _majority_json(encoded)
        if majority is not None:
            common_json[key] = majority
            common[key] = json.loads(majority)
    per_host: dict[str, tuple[list[FactView], int]] = {}
    for host in hosts:
        views: list[FactView] = []
        shared = 0
        for key, value in host.facts.items():
            if key in common_json and json.dumps(value, sort_keys=True) == common_json[key]:
                shared += 1
                continue
            base = common.get(key)
            if isinstance(base, Mapping) and isinstance(value, Mapping):
                diff = {k: v for k, v in value.items() if k not in base or base[k] != v}
                missing = [k for k in base if k not in value]
                same = len(value) - len(diff)
                note = f"{same} more as in the common facts" if same else ""
                if missing:
                    note += (
                        ("; " if note else "") + "missing here: " + ", ".join(_text(k) for k in missing[:20])
                    )
                views.append(FactView(_text(key), _json(diff), note))
            else:
                views.append(FactView(_text(key), _json(value)))
        per_host[host.name] = (views, shared)
    common_views = [FactView(_text(k), _json(v)) for k, v in common.items()]
    return common_views, per_host


def _chips(host: HostReport) -> list[str]:
    facts = host.facts
    chips: list[str] = []

    def get(*path: str) -> Any:
        node: Any = facts
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node

    if (os_name := get("os", "name")) is not None:
        chips.append(_text(os_name))
    if (python := get("python", "version")) is not None:
        chips.append(f"Python {_text(python)}")
    if (torch := get("torch", "version")) is not None:
        chips.append(f"torch {_text(torch)}")
    if (driver := get("driver", "version")) is not None:
        chips.append(f"driver {_text(driver)}")
    gpus = facts.get("gpus")
    if isinstance(gpus, list) and gpus:
        names = Counter(_text(g.get("name") or "GPU") for g in gpus if isinstance(g, Mapping))
        chips.append(", ".join(f"{n}\u00d7 {name}" for name, n in names.items()))
    elif host.reachable and (gpus == [] or "gpus" in _mapping(facts.get("unavailable"))):
        chips.append("no GPU")
    if (cpus := get("cpu", "count")) is not None:
        chips.append(f"{_text(cpus)} CPUs")
    if (memory := _float(get("memory", "total_bytes"))) is not None:
        chips.append(f"{gib(memory)} GiB RAM")
    return chips


# --------------------------------------------------------------------------- sections


def _heading(check: str) -> str:
    presentation = presentation_of(check)
    return presentation.heading if presentation else _text(check)


def _finding(result: CheckResult, index: int, anchors: _Anchors) -> Finding:
    culprits = [Culprit(_text(h), anchors(h)) for h in result.hosts[:12]]
    presentation = presentation_of(result.check)
    return Finding(
        anchor=f"finding-{index}",
        check=result.check,
        check_title=_heading(result.check),
        status=result.status,
        summary=_text(result.summary),
        hosts=_text(fold(result.hosts)),
        host_count=len(result.hosts),
        culprits=culprits,
        advice=presentation.advice(result) if presentation else "",
        blocks=list(presentation.finding(result)) if presentation else [],
        raw=generic_details(result.details),
    )


def build_sections(report: RunReport, findings: Mapping[int, Finding]) -> list[Section]:
    sections: list[Section] = []
    for position, check in enumerate(_checks_of(report)):
        presentation = presentation_of(check)
        indexed = [(i, r) for i, r in enumerate(report.results) if r.check == check]
        status = overall(r.status for _, r in indexed)
        ordered_findings = [findings[i] for i, _ in sorted(indexed, key=lambda ir: severity(ir[1].status))]
        blocks = list(presentation.evidence(report)) if presentation else []
        first = ordered_findings[0].summary if ordered_findings else ""
        sections.append(
            Section(
                check=check,
                anchor=check_anchor(check, position),
                title=presentation.heading if presentation else _text(check),
                about=presentation.about if presentation else "",
                status=status,
                headline=first,
                findings=ordered_findings,
                blocks=blocks,
            )
        )
    # Problems first, then what passed; a skipped check says least.
    sections.sort(key=lambda s: (s.status == "skip", severity(s.status)))
    return sections


# --------------------------------------------------------------------------- page


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
    anchors = _Anchors(report.hosts)
    said = _text(headline(report))
    label, _, sentence = said.partition(" — ")
    if not sentence:
        label, sentence = report.verdict.upper(), said
    findings = {i: _finding(r, i, anchors) for i, r in enumerate(report.results)}
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
                name=_text(host.name),
                anchor=anchors(host.name),
                hostname=_text(host.hostname or ""),
                address=_text(host.address),
                status=overall(statuses[host.name].values()),
                reachable=host.reachable,
                error=_text(f"{host.error.kind}: {host.error.message}") if host.error else "",
                chips=_chips(host),
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
        started_at=_when(report.started_at),
        started_iso=_text(report.started_at),
        tool_version=_text(report.tool_version),
        schema_version=report.schema_version,
        reachable=sum(1 for h in report.hosts if h.reachable),
        total=len(report.hosts),
        counts=[(s, counts[s]) for s in ("fail", "error", "warn", "pass", "skip") if counts[s]],
        checks=build_sections(report, findings),
        problems=problems,
        passes=passes,
        grid_checks=_check_heads(report),
        grid=grid,
        grid_hidden=hidden,
        nodes=nodes,
        common=common,
        data_json=_script_json(_summary_data(report, said)),
        css=Markup(css),
        js=Markup(js),
        csp=csp,
    )


def render(report: RunReport) -> str:
    """The whole report as one HTML document."""
    return _environment().get_template("report.html.j2").render(page=build_page(report))
