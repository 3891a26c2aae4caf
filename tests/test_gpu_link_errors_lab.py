"""A GPU's NVLink errors end to end through real SSH, on lab nodes made to look like 8-GPU H100
nodes (tests/lab/gpu.py). NVML cannot load there, so the probe reads the counters from nvidia-smi's
own reports (``nvlink -e``, ``-q -d PCIE``, laid out as recorded ones), and ``hardware`` compares
each GPU's with the same GPUs' on the other nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import GpuNode, MakeLab
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab


def test_a_gpu_whose_nvlink_crc_errors_stand_far_above_its_like_gpus_is_named(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    # Every GPU has replayed a few PCIe packets and counted a few CRC errors, as links do.
    few = {i: {0: {"CRC Errors": 3}} for i in range(8)}
    replays = {i: {"Replays Since Reset": "2"} for i in range(8)}
    lab.make_gpu_node(1, GpuNode(nvlink_errors=few, pcie_changes=replays))
    # node2: GPU 5's link 3 counted thousands of CRC errors since the driver loaded.
    lab.make_gpu_node(2, GpuNode(nvlink_errors={**few, 5: {0: {"CRC Errors": 3}, 3: {"CRC Errors": 4812}}}))
    lab.make_gpu_node(3, GpuNode(nvlink_errors=few, pcie_changes=replays))

    run, data = run_check(lab, tmp_path, "--only", "hardware")

    node1, node2, node3 = (n.address for n in lab.nodes)
    hardware = results(data, "hardware")
    (note,) = [r for r in hardware if r["details"].get("item") == "gpu_link_errors"]
    assert note["details"]["note"] and note["hosts"] == [node2], note
    assert note["details"]["gpus"] == [5]
    assert note["summary"] == (
        f"{node2}: since the driver loaded, GPU 5: NVLink CRC flit errors 4815 (like GPUs' median 3)"
    )
    assert not any(node in r["hosts"] for r in hardware for node in (node1, node3)), run.stdout
    facts = {h["name"]: h["facts"] for h in data["hosts"]}
    assert facts[node1]["gpus"][5]["link_errors"] == {
        "pcie_replays": 2,
        "nvlink_crc_flit": 3,
        "nvlink_crc_data": None,
        "nvlink_replay": 0,
        "nvlink_recovery": 0,
    }
    assert {g["link_errors"]["pcie_replays"] for g in facts[node2]["gpus"]} == {0}
