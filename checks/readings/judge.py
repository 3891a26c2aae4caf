"""The ``readings`` judge (pure): every reading of like parts compared (:mod:`checks.readings.compare`)
and each part that stands out named on its node, with the field in words, its value and its like
parts' value. Fields that stand out on exactly the same parts are one finding (a BIOS update that
moved its version and its date is one cause).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from checks.readings.compare import Compared, Odd, Reading, compare, value_text
from checks.readings.details import NAME, FieldOdd, Item, OddReadings, PartReading, Read
from checks.readings.parts import KINDS, PartKind
from preflight.facts import NodeFacts
from preflight.findings import finding
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold, natural_key

ITEMS: dict[str, Item] = {"setting": "odd_setting", "spread": "odd_reading", "counter": "odd_counter"}
# Nodes one summary names parts of before "and N more nodes", and values of a setting no majority
# decides before "and N more values" (the details list them all).
SHOWN_NODES = 4
SHOWN_SIDES = 4


def _part(reading: Reading, odd: Odd) -> PartReading:
    part = reading.part
    return {"host": reading.host, "part": part.label, "slot": part.slot, "value": _value(reading, odd)}


def _value(reading: Reading, odd: Odd) -> str:
    return value_text(reading.value, odd.field.unit)


def _field(odd: Odd) -> FieldOdd:
    found: FieldOdd = {
        "path": odd.field.path,
        "words": odd.field.words,
        "nature": odd.field.nature,
        "usual": odd.usual,
        "parts": [_part(r, odd) for r in odd.named],
    }
    if odd.sides:
        found["sides"] = [{"value": v, "parts": [_part(r, odd) for r in parts]} for v, parts in odd.sides]
    return found


def _listed(readings: Sequence[Reading]) -> str:
    """The parts named, by node: ``node3 mlx5_0 port 1, mlx5_1 port 1``; nodes alone folded."""
    by_host: dict[str, list[str]] = {}
    for reading in readings:
        by_host.setdefault(reading.host, []).append(reading.part.label)
    if all(not label for labels in by_host.values() for label in labels):
        return fold(by_host)
    shown = [f"{host} {', '.join(labels)}" for host, labels in list(by_host.items())[:SHOWN_NODES]]
    more = f" and {len(by_host) - SHOWN_NODES} more nodes" if len(by_host) > SHOWN_NODES else ""
    return "; ".join(shown) + more


def _like(kind: PartKind, like_text: str) -> str:
    return f"like {kind.plural} ({like_text})"


def _summary(odds: Sequence[Odd]) -> str:
    first = odds[0]
    like = _like(first.kind, first.like_text)
    if first.sides:
        shown = [f"{_listed(parts)}: {value}" for value, parts in first.sides[:SHOWN_SIDES]]
        more = len(first.sides) - SHOWN_SIDES
        sides = "; ".join(shown) + (f"; and {more} more values" if more > 0 else "")
        return f"{first.field.words} differs between {like} and no majority decides: {sides}"
    values = [
        f"{odd.field.words} {' / '.join(dict.fromkeys(_value(r, odd) for r in odd.named))}" for odd in odds
    ]
    usual = [odd.usual for odd in odds]
    return f"{_listed(first.named)}: {' and '.join(values)}; {like}: {' and '.join(usual)}"


def _merged(odds: Sequence[Odd]) -> list[list[Odd]]:
    """Odd readings grouped into findings: fields that stand out on the same parts of one kind, of
    one nature, together; a setting no majority decides on its own."""
    groups: dict[object, list[Odd]] = {}
    for odd in odds:
        parts = tuple(sorted((r.host, r.part.label) for r in odd.named))
        key: object = (odd.kind.name, odd.like_text, odd.field.nature, parts, odd.field.status)
        groups.setdefault(id(odd) if odd.sides else key, []).append(odd)
    return list(groups.values())


def _sort_key(odds: Sequence[Odd]) -> tuple[list[int | str], str]:
    return natural_key(odds[0].named[0].host), odds[0].field.path


def _finding(odds: Sequence[Odd]) -> CheckResult:
    first = odds[0]
    details: OddReadings = {
        "item": ITEMS[first.field.nature],
        "part_kind": first.kind.name,
        "like": first.like_text,
        "fields": [_field(odd) for odd in odds],
    }
    hosts = [r.host for r in first.named]
    summary = _summary(odds)
    if first.field.status == "pass":
        return CheckResult.note(NAME, summary, tuple(sorted(set(hosts), key=natural_key)), dict(details))
    return finding(NAME, first.field.status, summary, hosts, details, natural_order=True)


def _read(compared: Compared, nodes: Mapping[str, NodeFacts]) -> Read:
    return {
        "fields_compared": {kind: len(paths) for kind, paths in sorted(compared.fields.items())},
        "parts": {kind.name: sum(len(kind.parts(n)) for n in nodes.values()) for kind in KINDS},
        "undeclared": {kind: sorted(paths) for kind, paths in sorted(compared.undeclared.items())},
    }


def judge_readings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Every part whose reading stands out from its like parts', one finding per cause; a pass
    saying what was compared where none does."""
    compared = compare(nodes, KINDS)
    read = _read(compared, nodes)
    groups = sorted(_merged(compared.odd), key=_sort_key)
    results = [_finding(group) for group in groups]
    problems = [r for r in results if not r.is_note]
    notes = [r for r in results if r.is_note]
    if problems:
        return with_check_details(problems, read) + notes
    counted = ", ".join(
        f"{n} {kind.plural if n != 1 else kind.name}" for kind in KINDS if (n := read["parts"][kind.name])
    )
    fields = sum(read["fields_compared"].values())
    summary = f"{fields} readings compared between like parts ({counted}): none stands out"
    return [CheckResult(NAME, "pass", summary, (), dict(read)), *notes]
