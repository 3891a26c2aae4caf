"""The parts whose readings are compared, each kind with its like parts: a GPU with the GPUs of its
model, an InfiniBand or RoCE port with the ports of its card's kind (link layer, chip, board), a
network card's interface with the interface of that name on the other nodes, and a node with the
nodes of its kind (CPU model and GPU model).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checks.hardware.ib_ports import kind_of as port_kind
from checks.hardware.ib_ports import kind_text, port_label
from checks.hardware.resources import kind_of as node_kind
from checks.readings.fields import GPU_FIELDS, NIC_FIELDS, NODE_FIELDS, PORT_FIELDS
from checks.readings.nature import Field
from preflight.facts import NodeFacts
from preflight.facts_values import _map, records
from preflight.measures import NodePart, PartRef
from preflight.model import CheckResult


@dataclass(frozen=True)
class Part:
    """One part of one node: how a finding names it (``GPU 3 (serial 1654922005123)``; empty for
    the node itself), what it is compared with (``like``, and that in words: ``NVIDIA H100 80GB
    HBM3``), its record as the node reported it, and whether it was running something when read."""

    label: str
    like: tuple[Any, ...]
    like_text: str
    raw: Mapping[str, Any]
    busy: bool = False
    slot: str = ""  # where it sits in its node, as the facts say: a GPU's index, "mlx5_0/1", "eth0"


@dataclass(frozen=True)
class PartKind:
    """A kind of part: its name in findings (``GPU``), its fields and how to list a node's parts."""

    name: str
    plural: str
    fields: tuple[Field, ...]
    parts: Callable[[NodeFacts], Sequence[Part]]
    node_part: NodePart | None  # the kind the history store keeps such a part as; None: the node


def _gpus(node: NodeFacts) -> list[Part]:
    found = []
    for gpu in node.gpus or []:
        serial = f" (serial {gpu.serial})" if gpu.serial else ""
        label = f"GPU {gpu.index if gpu.index is not None else '?'}{serial}"
        slot = str(gpu.index) if gpu.index is not None else ""
        found.append(
            Part(label, (gpu.name,), gpu.name or "model unknown", gpu.raw, bool(gpu.processes), slot)
        )
    return found


def _ports(node: NodeFacts) -> list[Part]:
    raws = records(_map(node.raw.get("net")).get("ib_devices"))
    return [
        Part(
            port_label(port),
            port_kind(port),
            kind_text(port_kind(port)),
            raw,
            slot=f"{port.device}/{port.port}",
        )
        for port, raw in zip(node.ib_ports, raws, strict=True)
    ]


def _nics(node: NodeFacts) -> list[Part]:
    """Interfaces on a network card of their own (a PCIe link in sysfs); virtual ones (bridges,
    veths, bonds, containers' interfaces) come and go with what runs on the node and are left out."""
    raws = records(_map(node.raw.get("net")).get("interfaces"))
    return [
        Part(str(raw.get("name")), (raw.get("name"),), str(raw.get("name")), raw, slot=str(raw.get("name")))
        for raw in raws
        if raw.get("pcie")
    ]


def _node(node: NodeFacts) -> list[Part]:
    cpu, gpu = node_kind(node)
    like_text = ", ".join(p for p in (cpu, gpu) if p) or "kind unknown"
    return [Part("", (cpu, gpu), like_text, node.raw)]


GPU = PartKind("GPU", "GPUs", GPU_FIELDS, _gpus, "gpu")
PORT = PartKind("InfiniBand/RoCE port", "InfiniBand/RoCE ports", PORT_FIELDS, _ports, "hca")
NIC = PartKind("network card", "network cards", NIC_FIELDS, _nics, "nic")
NODE = PartKind("node", "nodes", NODE_FIELDS, _node, None)
KINDS: tuple[PartKind, ...] = (GPU, PORT, NIC, NODE)


def parts_named(result: CheckResult) -> dict[str, list[PartRef]]:
    """The parts a finding names odd, by node, as the history store reads them
    (``Check.parts_named``): every part of the fields it names (and, where no majority decides,
    of every side); none for a finding about nodes."""
    kind = next((k.node_part for k in KINDS if k.name == result.details.get("part_kind")), None)
    if kind is None:
        return {}
    named: dict[str, list[PartRef]] = {}
    for odd in records(result.details.get("fields")):
        readings = [
            *records(odd.get("parts")),
            *(p for side in records(odd.get("sides")) for p in records(side.get("parts"))),
        ]
        for reading in readings:
            host, slot = reading.get("host"), reading.get("slot")
            if isinstance(host, str) and isinstance(slot, str) and slot:
                named.setdefault(host, []).append(PartRef(kind, slot=slot))
    return named
