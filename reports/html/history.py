"""The History section: what the history store says about the run's nodes (the report's
``history`` key): repeat offenders, flaky findings, and each node's, pair's and GPU's rate over
the window as a sparkline with this run's point marked.

At 1,000 nodes of 8 GPUs the section stays short: it draws the trends that matter, as
:mod:`preflight.history.drawn` chooses them (the key carries their values only), and folds every
node into one row of a table inside a ``<details>`` element: its bus bandwidth now and its mean, its
GPU and its pair furthest below their own means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from preflight.facts_values import records
from preflight.history.drawn import DRAW_ALL, drawn, reasons, slower_keys
from preflight.measures import Entity, Measure
from preflight.model import RunReport
from preflight.registry import kept_measures
from preflight.units import significant
from reports import charts
from reports.html.text import Anchors, text, when
from reports.summary import kept_as


@dataclass(frozen=True)
class OffenderRow:
    by: str
    name: str
    others: str
    failures: int
    last: str


@dataclass(frozen=True)
class FlakyRow:
    key: str
    node: str
    failed: int
    checked: int


@dataclass(frozen=True)
class TrendRow:
    metric: str  # "node busbw", "pair busbw", "GPU"
    what: str  # "node3", "node1 ↔ node3", "node3 GPU 1 (S3-1)"
    anchor: str  # the node's anchor, "" for none
    now: str
    mean: str
    low: str
    high: str
    runs: int
    ratio: str  # this run over the mean
    why: str
    chart: Markup


@dataclass(frozen=True)
class NodeRow:
    name: str
    anchor: str
    busbw: str  # "372 (mean 380)"
    gpu: str  # "GPU 3 0.97x"
    pair: str  # "node0002 0.95x"


@dataclass(frozen=True)
class KeptAsRow:
    name: str  # the name that reached the node
    node: str  # its identity in the store
    source: str  # what the identity was read from: "hostname", "machine-id"...


@dataclass(frozen=True)
class HistoryView:
    store: str
    window_days: int
    since: str
    kept_as: Sequence[KeptAsRow]  # the nodes kept under another identity than their name
    offenders: Sequence[OffenderRow]
    flaky: Sequence[FlakyRow]
    drawn: Sequence[TrendRow]
    trends: int  # all of the run's trends
    nodes: Sequence[NodeRow]  # every node, when not every trend is drawn


@dataclass(frozen=True)
class _Trend:
    metric: str
    node: str
    part: str
    runs: int
    mean: float
    low: float
    high: float
    now: float | None
    values: Sequence[float]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.metric, self.node, self.part)

    @property
    def ratio(self) -> float | None:
        return self.now / self.mean if self.now is not None and self.mean > 0 else None


def ratio(value: float) -> str:
    """This run over the mean: ``0.78x``, ``1.00x``."""
    return f"{value:.2f}x"


def _number(value: Any, default: float = 0.0) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _trends(history: Mapping[str, Any], measures: Mapping[str, Measure]) -> list[_Trend]:
    found = []
    for t in records(history.get("trends")):
        metric = str(t.get("metric", ""))
        if metric not in measures:  # a rate this version does not keep
            continue
        now = t.get("now")
        found.append(
            _Trend(
                metric=metric,
                node=str(t.get("node", "")),
                part=str(t.get("part", "")),
                runs=int(_number(t.get("runs"))),
                mean=_number(t.get("mean")),
                low=_number(t.get("low")),
                high=_number(t.get("high")),
                now=_number(now) if isinstance(now, int | float) else None,
                values=[_number(v) for v in t.get("values") or [] if isinstance(v, int | float)],
            )
        )
    return found


def _gpu_slots(report: RunReport) -> dict[tuple[str, str], str]:
    """(node, GPU identity as the store keeps it: serial, UUID or node:PCI) -> the GPU's index."""
    slots: dict[tuple[str, str], str] = {}
    for host in report.hosts:
        for gpu in host.node.gpus or []:
            if gpu.index is None:
                continue
            pci = gpu.raw.get("pci_bus_id")
            for identity in (gpu.serial, gpu.uuid, f"{host.name}:{pci}" if pci else None):
                if identity:
                    slots[(host.name, identity)] = str(gpu.index)
    return slots


def _what(t: _Trend, entity: Entity, slots: Mapping[tuple[str, str], str]) -> str:
    if entity == "pair":
        return f"{t.node} ↔ {t.part}"
    if entity == "gpu":
        slot = slots.get((t.node, t.part))
        return f"{t.node} GPU {slot} ({t.part})" if slot is not None else f"{t.node} GPU {t.part}"
    if entity == "rail":  # kept under its GPU's identity, or its interface's (a MAC, or a name)
        slot = slots.get((t.node, t.part))
        return f"{t.node} rail of GPU {slot} ({t.part})" if slot is not None else f"{t.node} rail {t.part}"
    return t.node


