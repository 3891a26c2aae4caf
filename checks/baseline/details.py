"""The ``baseline`` check's name and the JSON contract of its details: what each finding says
changed since the baseline run (``item``), and the baseline run's start on a pass.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

NAME = "baseline"


class NodesGone(TypedDict):
    """Nodes of the baseline run missing from this one (``item`` ``nodes``)."""

    item: str
    gone: list[str]


class NodesNew(TypedDict):
    """Nodes of this run that the baseline run did not have (``item`` ``nodes``)."""

    item: str
    new: list[str]


class VersionChanged(TypedDict):
    """One version (a fact's label or ``package NAME``) that changed on some nodes (``item`` ``version``)."""

    item: str
    label: str
    before: str
    after: str


class GpusGone(TypedDict):
    """A node with fewer GPUs than in the baseline run (``item`` ``gpus``)."""

    item: str
    before: int
    after: int


class SweepDrop(TypedDict):
    """The world's all-reduce busbw at the largest size both runs measured (``item`` ``sweep``)."""

    item: str
    size_bytes: int
    before_gbps: float
    after_gbps: float


class PairDrop(TypedDict):
    """One pair of nodes whose busbw dropped against its baseline and this run's pairs (``item`` ``pair``)."""

    item: str
    nodes: list[str]
    before_gbps: float
    after_gbps: float


class AsGood(TypedDict):
    """The pass: when the baseline run started; the nodes the baseline reached by another name,
    then -> now, matched by identity."""

    baseline_started_at: str
    renamed: NotRequired[dict[str, str]]


class NoBaseline(TypedDict):
    """The skip when no baseline run was given: nothing."""


BaselineDetails = (
    NodesGone | NodesNew | VersionChanged | GpusGone | SweepDrop | PairDrop | AsGood | NoBaseline
)
