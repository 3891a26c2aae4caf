"""What a check shows a person, in no particular format: tables, notes, and charts as figures.

Each check presents its own findings with these (its :class:`Presentation`); the HTML report
draws them (figures become inline SVG in ``reports.charts``) and knows no check by name.
Text here is plain: every renderer escapes it for its own format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from preflight.escape import printable
from preflight.nodeset import natural_key
from preflight.units import significant

if TYPE_CHECKING:
    from preflight.model import CheckResult, RunReport

Scale = Literal["log2", "linear"]

# Rows a table shows before "N more in the JSON report".
MAX_TABLE_ROWS = 200


def plain(value: object) -> str:
    """Node-provided text on one line, with no escape sequences or control characters."""
    return printable(str(value), keep_newlines=False)


def scalar(value: object) -> str:
    """A table cell's text for one JSON value: a dash for none, yes/no, numbers to a few digits."""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return significant(value)
    return plain(value)


def number(value: object) -> float | None:
    """``value`` as a float when it is a number (not a bool), else None: a report read from disk
    may hold anything where a judge wrote a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


# --------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class Series:
    """One line. ``css`` picks its colour class (``c0``..``c7``, ``bad``, ``muted``)."""

    label: str
    points: Sequence[tuple[float, float]]
    css: str = "c0"
    note: str = ""  # added to every point's tooltip
    strong: bool = False


@dataclass(frozen=True)
class Band:
    """A shaded range (for example the min-max of many healthy pairs) behind the lines."""

    label: str
    lower: Sequence[tuple[float, float]]
    upper: Sequence[tuple[float, float]]


@dataclass(frozen=True)
class Axis:
    label: str
    scale: Scale = "linear"
    format: Callable[[float], str] = significant
    zero: bool = True  # a linear axis starts at zero


@dataclass(frozen=True)
class Cell:
    """One heatmap cell: its colour class, a short text drawn in it and a tooltip."""

    css: str
    text: str = ""
    title: str = ""


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    css: str = "c0"
    title: str = ""
    text: str = ""  # the value as shown at the bar's end (default: formatted value)


@dataclass(frozen=True)
class Meter:
    """One GPU: ``used`` and ``total`` in any unit; ``scale`` is the largest total drawn."""

    used: float
    total: float
    css: str = ""
    text: str = ""
    title: str = ""


@dataclass(frozen=True)
class LineChart:
    """Lines with point markers over ``x`` (log2 or linear) and a linear ``y``."""

    series: Sequence[Series]
    x: Axis
    y: Axis
    label: str
    band: Band | None = None
    reference: tuple[float, str] | None = None


@dataclass(frozen=True)
class Heatmap:
    """A grid of coloured cells, ``rows`` down the left, ``cols`` across the top."""

    rows: Sequence[str]
    cols: Sequence[str]
    cells: Mapping[tuple[int, int], Cell]
    label: str
    row_axis: str
    col_axis: str
    cell_px: float = 30


@dataclass(frozen=True)
class BarChart:
    """Horizontal bars on one axis, with labelled marker lines."""

    bars: Sequence[Bar]
    label: str
    axis: Axis
    markers: Sequence[tuple[float, str]] = ()


@dataclass(frozen=True)
class MeterGrid:
    """One meter per (row, column): GPUs of each node, used against total."""

    rows: Sequence[str]
    cols: Sequence[str]
    meters: Mapping[tuple[int, int], Meter]
    label: str


Figure = LineChart | Heatmap | BarChart | MeterGrid

# --------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class TCell:
    """A table cell: its text, a CSS class (``mono``, ``num``, ``odd odd-fail``...) and a tooltip."""

    text: str
    css: str = ""
    title: str = ""


@dataclass(frozen=True)
class Table:
    head: Sequence[str]
    rows: Sequence[Sequence[TCell]]
    title: str = ""
    note: str = ""
    css: str = ""
    kind: str = "table"


@dataclass(frozen=True)
class Legend:
    label: str
    css: str


@dataclass(frozen=True)
class Chart:
    title: str
    figure: Figure
    caption: str = ""
    legend: Sequence[Legend] = ()
    data: Table | None = None
    kind: str = "chart"


@dataclass(frozen=True)
class Note:
    text: str
    css: str = ""
    kind: str = "note"


Block = Chart | Table | Note

# --------------------------------------------------------------------------- a check's presentation


def node_rows(report: RunReport, check: str) -> tuple[list[tuple[str, Mapping[str, Any]]], set[str]]:
    """A check's per-node rows, as its findings carry them in ``details["nodes"]`` (the first
    finding that has them), in natural host order; and the hosts its findings other than a pass
    name."""
    nodes: Mapping[str, Any] = {}
    for result in report.results_for(check):
        if isinstance(result.details.get("nodes"), Mapping):
            nodes = result.details["nodes"]
            break
    named = {h for r in report.results_for(check) if r.status != "pass" for h in r.hosts}
    rows = [(host, row if isinstance(row, Mapping) else {}) for host, row in nodes.items()]
    return sorted(rows, key=lambda item: natural_key(item[0])), named


def advice_by_item(table: Mapping[str, str]) -> Callable[[CheckResult], str]:
    """Advice keyed by a finding's ``details.item`` (or ``details.cause``), ``"*"`` for any
    other item; none for a pass or a skip."""

    def advice(result: CheckResult) -> str:
        if result.status in ("pass", "skip"):
            return ""
        item = str(result.details.get("item") or result.details.get("cause") or "")
        return table.get(item) or table.get("*", "")

    return advice


def _no_blocks(_: object) -> Sequence[Block]:
    return ()


def _no_advice(_: CheckResult) -> str:
    return ""


@dataclass(frozen=True)
class Presentation:
    """How a check presents itself in a report: its heading and one line about it, the evidence
    of its section (charts, tables) drawn from the whole run, extra blocks under one finding,
    and what to do about a finding."""

    heading: str
    about: str
    evidence: Callable[[RunReport], Sequence[Block]] = field(default=_no_blocks)
    finding: Callable[[CheckResult], Sequence[Block]] = field(default=_no_blocks)
    advice: Callable[[CheckResult], str] = field(default=_no_advice)
