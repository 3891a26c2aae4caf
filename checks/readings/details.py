"""The ``readings`` check's name and the JSON contract of its details: what each finding compared,
and what the comparison read (in the first finding, or the pass).
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

NAME = "readings"

Item = Literal["odd_setting", "odd_reading", "odd_counter"]


class PartReading(TypedDict):
    """One part's reading: its node, the part (empty for the node itself), where it sits in the node
    as the facts say (a GPU's index, an InfiniBand port's ``device/port``, an interface's name;
    empty for the node) and its value in words."""

    host: str
    part: str
    slot: str
    value: str


class Side(TypedDict):
    """One value of a setting no majority decides, and the parts that have it."""

    value: str
    parts: list[PartReading]


class FieldOdd(TypedDict):
    """One field the parts named stand out in: its path in the part's record, its name in words,
    its nature, the like parts' value or range (``usual``: empty where no majority decides) and,
    where no majority decides, every side."""

    path: str
    words: str
    nature: str
    usual: str
    parts: list[PartReading]
    sides: NotRequired[list[Side]]


class Read(TypedDict, total=False):
    """What the comparison read: how many fields it compared for each kind of part, how many parts
    of each kind, and the fields no one has declared yet (compared as settings), by kind."""

    fields_compared: dict[str, int]
    parts: dict[str, int]
    undeclared: dict[str, list[str]]


class OddReadings(Read):
    """Parts of one kind whose readings stand out from their like parts' (``item``: ``odd_setting``,
    ``odd_reading`` for a spread reading, ``odd_counter``)."""

    item: Required[Item]
    part_kind: Required[str]
    like: Required[str]
    fields: Required[list[FieldOdd]]
