"""The JSON contract of the ``clocks`` check's details: each node's offsets and time service (the pass,
or added to the first finding), and what each finding measured.
"""

from __future__ import annotations

from typing import Literal, Required, TypedDict

ServiceState = Literal["synchronised", "unsynchronised", "unknown"]


class NodeClock(TypedDict, total=False):
    """One node's row: offsets in seconds (from the controller, from the nodes' median)."""

    offset_s: float
    uncertainty_s: float
    from_nodes_s: float
    service: ServiceState
    services: list[str]


class Rows(TypedDict, total=False):
    """Every node's row (by host), what the offsets were measured against, and the controller's
    offset from the nodes' median (None when judged against the controller): the details of the
    pass or skip, and added to the first finding."""

    nodes: dict[str, NodeClock]
    reference: str
    controller_offset_s: float | None


class Offset(Rows):
    """A node's clock too far from the others (``item`` ``offset``): its offset from the reference,
    which the finding names as the rows do (``reference``)."""

    item: Required[str]
    offset_s: Required[float]
    uncertainty_s: Required[float]


class Unsynchronised(Rows):
    """Nodes whose kernel says no time service keeps the clock in step (``item`` ``unsynchronised``)."""

    item: Required[str]


class NoAnswer(Rows):
    """Nodes whose clock could not be read, each with why (``item`` ``no_answer``)."""

    item: Required[str]
    errors: Required[dict[str, str]]


ClocksDetails = Rows | Offset | Unsynchronised | NoAnswer
