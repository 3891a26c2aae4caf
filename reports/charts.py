"""Server-side SVG charts for the HTML report: lines over a log2 or linear axis, heatmaps,
horizontal bars, per-GPU memory meters and sparklines. Every chart is plain inline SVG, styled only by
CSS classes of the report's one stylesheet, with native ``<title>`` tooltips.

Why small helpers of our own rather than a charting library. The report is one file under a
strict Content-Security-Policy (``default-src 'none'``, the one inline stylesheet allowed by
its hash); it must theme itself for light, dark and print; and at 1,000 nodes it must stay
small. The libraries that draw SVG on the server fit none of this:

- matplotlib writes ``style="fill:...;stroke:..."`` on every element (blocked by that CSP
  unless ``'unsafe-inline'``), bakes its colours in at render time (no dark mode), turns text
  into paths by default (not searchable) and brings numpy and ~50 MB with it.
- pygal, the maintained pure-Python SVG library, links its tooltip script from
  kozea.github.io unless told ``js=[]``, puts a ``<style>`` block keyed by a random UUID in
  every chart (a new CSP hash per render, output that differs run to run), bakes colours in
  too, has no heatmap, and spends 19 KB on a three-point line.
- plotly, bokeh and Vega/altair draw in the browser with megabytes of script.

What the report needs is four shapes with a fixed look, so they are written here, about
three hundred lines, tested in tests/test_html_report.py (escaping, geometry, ticks) and
in the browser tests (drawn, non-zero size). All text passes through ``markupsafe.escape``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from preflight.view import (
    Axis,
    Band,
    Bar,
    BarChart,
    Cell,
    Figure,
    Heatmap,
    LineChart,
    Meter,
    Series,
)
from reports.svg import CHAR_PX, MONO_CHAR_PX, el, empty_chart, log2_ticks, n, nice_ticks, svg, title

# --------------------------------------------------------------------------- line chart


@dataclass
class _Frame:
    left: float
    top: float
    width: float
    height: float
    x: Callable[[float], float] = field(default=lambda v: v)
    y: Callable[[float], float] = field(default=lambda v: v)


def _scale(
    axis: Axis, low: float, high: float, start: float, length: float, *, invert: bool
) -> tuple[Callable[[float], float], list[float]]:
    if axis.scale == "log2":
        ticks = log2_ticks(low, high)
        lo, hi = math.log2(ticks[0]), math.log2(max(ticks[-1], high))
        if hi == lo:
            hi = lo + 1

        def position(v: float) -> float:
            fraction = (math.log2(max(v, 1e-12)) - lo) / (hi - lo)
            return start + (1 - fraction) * length if invert else start + fraction * length

        return position, ticks
    ticks = nice_ticks(0.0 if axis.zero else low, high)
    lo, hi = ticks[0], ticks[-1]
    if hi == lo:
        hi = lo + 1

    def linear(v: float) -> float:
        fraction = (v - lo) / (hi - lo)
        return start + (1 - fraction) * length if invert else start + fraction * length

    return linear, ticks


def line_chart(
    series: Sequence[Series],
    *,
    x: Axis,
    y: Axis,
    label: str,
    band: Band | None = None,
    reference: tuple[float, str] | None = None,
    width: float = 720,
    height: float = 300,
) -> Markup:
    """Lines with point markers over ``x`` (log2 or linear) and a linear ``y`` from zero."""
    points = [p for s in series for p in s.points]
    if band is not None:
        points += list(band.lower) + list(band.upper)
    if reference is not None and points:
        points.append((points[0][0], reference[0]))
    if not points:
        return empty_chart(label)
    xs = [p[0] for p in points if x.scale != "log2" or p[0] > 0]
    ys = [p[1] for p in points]
    y_ticks_probe = nice_ticks(0.0 if y.zero else min(ys), max(ys))
    gutter = max(len(y.format(t)) for t in y_ticks_probe) * CHAR_PX + 20
    frame = _Frame(left=gutter + 14, top=14, width=width - gutter - 14 - 34, height=height - 62)
    frame.x, x_ticks = _scale(x, min(xs), max(xs), frame.left, frame.width, invert=False)
    frame.y, y_ticks = _scale(y, min(ys), max(ys), frame.top, frame.height, invert=True)
    body: list[str] = []
    body.append(_axes(frame, x, y, x_ticks, y_ticks))
    if band is not None and band.lower and band.upper:
        outline = [*band.upper, *reversed(band.lower)]
        body.append(
            el(
                "polygon",
                title(band.label),
                class_="band",
                points=" ".join(f"{n(frame.x(a))},{n(frame.y(b))}" for a, b in outline),
            )
        )
    if reference is not None:
        ref_y = frame.y(reference[0])
        body.append(
            el("line", class_="ref", x1=frame.left, x2=frame.left + frame.width, y1=ref_y, y2=ref_y)
            + el(
                "text",
                escape(reference[1]),
                class_="ref-label",
                x=frame.left + frame.width - 4,
                y=ref_y - 5,
                text_anchor="end",
            )
        )
    ordered = sorted(series, key=lambda s: s.strong)  # strong lines drawn last, on top
    for s in ordered:
        if not s.points:
            continue
        coords = [(frame.x(a), frame.y(b)) for a, b in s.points]
        group = [
            el(
                "polyline",
                title(s.label),
                points=" ".join(f"{n(a)},{n(b)}" for a, b in coords),
                class_="line",
            )
        ]
        for (px, py), (a, b) in zip(coords, s.points, strict=True):
            tip = f"{s.label}: {y.format(b)} {y.label} at {x.format(a)}" + (f" ({s.note})" if s.note else "")
            group.append(el("circle", title(tip), cx=px, cy=py, r=3.2 if s.strong else 2.4, class_="dot"))
        css = f"series {s.css}" + (" strong" if s.strong else "")
        body.append(el("g", "".join(group), class_=css))
    return svg(width, height, label, body, "line-chart")


def _axes(frame: _Frame, x: Axis, y: Axis, x_ticks: list[float], y_ticks: list[float]) -> str:
    out: list[str] = []
    bottom = frame.top + frame.height
    for t in y_ticks:
        ty = frame.y(t)
        out.append(el("line", class_="grid", x1=frame.left, x2=frame.left + frame.width, y1=ty, y2=ty))
        out.append(
            el("text", escape(y.format(t)), class_="tick", x=frame.left - 8, y=ty + 4, text_anchor="end")
        )
    for t in x_ticks:
        tx = frame.x(t)
        out.append(el("line", class_="grid", x1=tx, x2=tx, y1=frame.top, y2=bottom))
        out.append(el("text", escape(x.format(t)), class_="tick", x=tx, y=bottom + 18, text_anchor="middle"))
    out.append(el("line", class_="axis", x1=frame.left, x2=frame.left + frame.width, y1=bottom, y2=bottom))
    out.append(el("line", class_="axis", x1=frame.left, x2=frame.left, y1=frame.top, y2=bottom))
    out.append(
        el(
            "text",
            escape(x.label),
            class_="axis-label",
            x=frame.left + frame.width / 2,
            y=bottom + 40,
            text_anchor="middle",
        )
    )
    mid = frame.top + frame.height / 2
    out.append(
        el(
            "text",
            escape(y.label),
            class_="axis-label",
            x=14,
            y=mid,
            text_anchor="middle",
            transform=f"rotate(-90 14 {n(mid)})",
        )
    )
    return "".join(out)


# --------------------------------------------------------------------------- heatmap


def heatmap(
    rows: Sequence[str],
    cols: Sequence[str],
    cells: Mapping[tuple[int, int], Cell],
    *,
    label: str,
    row_axis: str,
    col_axis: str,
    cell_px: float = 30,
) -> Markup:
    """A grid of coloured cells, ``rows`` down the left, ``cols`` across the top (slanted)."""
    if not rows or not cols:
        return empty_chart(label)
    row_gutter = max(len(r) for r in rows) * MONO_CHAR_PX + 16
    # Column labels are slanted at 45 degrees: their height is their length over sqrt(2).
    col_gutter = max(len(c) for c in cols) * MONO_CHAR_PX * 0.72 + 30
    left, top = row_gutter + 20, col_gutter + 8
    width = left + len(cols) * cell_px + 30
    height = top + len(rows) * cell_px + 8
    body: list[str] = []
    body.append(el("text", escape(col_axis + " →"), class_="axis-label", x=left, y=12))
    body.append(
        el("text", escape(row_axis + " ↓"), class_="axis-label", x=10, y=top - 8, text_anchor="start")
    )
    for j, name in enumerate(cols):
        cx = left + j * cell_px + cell_px / 2
        body.append(
            el(
                "text",
                escape(name),
                class_="node-label",
                x=cx,
                y=top - 6,
                transform=f"rotate(-45 {n(cx)} {n(top - 6)})",
            )
        )
    for i, name in enumerate(rows):
        cy = top + i * cell_px + cell_px / 2
        body.append(el("text", escape(name), class_="node-label", x=left - 8, y=cy + 4, text_anchor="end"))
    for (i, j), cell in sorted(cells.items()):
        x0, y0 = left + j * cell_px, top + i * cell_px
        rect = el(
            "rect",
            title(cell.title),
            x=x0 + 1,
            y=y0 + 1,
            width=cell_px - 2,
            height=cell_px - 2,
            rx=3,
            class_=f"cell {cell.css}",
        )
        text = (
            el(
                "text",
                escape(cell.text),
                class_="cell-text",
                x=x0 + cell_px / 2,
                y=y0 + cell_px / 2 + 4,
                text_anchor="middle",
            )
            if cell.text
            else ""
        )
        body.append(f"<g>{rect}{text}</g>")
    return svg(width, height, label, body, "heatmap")


# --------------------------------------------------------------------------- bars


def bar_chart(
    bars: Sequence[Bar],
    *,
    label: str,
    axis: Axis,
    markers: Sequence[tuple[float, str]] = (),
    width: float = 720,
    bar_px: float = 20,
) -> Markup:
    """Horizontal bars, one per row, with optional vertical markers (median, threshold)."""
    if not bars:
        return empty_chart(label)
    gutter = max(len(b.label) for b in bars) * MONO_CHAR_PX + 16
    left, top = gutter + 8, 22
    plot_w = width - left - 70
    high = max([b.value for b in bars] + [m[0] for m in markers])
    ticks = nice_ticks(0.0, high)
    scale_max = ticks[-1] or 1.0
    height = top + len(bars) * bar_px + 40
    body: list[str] = []
    for t in ticks:
        tx = left + t / scale_max * plot_w
        body.append(el("line", class_="grid", x1=tx, x2=tx, y1=top - 4, y2=top + len(bars) * bar_px))
        body.append(
            el(
                "text",
                escape(axis.format(t)),
                class_="tick",
                x=tx,
                y=top + len(bars) * bar_px + 16,
                text_anchor="middle",
            )
        )
    body.append(
        el(
            "text",
            escape(axis.label),
            class_="axis-label",
            x=left + plot_w / 2,
            y=top + len(bars) * bar_px + 34,
            text_anchor="middle",
        )
    )
    for i, bar in enumerate(bars):
        y0 = top + i * bar_px
        w = max(0.0, bar.value) / scale_max * plot_w
        body.append(
            "<g>"
            + el(
                "text",
                escape(bar.label),
                class_="node-label",
                x=left - 8,
                y=y0 + bar_px / 2 + 4,
                text_anchor="end",
            )
            + el(
                "rect",
                title(bar.title or f"{bar.label}: {axis.format(bar.value)}"),
                x=left,
                y=y0 + 3,
                width=max(w, 1.5),
                height=bar_px - 6,
                rx=2,
                class_=f"bar {bar.css}",
            )
            + el(
                "text",
                escape(bar.text or axis.format(bar.value)),
                class_="bar-value",
                x=left + w + 6,
                y=y0 + bar_px / 2 + 4,
            )
            + "</g>"
        )
    for value, text in markers:
        mx = left + value / scale_max * plot_w
        body.append(el("line", class_="ref", x1=mx, x2=mx, y1=top - 8, y2=top + len(bars) * bar_px))
        body.append(el("text", escape(text), class_="ref-label", x=mx, y=top - 11, text_anchor="middle"))
    return svg(width, height, label, body, "bar-chart")


# --------------------------------------------------------------------------- GPU memory meters


def meter_grid(
    rows: Sequence[str],
    cols: Sequence[str],
    meters: Mapping[tuple[int, int], Meter],
    *,
    label: str,
    cell_w: float = 74,
    cell_h: float = 26,
) -> Markup:
    """A row per node (or folded node set), a meter per GPU: the track is the GPU's memory
    (shorter for a smaller GPU), the fill what is in use."""
    if not rows or not cols or not meters:
        return empty_chart(label)
    scale = max(m.total for m in meters.values()) or 1.0
    gutter = max(len(r) for r in rows) * MONO_CHAR_PX + 16
    left, top = gutter + 8, 26
    width = left + len(cols) * cell_w + 10
    height = top + len(rows) * cell_h + 6
    body: list[str] = []
    for j, name in enumerate(cols):
        body.append(
            el(
                "text",
                escape(name),
                class_="tick",
                x=left + j * cell_w + (cell_w - 8) / 2,
                y=16,
                text_anchor="middle",
            )
        )
    for i, name in enumerate(rows):
        y0 = top + i * cell_h
        body.append(
            el(
                "text",
                escape(name),
                class_="node-label",
                x=left - 8,
                y=y0 + cell_h / 2 + 4,
                text_anchor="end",
            )
        )
    inner = cell_w - 8
    for (i, j), m in sorted(meters.items()):
        x0, y0 = left + j * cell_w, top + i * cell_h
        track = max(4.0, m.total / scale * inner)
        fill = 0.0 if m.total <= 0 else min(1.0, max(0.0, m.used / m.total)) * track
        parts = [
            el("rect", x=x0, y=y0 + 4, width=track, height=cell_h - 8, rx=3, class_="track"),
            el("rect", x=x0, y=y0 + 4, width=max(fill, 0.0), height=cell_h - 8, rx=3, class_="fill"),
        ]
        if m.text:
            parts.append(
                el(
                    "text",
                    escape(m.text),
                    class_="meter-text",
                    x=x0 + inner / 2,
                    y=y0 + cell_h / 2 + 4,
                    text_anchor="middle",
                )
            )
        body.append(el("g", title(m.title) + "".join(parts), class_=f"meter {m.css}".strip()))
    return svg(width, height, label, body, "meters")


# --------------------------------------------------------------------------- sparkline


def sparkline(
    values: Sequence[float],
    *,
    label: str,
    mark_last: bool,
    reference: float | None = None,
    width: float = 120,
    height: float = 26,
) -> Markup:
    """A small line of ``values`` in their order (no axes), from their lowest to their highest,
    with a dashed line at ``reference`` (a mean) and the last point marked when ``mark_last``;
    ``label`` is its tooltip and its accessible name."""
    if not values:
        return empty_chart(label, width=width, height=height)
    low, high = min(values), max(values)
    if reference is not None:
        low, high = min(low, reference), max(high, reference)
    if high <= low:  # all alike: a flat line in the middle
        low, high = low - 1, high + 1
    pad = 3.0
    step = (width - 2 * pad) / max(1, len(values) - 1)

    def y(v: float) -> float:
        return pad + (1 - (v - low) / (high - low)) * (height - 2 * pad)

    points = [(pad + i * step if len(values) > 1 else width / 2, y(v)) for i, v in enumerate(values)]
    body: list[str] = []
    if reference is not None:
        ref = y(reference)
        body.append(el("line", class_="ref", x1=pad, x2=width - pad, y1=ref, y2=ref))
    body.append(el("polyline", class_="spark", points=" ".join(f"{n(a)},{n(b)}" for a, b in points)))
    if mark_last:
        body.append(el("circle", class_="spark-now", cx=points[-1][0], cy=points[-1][1], r=2.6))
    return svg(width, height, label, body, "sparkline")


def draw(figure: Figure) -> Markup:
    """The SVG of a figure a check chose."""
    if isinstance(figure, LineChart):
        return line_chart(
            figure.series,
            x=figure.x,
            y=figure.y,
            label=figure.label,
            band=figure.band,
            reference=figure.reference,
        )
    if isinstance(figure, Heatmap):
        return heatmap(
            figure.rows,
            figure.cols,
            figure.cells,
            label=figure.label,
            row_axis=figure.row_axis,
            col_axis=figure.col_axis,
            cell_px=figure.cell_px,
        )
    if isinstance(figure, BarChart):
        return bar_chart(figure.bars, label=figure.label, axis=figure.axis, markers=figure.markers)
    return meter_grid(figure.rows, figure.cols, figure.meters, label=figure.label)
