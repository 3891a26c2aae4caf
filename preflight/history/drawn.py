"""Which of a run's trends its report draws as sparklines, and why: the report's ``history`` key
carries the latest values of these trends only, and the HTML report's History section draws them.

A run with :data:`DRAW_ALL` trends or fewer draws them all. A larger one draws those that matter,
at most :data:`MOST_DRAWN`: the rates a ``history`` finding names slower than their own past, the
repeat offenders' (an offending node's rates, an offending GPU's: its bus bandwidth, its compute
rate), and the :data:`SLOWEST` of each metric furthest below their own mean in this run. Trends
are drawn nodes' first, then pairs', then GPUs' (:func:`preflight.registry.kept_measures`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from preflight.history.annotate import CHECK, SLOWER
from preflight.registry import kept_measures

DRAW_ALL = 24
SLOWEST = 5  # per metric, the trends furthest below their own mean
MOST_DRAWN = 40
WHY_SLOWER = "slower than its own past"
WHY_OFFENDER = "repeat offender"
WHY_SLOWEST = "furthest below its mean"
_PRIORITY = {WHY_SLOWER: 0, WHY_OFFENDER: 1, WHY_SLOWEST: 2, "": 3}

Key = tuple[str, str, str]  # metric, node, part


class Drawable(Protocol):
    """A trend as the key and the HTML report hold it."""

    @property
    def metric(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def part(self) -> str: ...
    @property
    def runs(self) -> int: ...
    @property
    def mean(self) -> float: ...
    @property
    def now(self) -> float | None: ...


T = TypeVar("T", bound=Drawable)


def key_of(trend: Drawable) -> Key:
    return (trend.metric, trend.node, trend.part)


def ratio_of(trend: Drawable) -> float | None:
    """This run's value over the trend's mean; None where this run did not measure it."""
    return trend.now / trend.mean if trend.now is not None and trend.mean > 0 else None


def _ratio_or_last(trend: Drawable) -> float:
    """The trend's ratio, for sorting; one not measured in this run sorts after the others."""
    ratio = ratio_of(trend)
    return ratio if ratio is not None else float("inf")


def slower_keys(results: Iterable[Any]) -> set[Key]:
    """The rates the run's ``history`` findings name slower than their own past."""
    found = set()
    for result in results:
        details: Mapping[str, Any] = result.details
        if result.check == CHECK and details.get("item") == SLOWER:
            found.add((str(details.get("metric")), str(details.get("node")), str(details.get("part") or "")))
    return found


def reasons(trends: Sequence[Drawable], slower: set[Key], offending: set[tuple[str, str]]) -> dict[Key, str]:
    """Why a trend matters, for those that do: named slower, an offender's (``offending``: the
    offenders' ``(by, name)``), or among the few furthest below their own mean (per metric)."""
    why = dict.fromkeys(slower, WHY_SLOWER)
    measures = kept_measures()
    for t in trends:
        entity = measures[t.metric].entity if t.metric in measures else None
        if key_of(t) not in why and (
            (entity == "node" and ("node", t.node) in offending)
            or (entity == "gpu" and ("part", t.part) in offending)
        ):
            why[key_of(t)] = WHY_OFFENDER
    for metric in measures:
        below = sorted(
            (t for t in trends if t.metric == metric and _ratio_or_last(t) < 1 and t.runs > 1),
            key=lambda t: (_ratio_or_last(t), key_of(t)),
        )
        for t in below[:SLOWEST]:
            why.setdefault(key_of(t), WHY_SLOWEST)
    return why


def drawn(trends: Sequence[T], why: Mapping[Key, str]) -> list[T]:
    """The trends drawn, in the order drawn: all of a few, else those in ``why`` by their reason,
    metric and ratio, at most :data:`MOST_DRAWN`."""
    every = len(trends) <= DRAW_ALL
    chosen = [t for t in trends if every or key_of(t) in why]
    order = {metric: at for at, metric in enumerate(kept_measures())}
    chosen.sort(
        key=lambda t: (
            _PRIORITY[why.get(key_of(t), "")],
            order.get(t.metric, len(order)),
            _ratio_or_last(t),
            key_of(t),
        )
    )
    return chosen[:MOST_DRAWN]
