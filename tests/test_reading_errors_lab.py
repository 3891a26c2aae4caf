"""A GPU that answers nvidia-smi with errors, end to end through real SSH on lab nodes made to look
like 8-GPU H100 nodes (tests/lab/gpu.py): its stand-in nvidia-smi answers every field of one GPU
with "[Unknown Error]" (the words of tests/data/hardware/reading_errors), beside nodes whose fields
read "[N/A]" and "[Requested functionality has been deprecated]" as the recorded H100's do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import GpuNode, MakeLab
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab


def test_a_gpu_answering_only_errors_is_named_once_with_its_node_and_the_look_alikes_are_not(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    lab.make_gpu_node(1, GpuNode())
    lab.make_gpu_node(2, GpuNode(errors={3: "Unknown Error"}))
    # A GPU whose temperature and power read N/A: fields it does not report, no error.
    lab.make_gpu_node(3, GpuNode(changes={2: {"temperature.gpu": "[N/A]", "power.draw": "[N/A]"}}))

    run, data = run_check(lab, tmp_path, "--only", "hardware,gpu_memory")

    assert run.returncode == 1, run.stdout + run.stderr
    node1, node2, node3 = (n.address for n in lab.nodes)
    facts = {h["name"]: h["facts"] for h in data["hosts"]}
    lost = facts[node2]["gpus"][3]
    assert lost["index"] == 3 and set(lost["errors"].values()) == {"Unknown Error"}
    assert [g.get("errors") for g in facts[node3]["gpus"]] == [None] * 8
    assert facts[node3]["gpus"][2]["temperature_c"] is None
    (found,) = [r for r in results(data, "hardware") if r["status"] != "pass"]
    assert (found["details"]["item"], found["hosts"], found["details"]["gpus"]) == (
        "gpu_unreadable",
        [node2],
        [3],
    )
    assert found["summary"] == (
        f'{node2}: GPU 3 answers "Unknown Error" for every reading: '
        "drain the node and reset or replace the GPU"
    )
    # gpu_memory counts it on its node and calls it neither another model nor free.
    (memory,) = results(data, "gpu_memory")
    assert memory["status"] == "pass" and memory["summary"].startswith("23 GPUs on 3 nodes (8 per node")
    assert f"not judged: {node2} GPU 3," in memory["summary"]
    assert not any(node1 in r["hosts"] or node3 in r["hosts"] for r in data["results"])