def _row(
    t: _Trend, measure: Measure, why: str, slots: Mapping[tuple[str, str], str], anchors: Anchors
) -> TrendRow:
    unit = measure.unit
    what = text(_what(t, measure.entity, slots))
    now = f"{significant(t.now)} {unit}" if t.now is not None else "not measured"
    label = (
        f"{what}: {significant(t.low)} to {significant(t.high)} {unit} over {t.runs} runs, "
        f"mean {significant(t.mean)}; this run {now}"
    )
    return TrendRow(
        metric=measure.label,
        what=what,
        anchor=anchors(t.node),
        now=now,
        mean=significant(t.mean),
        low=significant(t.low),
        high=significant(t.high),
        runs=t.runs,
        ratio=ratio(t.ratio) if t.ratio is not None else "",
        why=why,
        chart=charts.sparkline(t.values, label=label, mark_last=t.now is not None, reference=t.mean),
    )


def _ratio_or_last(t: _Trend) -> float:
    """The trend's ratio, for sorting; one not measured in this run sorts after the others."""
    return t.ratio if t.ratio is not None else float("inf")


def _lowest(trends: Iterable[_Trend]) -> _Trend | None:
    measured = [t for t in trends if t.ratio is not None]
    return min(measured, key=lambda t: (_ratio_or_last(t), t.key)) if measured else None


def _node_rows(
    trends: Sequence[_Trend],
    measures: Mapping[str, Measure],
    slots: Mapping[tuple[str, str], str],
    anchors: Anchors,
) -> list[NodeRow]:
    def entity(t: _Trend) -> Entity:
        return measures[t.metric].entity

    by_node: dict[str, list[_Trend]] = {}
    for t in trends:
        by_node.setdefault(t.node, []).append(t)
        if entity(t) == "pair":
            by_node.setdefault(t.part, []).append(t)
    rows = []
    for node in sorted(by_node):
        its = by_node[node]
        busbw = next((t for t in its if entity(t) == "node"), None)
        shown = ""
        if busbw is not None:
            now = significant(busbw.now) if busbw.now is not None else "not measured"
            shown = f"{now} (mean {significant(busbw.mean)})"
        gpu = _lowest(t for t in its if entity(t) == "gpu")
        pair = _lowest(t for t in its if entity(t) == "pair")
        gpu_text = ""
        if gpu is not None and gpu.ratio is not None:
            gpu_text = f"GPU {slots.get((gpu.node, gpu.part), gpu.part)} {ratio(gpu.ratio)}"
        pair_text = ""
        if pair is not None and pair.ratio is not None:
            pair_text = f"{pair.part if pair.node == node else pair.node} {ratio(pair.ratio)}"
        rows.append(NodeRow(text(node), anchors(node), shown, text(gpu_text), text(pair_text)))
    return rows


def history_view(report: RunReport) -> HistoryView | None:
    """The section, for a run that used the history store; None for one that did not."""
    history = report.history
    if history is None:
        return None
    anchors = Anchors(report.hosts)
    slots = _gpu_slots(report)
    measures = kept_measures()
    trends = _trends(history, measures)
    offending = {(str(o.get("by")), str(o.get("name"))) for o in records(history.get("offenders"))}
    why = reasons(trends, slower_keys(report.results), offending)
    every = len(trends) <= DRAW_ALL
    offenders = []
    for o in records(history.get("offenders")):
        failures = records(o.get("failures"))
        last = failures[-1] if failures else {}
        offenders.append(
            OffenderRow(
                by=text(o.get("by", "")),
                name=text(o.get("name", "")),
                others=text(", ".join(str(x) for x in o.get("others") or [])),
                failures=len(failures),
                last=text(
                    f"{when(str(last.get('started_at', '')))} {last.get('check', '')}/{last.get('cause', '')}"
                )
                if last
                else "",
            )
        )
    return HistoryView(
        store=text(history.get("store", "")),
        window_days=int(_number(history.get("window_days"))),
        since=when(str(history.get("since", ""))),
        kept_as=[KeptAsRow(text(name), text(node), text(source)) for name, node, source in kept_as(report)],
        offenders=offenders,
        flaky=[
            FlakyRow(
                text(f.get("key", "")),
                text(f.get("node", "")),
                int(_number(f.get("failed"))),
                int(_number(f.get("checked"))),
            )
            for f in records(history.get("flaky"))
        ],
        drawn=[_row(t, measures[t.metric], why.get(t.key, ""), slots, anchors) for t in drawn(trends, why)],
        trends=len(trends),
        nodes=[] if every else _node_rows(trends, measures, slots, anchors),
    )
