"""What a check measures, declared by the check: each rate's name, unit, the entity it belongs to and
how to read it from the check's findings (:class:`Measure`, ``Check.measures``).

The history store keeps the rates a check declares ``kept`` (one row per GPU, node or pair and run),
judges those declared ``own_past`` against their own earlier runs, and the HTML report draws their
trends; the Prometheus textfile publishes those that name a :class:`Gauge`. None of them reads a
check's details: the check's own reader does, so a new check with a rate declares it here and
nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from preflight.model import CheckResult

# What one value belongs to: a GPU (part: its identity), a node, a pair of nodes (node and part:
# their names), or the whole run.
Entity = Literal["node", "pair", "gpu", "run"]
# The order reports show a run's trends in: its nodes first, then its pairs, then its GPUs.
ENTITY_ORDER: tuple[Entity, ...] = ("node", "pair", "gpu", "run")


@dataclass(frozen=True)
class Sample:
    """One value of a measure, as the check's findings give it."""

    value: float
    node: str = ""  # the name that reached the node; "" for the whole run
    part: str = ""  # a GPU's identity (its serial), or a pair's other node; "" where not known
    slot: str = ""  # where a GPU sits in its node (its index), for one whose identity is not known
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


# The parts a check's finding is about, by the name that reached each node (a GPU's serial); None
# where the finding does not say in its own terms (the history then looks for the identities of
# the node's parts in the finding's text).
PartsNamed = Callable[["CheckResult"], "dict[str, set[str]] | None"]
