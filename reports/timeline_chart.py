"""The report's timeline as SVG: a lane per node (and the controller's) with its phases as bars over
one axis of seconds (:mod:`reports.html.timeline` chooses what goes in it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from reports.svg import MONO_CHAR_PX, el, empty_chart, nice_ticks, svg, title

# The phases' colours (the stylesheet's c0 to c11), given in the order the phases began.
TIMELINE_COLOURS = 12


@dataclass(frozen=True)
class Lane:
    """One lane of a timeline: its name and its bars, each ``(phase, start, end)`` in seconds."""

    name: str
    bars: Sequence[tuple[str, float, float]]


def timeline_chart(lanes: Sequence[Lane], *, label: str, width: float = 960) -> Markup:
    """A lane per node (and the controller's) with its phases as bars over a shared axis of
    seconds; a phase keeps its colour in every lane, and the gaps between bars (the lane's own
    colour) are time the lane waited. Lanes are thinner past 16, so that 64 stay on one screen."""
    phases = list(dict.fromkeys(phase for lane in lanes for phase, _, _ in lane.bars))
    if not phases:
        return empty_chart(label, width=width)
    lane_px = 22.0 if len(lanes) <= 16 else 12.0
    font = "" if len(lanes) <= 16 else " small"
    gutter = min(180.0, max(len(lane.name) for lane in lanes) * MONO_CHAR_PX + 16)
    left = gutter + 8
    legend_rows = -(-len(phases) // 6)
    top = 12 + legend_rows * 18 + 8
    plot_w = width - left - 16
    high = max(end for lane in lanes for _, _, end in lane.bars)
    ticks = nice_ticks(0.0, high)
    scale = plot_w / (ticks[-1] or 1.0)
    bottom = top + len(lanes) * lane_px
    body: list[str] = []
    for i, phase in enumerate(phases):  # the legend: every phase's colour, in the order they began
        x, y = 8 + (i % 6) * (width - 16) / 6, 12 + (i // 6) * 18
        body.append(
            el("rect", x=x, y=y, width=12, height=10, rx=2, class_=f"bar c{i % TIMELINE_COLOURS}")
            + el("text", escape(phase), class_="legend", x=x + 17, y=y + 9)
        )
    for t in ticks:
        tx = left + t * scale
        body.append(el("line", class_="grid", x1=tx, x2=tx, y1=top - 4, y2=bottom))
        label_text = f"{t:g} s"
        body.append(el("text", escape(label_text), class_="tick", x=tx, y=bottom + 15, text_anchor="middle"))
    for row, lane in enumerate(lanes):
        y0 = top + row * lane_px
        parts = [
            el(
                "text",
                escape(lane.name),
                class_=f"node-label{font}",
                x=left - 8,
                y=y0 + lane_px / 2 + 4,
                text_anchor="end",
            ),
            el("rect", class_="lane", x=left, y=y0 + 2, width=plot_w, height=lane_px - 4),
        ]
        for phase, start, end in lane.bars:
            seconds = max(0.0, end - start)
            tip = f"{lane.name}: {phase} {seconds:.2f} s ({start:.2f}-{end:.2f} s)"
            parts.append(
                el(
                    "rect",
                    title(tip),
                    x=left + start * scale,
                    y=y0 + 3,
                    width=max(seconds * scale, 1.0),
                    height=lane_px - 6,
                    rx=1.5,
                    class_=f"bar c{phases.index(phase) % TIMELINE_COLOURS}",
                )
            )
        body.append("<g>" + "".join(parts) + "</g>")
    body.append(
        el(
            "text",
            "seconds since the run began",
            class_="axis-label",
            x=left + plot_w / 2,
            y=bottom + 32,
            text_anchor="middle",
        )
    )
    return svg(width, bottom + 40, label, body, "timeline")
