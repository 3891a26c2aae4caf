"""The ``rails`` check's name and the JSON contract of its details: every rail test (the pass, or
the first finding), and what each finding measured.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

NAME = "rails"


class RailTest(TypedDict):
    """One rail test or re-test between two nodes, at the pair message or (``latency``) at 8 bytes."""

    nodes: list[str]  # inventory names
    rail: int
    ranks: list[int]  # the two ranks that carried it
    busbw_gbps: float
    time_s: float
    size_bytes: int
    retest: bool
    latency: bool


class RailPart(TypedDict, total=False):
    """What one rail of a node is: its GPU's PCI address as the facts write it (``gpu``, NVML's
    ``00000000:18:00.0``) and the GPU's index in the node where the job knew it (``local_rank``),
    or the interface a CPU node's rail is (``interface``). Empty where the node did not say."""

    gpu: str
    local_rank: int
    interface: str


class Measured(TypedDict):
    """What the phase measured: the rails every node has, each node's rails by name (an interface,
    or a GPU with its PCI address) and what each is, the tests, each rail's typical test and what a
    healthy rail test does (GB/s busbw: the upper median of the typical ones; and their
    microseconds at 8 bytes), the phase's seconds."""

    rails: int
    rail_names: dict[str, list[str]]  # host -> the name of each of its rails
    rail_parts: dict[str, list[RailPart]]  # host -> what each of its rails is
    tests: list[RailTest]
    typical_gbps: dict[str, float]  # by rail, as a string
    healthy_gbps: float
    latency_us: dict[str, float]  # by rail: its typical test's time for an all-reduce of 8 bytes
    healthy_latency_us: float | None  # a healthy rail test's at 8 bytes
    # Latency tests slow in their re-test while its ranks waited for a CPU: [node, node, rail].
    latency_unjudged: list[list[str | int]]
    duration_s: float | None


class SlowRail(TypedDict):
    """A node's rail slow in its tests with every partner (or, ``pair`` and ``link``, a rail test
    whose slow side cannot be told; ``everywhere``, a rail slow on every node)."""

    # "slow_rail", "slow_on_every_rail", "slow_rail_pair", "slow_rail_link", "slow_rail_everywhere";
    # "rail_latency" for a test of latency, with ``form`` one of those and ``latency_us``.
    item: str
    rails: list[int]
    ratio: float  # the slowest test's busbw against a healthy rail test
    busbw_gbps: float
    node: NotRequired[str]
    nodes: NotRequired[list[str]]
    parts: NotRequired[list[RailPart]]  # a node's finding: what its slow rails are
    form: NotRequired[str]
    latency_us: NotRequired[float]
