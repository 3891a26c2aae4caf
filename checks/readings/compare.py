"""Every reading of like parts compared (pure): each part's record flattened into dotted fields,
each field read as its declaration says (:mod:`checks.readings.nature`), and the parts that stand
out from their like parts found.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from checks.hardware.pcie_errors import stands_out
from checks.readings.nature import Field, declaration, setting
from checks.readings.parts import Part, PartKind
from preflight.facts import NodeFacts
from preflight.nodeset import minority

# A spread reading is named beyond this many robust standard deviations of its like parts (1.4826
# times their median absolute deviation), and never nearer than the field's floor.
SPREAD_SIGMAS = 5.0
MAD_TO_SIGMA = 1.4826
# Above this many like parts, a part is held to the median and spread of all of them (itself
# among them, which moves neither); below, to those of the others alone, so that in a small
# cluster the odd part does not pull its own yardstick.
LEAVE_ONE_OUT_BELOW = 64


def flatten(record: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """A record's leaves as (dotted path, value): a list of plain values as a tuple, a list of
    records as one JSON text, a missing value (None) left out."""
    for key, value in record.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, path + ".")
        elif isinstance(value, list):
            if all(not isinstance(v, Mapping | list) for v in value):
                yield path, tuple(value)
            else:
                yield path, json.dumps(value, sort_keys=True)
        elif value is not None:
            yield path, value


@dataclass(frozen=True)
class Reading:
    host: str
    part: Part
    value: Any


@dataclass(frozen=True)
class Odd:
    """Parts whose reading of ``field`` stands out from their like parts': ``named`` (what each
    read) against ``usual`` (the like parts' value or range, in words); ``sides`` where no majority
    decides a setting (every value with its parts)."""

    kind: PartKind
    like_text: str
    field: Field
    named: tuple[Reading, ...]
    usual: str
    sides: tuple[tuple[str, tuple[Reading, ...]], ...] = ()


@dataclass
class Compared:
    """What the comparison found, and what it read: the fields compared per kind of part and
    those no one declared (compared as settings)."""

    odd: list[Odd]
    fields: dict[str, set[str]]
    undeclared: dict[str, set[str]]


def value_text(value: Any, unit: str = "") -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, float):
        value = f"{value:g}"
    return f"{value} {unit}".strip() if unit else str(value)


def _settings(kind: PartKind, like_text: str, field: Field, readings: Sequence[Reading]) -> Odd | None:
    values = {str(i): value_text(r.value) for i, r in enumerate(readings)}
    majority, odd = minority(values)
    if not odd:
        return None
    if majority is not None:
        return Odd(kind, like_text, field, tuple(readings[int(i)] for i in odd), majority)
    sides: dict[str, list[Reading]] = {}
    for reading in readings:
        sides.setdefault(value_text(reading.value), []).append(reading)
    ordered = tuple((value, tuple(parts)) for value, parts in sides.items())
    return Odd(kind, like_text, field, tuple(readings), "", ordered)


def _others(values: list[float], i: int) -> list[float]:
    """What the ``i``-th of ``values`` is held to: the others, or all of them where they are many."""
    return values if len(values) >= LEAVE_ONE_OUT_BELOW else values[:i] + values[i + 1 :]


def _beyond(value: float, others: Sequence[float], field: Field) -> bool:
    middle = statistics.median(others)
    deviation = statistics.median(abs(v - middle) for v in others)
    reach = max(field.floor, SPREAD_SIGMAS * MAD_TO_SIGMA * deviation)
    above, below = value - middle > reach, middle - value > reach
    return {"high": above, "low": below, "both": above or below}[field.direction]


def _spread(kind: PartKind, like_text: str, field: Field, readings: Sequence[Reading]) -> Odd | None:
    numbers = [(r, float(r.value)) for r in readings if isinstance(r.value, int | float)]
    numbers = [(r, v) for r, v in numbers if not (field.idle and r.part.busy)]
    if len(numbers) < 2:
        return None
    values = [v for _, v in numbers]
    named = tuple(r for i, (r, v) in enumerate(numbers) if _beyond(v, _others(values, i), field))
    if not named:
        return None
    rest = [v for r, v in numbers if r not in named]
    low, high = (value_text(min(rest), field.unit), value_text(max(rest), field.unit)) if rest else ("", "")
    usual = low if low == high else f"{low} to {high}"
    return Odd(kind, like_text, field, named, usual)


def _counters(kind: PartKind, like_text: str, field: Field, readings: Sequence[Reading]) -> Odd | None:
    counts = [(r, r.value) for r in readings if isinstance(r.value, int) and not isinstance(r.value, bool)]
    if len(counts) < 2:
        return None
    values = [float(c) for _, c in counts]
    named = tuple(
        r for i, (r, c) in enumerate(counts) if stands_out(c, statistics.median(_others(values, i)))
    )
    if not named:
        return None
    usual = statistics.median(c for r, c in counts if r not in named)
    return Odd(kind, like_text, field, named, f"a median of {usual:g}")


def _declared(kind: PartKind, path: str, found: Compared) -> Field:
    """The field at ``path`` as declared (a field under a declared path named by both: "kernel
    setting net.core.somaxconn"); an undeclared one is noted and compared as a setting."""
    field = declaration(kind.fields, path)
    if field is None:
        found.undeclared.setdefault(kind.name, set()).add(path)
        return setting(path, path)
    if field.path != path:
        return replace(field, path=path, words=f"{field.words} {path[len(field.path) + 1 :]}")
    return field


JUDGES = {"setting": _settings, "spread": _spread, "counter": _counters}


def compare(nodes: Mapping[str, NodeFacts], kinds: Sequence[PartKind]) -> Compared:
    """Every field of every kind of part compared between like parts, over every node."""
    found = Compared([], {}, {})
    for kind in kinds:
        groups: dict[tuple[Any, ...], dict[str, list[Reading]]] = {}
        like_texts: dict[tuple[Any, ...], str] = {}
        declared: dict[str, Field] = {}
        for host, node in nodes.items():
            for part in kind.parts(node):
                like_texts.setdefault(part.like, part.like_text)
                by_field = groups.setdefault(part.like, {})
                for path, value in flatten(part.raw):
                    if path not in declared:
                        declared[path] = _declared(kind, path, found)
                    field = declared[path]
                    if field.nature in JUDGES:
                        shown = field.value(value) if field.value else value
                        if shown is not None:
                            by_field.setdefault(path, []).append(Reading(host, part, shown))
        for like, by_field in groups.items():
            for path, readings in by_field.items():
                field = declared[path]
                found.fields.setdefault(kind.name, set()).add(path)
                odd = JUDGES[field.nature](kind, like_texts[like], field, readings)
                if odd is not None:
                    found.odd.append(odd)
    return found
