"""Where each node's GPUs and NICs sit (checks/hardware/pcie_topology.py): the NUMA node each hangs
off, against the nodes of the same kind. The nodes are the recorded H100 node of
tests/data/runs/h100_node.json (its four GPUs' PCI addresses), with the devices' NUMA nodes as a
two-socket server gives them, and -1 everywhere as a virtual machine's firmware gives them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from checks.hardware import judge_hardware
from checks.hardware.pcie_topology import judge_pcie_topology
from preflight.config import Config
from preflight.facts import NodeFacts

DATA = Path(__file__).parent / "data"
H100 = json.loads((DATA / "runs" / "h100_node.json").read_text())
CPU_NODE = json.loads((DATA / "runs" / "cpu_node.json").read_text())
TWO_SOCKETS = {0: 0, 1: 0, 2: 1, 3: 1}  # GPU index -> NUMA node


def _node(numa: dict[int, int] | None = None, nic_numa: int = 0) -> NodeFacts:
    facts: dict[str, Any] = copy.deepcopy(H100)
    numa = TWO_SOCKETS if numa is None else numa
    devices = [
        {
            "address": "0000:" + g["pci_bus_id"].split(":", 1)[1].lower(),
            "kind": "gpu",
            "numa_node": numa.get(g["index"], -1),
        }
        for g in facts["gpus"]
    ]
    devices.append({"address": "0000:3b:00.0", "kind": "nic", "numa_node": nic_numa})
    facts["pci_devices"] = devices
    return NodeFacts(facts)


def test_nodes_laid_out_alike_say_nothing_and_a_vm_without_numa_nodes_is_alike() -> None:
    assert judge_pcie_topology({f"gpu{i}": _node() for i in range(1, 5)}) == []
    vms = {f"vm{i}": _node({}, nic_numa=-1) for i in range(1, 4)}
    assert judge_pcie_topology(vms) == []
    assert [r.status for r in judge_hardware(vms, Config())] == ["pass"]


def test_a_node_whose_gpus_sit_elsewhere_is_named_against_its_peers() -> None:
    nodes = {f"gpu{i}": _node() for i in range(1, 5)}
    nodes["gpu3"] = _node({0: 0, 1: 0, 2: 0, 3: 0})  # the BIOS's NUMA setting differs, or the cards moved
    [found] = judge_pcie_topology(nodes)
    assert (found.status, found.hosts, found.details["item"]) == ("warn", ("gpu3",), "pcie_numa_layout")
    assert found.summary == (
        "gpu3: GPUs on NUMA 0 (4); NICs on NUMA 0 (1), "
        "where gpu[1-2,4] have GPUs on NUMA 0 (2), 1 (2); NICs on NUMA 0 (1)"
    )
    assert ("warn", "pcie_numa_layout") in [
        (r.status, r.details.get("item")) for r in judge_hardware(nodes, Config())
    ]


def test_two_nodes_that_differ_are_both_named_and_other_kinds_are_not_peers() -> None:
    pair = {"a": _node(), "b": _node(nic_numa=1)}
    [found] = judge_pcie_topology(pair)
    assert found.hosts == ("a", "b") and "no majority" in found.summary
    mixed = {"gpu1": _node(), "gpu2": _node(), "login": NodeFacts(copy.deepcopy(CPU_NODE))}
    assert judge_pcie_topology(mixed) == []
