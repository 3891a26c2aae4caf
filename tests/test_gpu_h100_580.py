"""What one real machine printed (tests/data/gpu_h100_580, SOURCES.md): an idle H100 80GB HBM3 on
driver 580.159.04 (open kernel module), CUDA 13.0, torch 2.11.0+cu130, NCCL 2.28.9, in a Firecracker
VM without InfiniBand. Its facts, through NVML and through nvidia-smi, pass the judges that read GPU
facts without a false alarm, and the parsers read the newest driver's and NCCL's outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checks.gpu_memory import judge_gpu_memory
from checks.hardware import judge_hardware
from checks.job.nccl_log import NetDevice, parse_nccl_log
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.model import CheckResult, HostReport
from preflight.node.hardware import parse_xid_lines
from preflight.node.nvidia import parse_nvidia_driver_version
from preflight.node.smi import nvlinks_from_smi, parse_smi_csv, processes_from_smi_rows

DATA = Path(__file__).parent / "data" / "gpu_h100_580"
MIB = 1024 * 1024
SOURCES = ("nvml", "smi")  # facts_nvml.json, facts_smi.json


def facts(source: str) -> dict[str, Any]:
    """The ``facts`` part of the facts probe's document, as read through ``source``."""
    document = json.loads((DATA / f"facts_{source}.json").read_text(encoding="utf-8"))
    facts_part: dict[str, Any] = document["facts"]
    return facts_part


def host(name: str, source: str) -> HostReport:
    found = facts(source)
    return HostReport(name=name, address=name, hostname=found["hostname"], reachable=True, facts=found)


def nodes(*sources: str) -> dict[str, NodeFacts]:
    """The machine as one node per document, named after the path its facts came through."""
    return {source: host(source, source).node for source in sources}


def problems(results: list[CheckResult]) -> list[str]:
    return [f"{r.status}: {r.summary}" for r in results if r.status != "pass"]


@pytest.mark.parametrize("sources", [("nvml",), ("smi",), SOURCES], ids=["nvml", "smi", "both"])
def test_the_real_facts_pass_gpu_memory_and_hardware(sources: tuple[str, ...]) -> None:
    """Alone or side by side (the same machine read two ways: two nodes that must agree), no
    fail, error or warning; a note would be fine."""
    typed = nodes(*sources)
    memory = judge_gpu_memory(typed, Config())
    hardware = judge_hardware(typed, Config())
    assert problems(memory) == [] and problems(hardware) == []
    (memory_pass,) = [r for r in memory if not r.is_note]
    assert "NVIDIA H100 80GB HBM3 79.6 GiB): free and healthy" in memory_pass.summary
    (hardware_pass,) = [r for r in hardware if not r.is_note]
    assert "PCIe links at full width and none slowing itself down" in hardware_pass.summary
    assert "no XID error in the kernel log" in hardware_pass.summary


def test_both_paths_agree_on_the_gpu_and_the_driver() -> None:
    nvml, smi = (host("vm", source).node for source in SOURCES)
    assert nvml.value(("driver", "source")) == "nvml"
    assert smi.value(("driver", "source")) == "proc"  # pynvml hidden: /proc/driver/nvidia/version
    read = []
    for node in (nvml, smi):
        assert node.gpus is not None
        (gpu,) = node.gpus
        read.append(
            {
                "name": gpu.name,
                "memory_total_bytes": gpu.memory_total_bytes,
                "memory_free_bytes": gpu.memory_free_bytes,
                "serial": gpu.serial,
                "uuid": gpu.uuid,
                "driver": node.driver_version,
                "cuda": node.value(("driver", "cuda")),
            }
        )
    expected = {
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_bytes": 81559 * MIB,
        "memory_free_bytes": 81079 * MIB,
        "serial": "1753024037012",
        "uuid": "GPU-7cc1bbbc-2f81-d6e7-875b-633aea677c5a",
        "driver": "580.159.04",
        "cuda": "13.0",
    }
    assert read == [expected, expected]
    # Recorded before preflight.node.nvml asked for nvmlDeviceGetMemoryInfo v2: v1 counted the
    # driver's 480 MiB reservation as used; nvidia-smi's Used is 0 (tests/test_node_facts.py).
    assert [node.gpus[0].memory_used_bytes for node in (nvml, smi) if node.gpus] == [480 * MIB, 0]


def test_the_newest_nccl_log_of_a_one_gpu_job() -> None:
    """NCCL 2.28.9's INFO lines (torchrun wrote them to stdout; stderr was empty): no IB device,
    so the socket network on eth0, and no connection line: one rank has no peer to connect to.
    NCCL's ``NET/IB : Using [RO]; OOB eth0:...`` names no IB device, and its truncated 1023-byte
    ``Trees`` line is read past."""
    transport = parse_nccl_log((DATA / "nccl_allreduce.out").read_text(encoding="utf-8"))
    assert transport.version == "2.28.9+cuda13.0"
    assert transport.network == "Socket"
    assert transport.ib_no_device is True
    assert transport.ib_devices == ()
    assert transport.socket_devices == (NetDevice(0, "eth0", address="192.0.2.2"),)
    assert transport.channels == {}
    assert transport.inter_node is None and not transport.uses_socket
    assert transport.gdrdma is False  # "GPU Direct RDMA Disabled for HCA 0 'eth0'"
    assert (transport.warnings, transport.warning_count) == ((), 0)
    assert transport.hosts == ("vm",)
    assert transport.nccl_lines == 98  # every line but the job's own "rank 0: 1"


def test_the_drivers_own_outputs_parse() -> None:
    """The open kernel module's version line, a kernel log without XIDs (an NVRM FBHUB interrupt
    cleared at boot is none), ``nvidia-smi nvlink --status`` printing nothing on a GPU without
    NVLink, and ``--query-compute-apps`` with its header only: what the facts recorded."""
    version = (DATA / "proc_driver_nvidia_version.txt").read_text(encoding="utf-8")
    assert parse_nvidia_driver_version(version) == "580.159.04"
    kernel_log = (DATA / "kernel_log.out").read_text(encoding="utf-8")
    assert "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04" in kernel_log
    assert parse_xid_lines(kernel_log) == []
    assert (DATA / "smi_nvlink_status.out").read_bytes() == b""
    assert nvlinks_from_smi("") == {}
    apps = (DATA / "smi_query_compute_apps.out").read_text(encoding="utf-8")
    assert processes_from_smi_rows(parse_smi_csv(apps, None)) == {}
    for source in SOURCES:
        found = facts(source)
        assert found["hardware"]["xid"] == {"readable": True, "source": "dmesg", "events": []}
        assert [gpu["nvlink"] for gpu in found["gpus"]] == [None]
        assert [gpu["processes"] for gpu in found["gpus"]] == [[]]
