"""The general comparison of like parts end to end through real SSH, on lab nodes made to look like
8-GPU H100 nodes with four ConnectX-7 HCAs each (tests/lab/gpu.py: the recorded H100's nvidia-smi
fields served per GPU, a /sys/class/infiniband tree in each node's own mount namespace). Forms no
rule of their own names: a GPU idling 45 C hotter than its like GPUs and a node whose HCAs run older
firmware than the same HCAs elsewhere are each named on their node; a GPU 9 C warmer than the rest
(the look-alike) is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import GpuNode, MakeLab
from tests.lab.gpu import IB_HCAS
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab

RECORDED_IDLE_C = 41  # temperature.gpu of the recorded idle H100 (tests/data/facts)


def test_a_hot_gpu_and_older_hca_firmware_are_named_and_the_warm_gpu_is_not(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    warm = {"temperature.gpu": str(RECORDED_IDLE_C + 9)}
    hot = {"temperature.gpu": str(RECORDED_IDLE_C + 45)}
    older = {hca: {"fw_ver": "28.39.1002"} for hca in IB_HCAS}
    lab.make_gpu_node(1, GpuNode(infiniband=True, changes={1: warm}))
    lab.make_gpu_node(2, GpuNode(infiniband=True, changes={5: hot}))
    lab.make_gpu_node(3, GpuNode(infiniband=True, hca_changes=older))

    run, data = run_check(lab, tmp_path, "--only", "readings")

    assert run.returncode == 0, run.stdout + run.stderr  # warnings
    node1, node2, node3 = (n.address for n in lab.nodes)
    found = {r["details"]["item"]: r for r in results(data, "readings") if r["status"] != "pass"}
    assert set(found) == {"odd_reading", "odd_setting"}, found
    hot_gpu = found["odd_reading"]
    assert hot_gpu["hosts"] == [node2]
    assert hot_gpu["summary"] == (
        f"{node2} GPU 5 (serial 0000002000005): idle temperature 86 C; "
        f"like GPUs (NVIDIA H100 80GB HBM3): {RECORDED_IDLE_C} C to {RECORDED_IDLE_C + 9} C"
    )
    firmware = found["odd_setting"]
    assert firmware["hosts"] == [node3]
    [field] = firmware["details"]["fields"]
    assert (field["path"], field["usual"]) == ("fw_ver", "28.41.1000")
    assert sorted(p["part"] for p in field["parts"]) == [f"{hca} port 1" for hca in IB_HCAS]
    assert not any(node1 in r["hosts"] for r in results(data, "readings"))
    [read] = [r["details"] for r in results(data, "readings") if "undeclared" in r["details"]]
    assert read["undeclared"] == {}, "every field the probe reads on these nodes is declared"
    assert read["parts"] == {"GPU": 24, "InfiniBand/RoCE port": 15, "network card": 0, "node": 3}
