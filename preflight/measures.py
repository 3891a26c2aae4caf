"""What a check measures, declared by the check: each rate's name, unit, the entity it belongs to and
how to read it from the check's findings (:class:`Measure`, ``Check.measures``).

The history store keeps the rates a check declares ``kept`` (one row per GPU, node or pair and run),
judges those declared ``own_past`` against their own earlier runs, and the HTML report draws their
trends; the Prometheus textfile publishes those that name a :class:`Gauge`. None of them reads a
check's details: the check's own reader does, so a new check with a rate declares it here and
nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from preflight.model import CheckResult

# What one value belongs to: a GPU (the history keeps it under the GPU's identity), a node, a pair
# of nodes (node and part: their names), one rail of a node (under its GPU's identity or its
# interface's), or the whole run.
Entity = Literal["node", "pair", "gpu", "rail", "run"]
# The order reports show a run's trends in: its nodes first, then its pairs, its GPUs, its rails.
ENTITY_ORDER: tuple[Entity, ...] = ("node", "pair", "gpu", "rail", "run")


NodePart = Literal["gpu", "hca", "nic"]


@dataclass(frozen=True)
class PartRef:
    """A part of a node as a check names it, in the terms the node's facts use (the history store
    keeps parts under them: :func:`preflight.history.record.parts_of`): its kind, and its identity
    (a GPU's serial or UUID), where it sits (a GPU's index, an HCA's ``device/port``, an
    interface's name) or its PCI address (a GPU's, in any of the forms the facts and the kernel
    log write), whichever the finding knows."""

    kind: NodePart
    identity: str = ""
    slot: str = ""
    pci: str = ""


@dataclass(frozen=True)
class Sample:
    """One value of a measure, as the check's findings give it."""

    value: float
    node: str = ""  # the name that reached the node; "" for the whole run
    part: str = ""  # a pair's other node
    ref: PartRef | None = None  # the part a GPU's or a rail's value belongs to, as the check knows it
    labels: tuple[tuple[str, str], ...] = ()  # what else a gauge's sample is labelled with


@dataclass(frozen=True)
class Gauge:
    """A Prometheus gauge a measure is published as: its name and its help line."""

    name: str
    help: str


@dataclass(frozen=True)
class Measure:
    """A rate a check measures. ``metric``: its stable name (the history store keeps its values
    under it); ``unit``: "GB/s", "TFLOPS"; ``entity``: what one value belongs to; ``what``: the
    measure in a sentence ("bus bandwidth"); ``label``: a trend's kind in the History section
    ("node busbw"); ``read``: the samples one of the check's findings carries (none for a finding
    that carries none). ``kept``: kept in the history store; ``own_past``: judged against its own
    earlier runs; ``gauge``: published to Prometheus as this gauge."""

    metric: str
    unit: str
    entity: Entity
    what: str
    label: str
    read: Callable[[CheckResult], Sequence[Sample]]
    kept: bool = True
    own_past: bool = False
    gauge: Gauge | None = None

    @property
    def order(self) -> int:
        return ENTITY_ORDER.index(self.entity)


# The parts a check's finding is about, by the name that reached each node; empty for a finding
# about no part (a node, a pair, the run).
PartsNamed = Callable[["CheckResult"], "Mapping[str, Sequence[PartRef]]"]
