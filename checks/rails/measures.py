"""What ``rails`` measures, as the history store, the History section and Prometheus read it
(:mod:`preflight.measures`): each node's rail's bus bandwidth, the best of its tests with its ring
neighbours, under the GPU or interface the rail is; and the parts a finding names
(:func:`parts_named`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preflight.facts_values import records
from preflight.measures import Gauge, Measure, PartRef, Sample
from preflight.model import CheckResult
from preflight.view import number


def _ref(part: Mapping[str, Any]) -> PartRef | None:
    """The part a rail is: its GPU, by PCI address (and index where known), or its interface."""
    if isinstance(part.get("gpu"), str) or isinstance(part.get("local_rank"), int):
        return PartRef("gpu", pci=str(part.get("gpu") or ""))
    if isinstance(part.get("interface"), str):
        return PartRef("nic", slot=part["interface"])
    return None


def rail_busbw(result: CheckResult) -> list[Sample]:
    """Each node's rails' bus bandwidth (GB/s) at the pair message: the best of the node's tests on
    that rail, re-tests included (a card slow with every neighbour is slow in its best test too; a
    neighbour's slow card is not), labelled with the rail's number."""
    parts = result.details.get("rail_parts")
    if not isinstance(parts, Mapping):
        return []
    best: dict[tuple[str, int], float] = {}
    for test in records(result.details.get("tests")):
        rail, busbw = test.get("rail"), number(test.get("busbw_gbps"))
        if test.get("latency") or not isinstance(rail, int) or not busbw:
            continue
        for host in test.get("nodes") or []:
            key = (str(host), rail)
            best[key] = max(busbw, best.get(key, busbw))
    found = []
    for (host, rail), value in sorted(best.items()):
        rails = records(parts.get(host))
        ref = _ref(rails[rail]) if rail < len(rails) else None
        # A rail no rank described is published by its number and not kept: it is no known part.
        found.append(Sample(value, node=host, ref=ref, labels=(("rail", str(rail)),)))
    return found


def parts_named(result: CheckResult) -> dict[str, list[PartRef]]:
    """The GPU or interface each slow rail of a node's finding is (``Check.parts_named``); none for
    a finding between two nodes, or about a rail on every node."""
    host = result.details.get("node")
    if not isinstance(host, str):
        return {}
    refs = [ref for part in records(result.details.get("parts")) if (ref := _ref(part))]
    return {host: refs} if refs else {}


RAIL_BUSBW = Measure(
    "rail_busbw",
    "GB/s",
    "rail",
    "bus bandwidth on one rail",
    "rail busbw",
    rail_busbw,
    gauge=Gauge(
        "preflight_rail_busbw_gbytes_per_second",
        "all-reduce bus bandwidth of each node's rail with its ring neighbours, the best of its tests (GB/s)",
    ),
)
MEASURES = (RAIL_BUSBW,)
