"""Where the job runs, decided from recorded nodes' facts: CUDA or the CPU, ranks per node from
what CUDA sees, and the interface NCCL and gloo bind to (tests/data/runs: a real 4 x H100 node and
a real CPU node, SOURCES.md there)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from checks.job.layout import Devices, decide_devices, socket_environment, socket_interface
from checks.job.outcome import JobNotRun
from preflight.facts import NodeFacts

RUNS = Path(__file__).parent / "data" / "runs"
H100: dict[str, Any] = json.loads((RUNS / "h100_node.json").read_text())
CPU: dict[str, Any] = json.loads((RUNS / "cpu_node.json").read_text())


def node(base: dict[str, Any], **changes: Any) -> NodeFacts:
    facts = copy.deepcopy(base)
    for key, value in changes.items():
        facts[key] = {**facts.get(key, {}), **value} if isinstance(value, dict) else value
    return NodeFacts(facts)


def test_gpu_nodes_run_one_rank_per_gpu_that_cuda_sees() -> None:
    devices = decide_devices({"a": node(H100), "b": node(H100)}, {}, None)
    assert devices == Devices(gpu=True, nproc={"a": 4, "b": 4})


def test_cpu_nodes_run_gloo_with_one_rank_or_their_slots() -> None:
    devices = decide_devices({"a": node(CPU), "b": node(CPU)}, {"b": 2}, None)
    assert devices == Devices(gpu=False, nproc={"a": 1, "b": 2})


def test_more_slots_than_cuda_devices_fails_naming_the_node() -> None:
    devices = decide_devices({"a": node(H100), "b": node(H100)}, {"a": 4, "b": 8}, None)
    assert isinstance(devices, JobNotRun)
    assert (devices.status, devices.hosts) == ("fail", ("b",))
    assert "b: slots=8 but torch sees 4 CUDA devices" in devices.summary


def test_gpus_hidden_from_cuda_are_said_to_be_untested() -> None:
    hidden = node(H100, torch={"device_count": 2}, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    devices = decide_devices({"a": node(H100), "b": hidden}, {}, None)
    assert isinstance(devices, Devices)
    assert devices.nproc == {"a": 4, "b": 2}
    assert devices.untested == {"b": "2 of its 4 GPUs untested (torch sees 2 (CUDA_VISIBLE_DEVICES=0,1))"}


def test_fewer_slots_than_gpus_leave_the_rest_untested() -> None:
    devices = decide_devices({"a": node(H100)}, {"a": 1}, None)
    assert isinstance(devices, Devices) and devices.untested == {"a": "3 of its 4 GPUs untested (slots=1)"}


def test_gpus_that_torch_cannot_use_stop_the_job_instead_of_testing_the_cpu() -> None:
    cpu_torch = node(
        H100, torch={"version": "2.5.1+cpu", "cuda": None, "cuda_available": False, "device_count": 0}
    )
    devices = decide_devices({"a": node(H100), "b": cpu_torch}, {}, None)
    assert isinstance(devices, JobNotRun)
    assert devices.hosts == ("b",)
    assert "b: 4 GPUs listed, torch 2.5.1+cpu sees no CUDA device" in devices.summary
    # Asked for explicitly, the CPU path runs.
    assert decide_devices({"a": node(H100), "b": cpu_torch}, {}, "gloo") == Devices(False, {"a": 1, "b": 1})


def test_the_master_binds_to_the_interface_that_holds_the_address_its_peers_use() -> None:
    # An older probe reports the master's own route as loopback; the inventory named it by name.
    route = {"master": "gpu01", "address": "192.0.2.2", "dev": "lo", "local": True}
    assert socket_interface(node(CPU), route, "") == "eth0"
    assert socket_interface(node(CPU), {"address": "192.0.2.9", "dev": "lo"}, "") is None


def test_a_node_that_pins_its_own_interface_keeps_it_and_the_config_wins_over_all() -> None:
    pinned = node(CPU, env={"NCCL_SOCKET_IFNAME": "ib0"})
    assert socket_interface(pinned, {"dev": "eth0"}, "") is None
    assert socket_interface(pinned, {"dev": "eth0"}, "bond0") == "bond0"
    assert socket_interface(node(CPU), {"dev": "eth1"}, "") == "eth1"


def test_the_interface_is_pinned_exactly_for_nccl() -> None:
    # NCCL reads a prefix: eth1 would also match eth10.
    assert socket_environment("eth1") == {"NCCL_SOCKET_IFNAME": "=eth1", "GLOO_SOCKET_IFNAME": "eth1"}
    assert socket_environment(None) == {}
