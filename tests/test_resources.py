"""Memory and CPUs against the nodes of the same kind (checks/hardware/resources.py), on the facts of
real machines: the H100 VM of tests/data/gpu_h100_580 (16 CPUs, 125.9 GiB; SOURCES.md there) and
the CPU-only node of tests/data/runs/cpu_node.json (tests/data/runs/SOURCES.md). A lost DIMM and
offline CPUs are the recorded numbers less a DIMM or a socket's threads; the healthy look-alike is
the same node under another kernel's reservations."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from checks.hardware import judge_hardware
from checks.hardware.resources import judge_resources
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.node import system

DATA = Path(__file__).parent / "data"
H100_VM = json.loads((DATA / "gpu_h100_580" / "check_every_gpu.json").read_text())["hosts"][0]["facts"]
CPU_NODE = json.loads((DATA / "runs" / "cpu_node.json").read_text())
MEMORY = H100_VM["memory"]["total_bytes"]
MiB = 1 << 20


def _node(facts: dict[str, Any], memory: float | None = None, cpus: int | None = None) -> NodeFacts:
    facts = copy.deepcopy(facts)
    if memory is not None:
        facts["memory"]["total_bytes"] = int(memory)
    if cpus is not None:
        facts["cpu"]["count"] = cpus
    return NodeFacts(facts)


def _items(results: list[Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.status, r.details.get("item"), r.hosts) for r in results]


def test_alike_nodes_and_another_kernels_reservations_say_nothing() -> None:
    nodes = {f"gpu{i}": _node(H100_VM) for i in range(1, 4)}
    nodes["gpu4"] = _node(H100_VM, memory=MEMORY - 512 * MiB)  # a crash kernel reserved
    assert judge_resources(nodes) == []
    [passed] = judge_hardware(nodes, Config())
    assert passed.status == "pass"


def test_a_node_that_lost_a_dimm_is_named_against_its_peers() -> None:
    nodes = {f"gpu{i}": _node(H100_VM) for i in range(1, 5)}
    nodes["gpu3"] = _node(H100_VM, memory=MEMORY * 31 / 32)  # one DIMM of 32
    [found] = judge_resources(nodes)
    assert _items([found]) == [("warn", "memory_below_peers", ("gpu3",))]
    assert found.summary.startswith("gpu3: 122 GiB of memory, 3% less than 126 GiB on gpu[1-2,4]")
    assert "NVIDIA H100 80GB HBM3" in found.summary
    assert ("warn", "memory_below_peers", ("gpu3",)) in _items(judge_hardware(nodes, Config()))


def test_of_two_nodes_the_one_with_less_memory_is_named() -> None:
    nodes = {"a": _node(H100_VM), "b": _node(H100_VM, memory=MEMORY * 15 / 16)}
    assert _items(judge_resources(nodes)) == [("warn", "memory_below_peers", ("b",))]
    nodes = {"a": _node(H100_VM, memory=MEMORY * 15 / 16), "b": _node(H100_VM)}
    assert _items(judge_resources(nodes)) == [("warn", "memory_below_peers", ("a",))]


def test_a_node_with_more_memory_than_its_kind_is_a_note() -> None:
    nodes = {f"gpu{i}": _node(H100_VM) for i in range(1, 4)}
    nodes["gpu2"] = _node(H100_VM, memory=MEMORY * 2)
    [note] = judge_resources(nodes)
    assert note.is_note and note.hosts == ("gpu2",) and note.details["item"] == "memory_above_peers"


def test_nodes_of_another_kind_are_not_peers() -> None:
    # A CPU-only node with a tenth of the memory and an eighth of the CPUs: another kind of node.
    nodes = {"gpu1": _node(H100_VM), "gpu2": _node(H100_VM), "login": NodeFacts(CPU_NODE)}
    assert judge_resources(nodes) == []


def test_cpus_offline_are_named_and_more_cpus_are_a_note() -> None:
    nodes = {f"gpu{i}": _node(H100_VM) for i in range(1, 5)}
    nodes["gpu2"] = _node(H100_VM, cpus=8)  # half the threads: SMT off, or a socket missing
    nodes["gpu4"] = _node(H100_VM, cpus=32)
    found = judge_resources(nodes)
    assert _items(found) == [
        ("warn", "cpus_below_peers", ("gpu2",)),
        ("pass", "cpus_above_peers", ("gpu4",)),
    ]
    assert found[0].summary.startswith("gpu2: 8 CPUs online where gpu[1,3] have 16")
    # Two nodes: CPUs only go missing, so the one with fewer is named.
    pair = {"a": _node(H100_VM, cpus=12), "b": _node(H100_VM)}
    assert _items(judge_resources(pair)) == [("warn", "cpus_below_peers", ("a",))]


# --------------------------------------------------------------------------- local NVMe disks
# Model strings as /sys/class/nvme/nvmeN/model gives them on real machines: two Intel Optane
# P5800X of a POWER9 server (the multi-gen LRU series' SPECjbb report, `cat
# /sys/class/nvme/nvme0/model`), and an AWS i3en instance's EBS volume beside its instance
# storage (the models AWS documents for its Nitro NVMe devices).
OPTANE = "INTEL SSDPF21Q800GB"
EBS = "Amazon Elastic Block Store"
INSTANCE_STORE = "Amazon EC2 NVMe Instance Storage"


def _with_disks(*disks: tuple[str, str]) -> NodeFacts:
    facts = copy.deepcopy(H100_VM)
    facts["nvme"] = [
        {"name": f"nvme{i}", "model": model, "state": state, "transport": "pcie"}
        for i, (model, state) in enumerate(disks)
    ]
    return NodeFacts(facts)


def test_the_probe_lists_each_nvme_controller_with_its_model_state_and_transport(tmp_path: Path) -> None:
    for name, model in (("nvme0", OPTANE), ("nvme1", OPTANE)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model").write_text(model + "\n")
        (tmp_path / name / "state").write_text("live\n")
        (tmp_path / name / "transport").write_text("pcie\n")
    (tmp_path / "nvme-fabrics").mkdir()  # not a controller
    found = system.nvme_controllers(str(tmp_path))
    assert [c["name"] for c in found] == ["nvme0", "nvme1"]
    assert [(c["model"], c["state"], c["transport"]) for c in found] == [(OPTANE, "live", "pcie")] * 2
    assert system.nvme_controllers(str(tmp_path / "absent")) == []


def test_a_node_with_a_dead_local_disk_is_named_and_network_volumes_are_not_counted() -> None:
    live = (OPTANE, "live")
    nodes = {f"gpu{i}": _with_disks(live, live) for i in range(1, 5)}
    assert judge_resources(nodes) == []
    nodes["gpu2"] = _with_disks(live, (OPTANE, "dead"))
    [found] = judge_resources(nodes)
    assert _items([found]) == [("warn", "nvme_missing", ("gpu2",))]
    assert found.summary == f"gpu2: local NVMe disks 1 {OPTANE} where gpu[1,3-4] have 2"
    # Instance storage alike, EBS volumes attached as each node was given them: nothing to say.
    store = (INSTANCE_STORE, "live")
    cloud = {
        "a": _with_disks((EBS, "live"), store, store),
        "b": _with_disks((EBS, "live"), (EBS, "live"), store, store),
        "c": _with_disks((EBS, "live"), store, store),
    }
    assert judge_resources(cloud) == []
    cloud["c"] = _with_disks((EBS, "live"), store)
    assert _items(judge_resources(cloud)) == [("warn", "nvme_missing", ("c",))]
