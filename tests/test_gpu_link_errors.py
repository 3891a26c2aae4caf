"""Each GPU's PCIe replays and NVLink errors since the driver loaded (checks/hardware/
gpu_link_errors.py), against the GPUs of the same model. The nodes are the recorded H100 node of
tests/data/runs/h100_node.json; the counts are NVML's field values as preflight/node/nvml.py reads
them (tests/test_node_facts.py reads them through a fake pynvml), or nvidia-smi's as
preflight/node/smi_counters.py reads them (tests/test_smi_link_errors.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from checks.hardware import judge_hardware
from checks.hardware.gpu_link_errors import judge_gpu_link_errors
from preflight.config import Config
from preflight.facts import NodeFacts

H100 = json.loads((Path(__file__).parent / "data" / "runs" / "h100_node.json").read_text())
QUIET = {
    "pcie_replays": 0,
    "nvlink_crc_flit": 0,
    "nvlink_crc_data": 0,
    "nvlink_replay": 0,
    "nvlink_recovery": 0,
}


def _node(
    counts: dict[int, dict[str, int]] | None = None, everywhere: dict[str, int] | None = None
) -> NodeFacts:
    facts: dict[str, Any] = copy.deepcopy(H100)
    for gpu in facts["gpus"]:
        gpu["link_errors"] = {**QUIET, **(everywhere or {}), **(counts or {}).get(gpu["index"], {})}
    return NodeFacts(facts)


def test_gpus_that_count_alike_say_nothing() -> None:
    assert judge_gpu_link_errors({f"gpu{i}": _node() for i in range(1, 5)}) == []
    # Every GPU replayed a few times, as links do: nothing stands out.
    assert (
        judge_gpu_link_errors({f"gpu{i}": _node(everywhere={"pcie_replays": 40}) for i in range(1, 5)}) == []
    )


def test_a_gpu_that_replays_far_more_than_its_like_gpus_or_whose_nvlink_recovered_is_a_note() -> None:
    nodes = {f"gpu{i}": _node() for i in range(1, 5)}
    nodes["gpu2"] = _node({1: {"pcie_replays": 4000}, 3: {"nvlink_recovery": 1}})
    [note] = judge_gpu_link_errors(nodes)
    assert note.is_note and note.hosts == ("gpu2",) and note.details["gpus"] == [1, 3]
    assert note.summary == (
        "gpu2: since the driver loaded, GPU 1: PCIe replays 4000 (like GPUs' median 0); "
        "GPU 3: NVLink recoveries 1 (like GPUs' median 0)"
    )
    assert "gpu_link_errors" in [r.details.get("item") for r in judge_hardware(nodes, Config())]


def test_gpus_of_another_model_are_not_like_and_gpus_without_counters_are_not_judged() -> None:
    nodes = {f"gpu{i}": _node(everywhere={"nvlink_crc_flit": 500}) for i in range(1, 4)}
    other = copy.deepcopy(H100)
    for gpu in other["gpus"]:
        gpu["name"] = "NVIDIA A100-SXM4-80GB"
        gpu["link_errors"] = dict(QUIET)
    nodes["a100"] = NodeFacts(other)
    assert judge_gpu_link_errors(nodes) == []  # the H100s' 500 are compared with H100s only
    assert (
        judge_gpu_link_errors({"a": NodeFacts(copy.deepcopy(H100)), "b": NodeFacts(copy.deepcopy(H100))})
        == []
    )
