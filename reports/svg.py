"""The SVG the report's charts are made of: elements with escaped attributes and text, the chart's
frame with its accessible name, round ticks, and the chart drawn when there is nothing to draw
(:mod:`reports.charts`, :mod:`reports.timeline_chart`)."""

from __future__ import annotations

import math

from markupsafe import Markup, escape

# Approximate advance of one character at the chart font sizes, for label gutters.
CHAR_PX = 7.0
MONO_CHAR_PX = 7.3


def n(value: float) -> str:
    """A coordinate with at most one decimal: small files, stable output."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def attrs(**attrs: str | float | None) -> str:
    parts = []
    for key, value in attrs.items():
        if value is None:
            continue
        name = key.rstrip("_").replace("_", "-")
        shown = n(value) if isinstance(value, float | int) and not isinstance(value, bool) else value
        parts.append(f' {name}="{escape(shown)}"')
    return "".join(parts)


def el(tag: str, body: str = "", /, **named: str | float | None) -> str:
    return f"<{tag}{attrs(**named)}>{body}</{tag}>" if body else f"<{tag}{attrs(**named)}/>"


def title(text: str | None) -> str:
    return f"<title>{escape(text)}</title>" if text else ""


def svg(width: float, height: float, label: str, body: list[str], css: str) -> Markup:
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {escape(css)}" role="img"'
        f' viewBox="0 0 {n(width)} {n(height)}" width="{n(width)}" height="{n(height)}"'
        f' preserveAspectRatio="xMinYMin meet"><title>{escape(label)}</title>{"".join(body)}</svg>'
    )


def nice_ticks(low: float, high: float, *, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering ``low``..``high``."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0, 1.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value < high + step * 0.999:
        ticks.append(round(value, 10))
        value += step
    return ticks


def log2_ticks(low: float, high: float, *, most: int = 9) -> list[float]:
    """Powers of two from ``low`` to ``high``, thinned to at most ``most`` ticks."""
    first = math.floor(math.log2(max(low, 1e-12)))
    last = math.ceil(math.log2(max(high, low, 1e-12)))
    exponents = list(range(first, last + 1))
    stride = max(1, math.ceil(len(exponents) / most))
    return [2.0**e for e in exponents[::stride]]


def empty_chart(label: str, *, width: float = 720, height: float = 60) -> Markup:
    body = [el("text", escape(label), class_="empty", x=width / 2, y=height / 2 + 4, text_anchor="middle")]
    return svg(width, height, label, body, "empty-chart")
