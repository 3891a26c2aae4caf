"""The typed views over node facts read recorded nodes right and never trust a node's types."""

from __future__ import annotations

import json
from pathlib import Path

from preflight.facts import NodeFacts, version_text
from preflight.model import HostReport

RUNS = Path(__file__).parent / "data" / "runs"


def recorded(name: str) -> NodeFacts:
    return NodeFacts(json.loads((RUNS / name).read_text()))


def test_an_h100_node_reads_as_eight_gpus_with_their_memory_and_processes() -> None:
    node = recorded("h100_node.json")
    assert node.hostname == "x3102c0s41b0n0"
    assert node.gpus is not None and len(node.gpus) == node.gpu_count
    first = node.gpus[0]
    assert first.name == "NVIDIA H100 80GB HBM3"
    assert first.memory_total_bytes == 85520809984
    assert first.ecc_mode == "enabled" and first.ecc_uncorrected_volatile == 0
    assert first.remapped_rows["pending"] is False
    assert first.processes == [{"pid": 3658480, "used_memory_bytes": 547356672, "name": "jacobi"}]
    assert node.torch is not None and node.torch.cuda_available
    assert node.uses_cuda
    assert node.driver_version is not None


def test_a_cpu_node_has_no_gpus_and_does_not_use_cuda() -> None:
    node = recorded("cpu_node.json")
    assert not node.uses_cuda
    assert node.gpu_count == 0
    eth0 = next(i for i in node.interfaces if i.name == "eth0")
    assert eth0.mtu == 1400 and eth0.state == "up"
    assert node.interface_with("192.0.2.2") == eth0
    assert node.interface_with("192.0.2.3") is None


def test_ill_typed_facts_read_as_missing_not_as_a_crash() -> None:
    node = NodeFacts(
        {
            "hostname": 7,
            "torch": "2.4",
            "gpus": [{"index": "0", "memory_total_bytes": True, "processes": None}, "junk"],
            "net": {"interfaces": "eth0", "ib_devices": [{"name": "mlx5_0", "port": [1]}]},
            "packages": ["torch"],
        }
    )
    assert node.hostname is None and node.torch is None and node.packages is None
    assert node.gpus is not None and len(node.gpus) == 1
    assert node.gpus[0].index is None and node.gpus[0].memory_total_bytes is None
    assert node.gpus[0].processes is None  # not reported, which is not "no process"
    assert node.interfaces == []
    assert node.ib_ports[0].device == "mlx5_0" and node.ib_ports[0].port is None


def test_a_host_report_builds_its_view_once() -> None:
    host = HostReport("n1", "10.0.0.1", reachable=True, facts={"hostname": "n1"})
    assert host.node is host.node
    assert host.node.hostname == "n1"


def test_packages_read_as_version_text_and_a_tuple_version_as_dotted() -> None:
    node = recorded("h100_node.json")
    assert node.packages is not None and node.packages["numpy"] == "1.26.4"
    listed = NodeFacts({"packages": {"torch": "2.5.1", "nvidia-nccl-cu12": [2, 21, 5]}})
    assert listed.packages == {"torch": "2.5.1", "nvidia-nccl-cu12": "2.21.5"}
    assert version_text((2, 21, 5)) == "2.21.5" and version_text("535.104.05") == "535.104.05"


def test_kernel_settings_keep_numbers_and_text_and_drop_anything_else() -> None:
    node = NodeFacts(
        {
            "sysctl": {
                "net.ipv4.neigh.default.gc_thresh3": 1024,
                "net.ipv4.ip_local_port_range": "32768 60999",
                "net.core.somaxconn": True,
                "kernel.odd": {"nested": 1},
            }
        }
    )
    assert node.sysctl == {
        "net.ipv4.neigh.default.gc_thresh3": 1024,
        "net.ipv4.ip_local_port_range": "32768 60999",
    }
    assert NodeFacts({"sysctl": "junk"}).sysctl == {}
    assert recorded("cpu_node.json").sysctl == {}
