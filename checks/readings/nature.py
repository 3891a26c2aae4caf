"""What a reading is, declared once per field: how the general comparison of like parts
(:mod:`checks.readings.compare`) treats it.

- an **identity** (a serial, a UUID, an address, a bus id) or a momentary state always differs
  between parts and is never compared;
- a **setting** (a mode, a model, a firmware or BIOS version, a limit) is the same on like parts:
  the minority is named against the majority, both values given, and with no majority every side;
- a **spread** reading (a temperature or power at idle) differs a little between healthy parts: a
  part is named where it stands further from its like parts' median than a robust spread of theirs,
  and never for less than a floor in the reading's own unit;
- a **counter** since boot (errors, replays) is named where it stands far out from its like parts'
  counts, as a note or a warning by what it counts;
- a field another rule judges (**ruled**) is left to that rule, which says more.

A field is a dotted path into one part's record (``remapped_rows.pending``); a declaration covers
the fields under its path too (``counters`` declares ``counters.symbol_error``), where none of
theirs is nearer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from preflight.status import Status

Nature = Literal["identity", "setting", "spread", "counter", "ruled"]
Direction = Literal["high", "low", "both"]


@dataclass(frozen=True)
class Field:
    """One field of a part's record and its nature. ``words`` names it in a finding ("idle
    temperature"); ``why`` says why an identity is not compared, or which rule judges a ruled field.
    A spread field has a ``unit``, a ``floor`` (the least distance from the like parts' median that
    is named, in that unit) and a ``direction`` (the side that is a fault); ``idle`` keeps it to
    parts that run nothing. ``status`` is what a finding of the field is (a counter's note or
    warning). ``value`` turns a raw value into what is compared (swap "on"/"off" from its size)."""

    path: str
    nature: Nature
    words: str = ""
    why: str = ""
    unit: str = ""
    floor: float = 0.0
    direction: Direction = "both"
    idle: bool = False
    status: Status = "warn"
    value: Callable[[Any], Any] | None = None

    def covers(self, path: str) -> bool:
        """Whether this declaration is the one for ``path`` (itself, or a field under a prefix)."""
        return path == self.path or path.startswith(self.path + ".")


def identity(path: str, why: str) -> Field:
    return Field(path, "identity", why=why)


def setting(path: str, words: str, value: Callable[[Any], Any] | None = None) -> Field:
    return Field(path, "setting", words=words, value=value)


def spread(
    path: str, words: str, unit: str, floor: float, direction: Direction = "both", idle: bool = False
) -> Field:
    return Field(path, "spread", words=words, unit=unit, floor=floor, direction=direction, idle=idle)


def counter(path: str, words: str, status: Status = "pass") -> Field:
    """A counter since boot; ``status`` "pass" makes its finding a note."""
    return Field(path, "counter", words=words, status=status)


def ruled(path: str, by: str) -> Field:
    return Field(path, "ruled", why=by)


def declaration(fields: Iterable[Field], path: str) -> Field | None:
    """The declaration of ``path``: an exact one, else the longest prefix that covers it."""
    found: Field | None = None
    for field in fields:
        if field.path == path:
            return field
        if field.covers(path) and (found is None or len(field.path) > len(found.path)):
            found = field
    return found
