"""The GPU path end to end through real SSH, on lab nodes made to look like 8-GPU H100 nodes.

Each node serves a capture built from a real H100's nvidia-smi output (every field the driver
offers; unknown fields refused as the real one does) and the driver's proc file, in its own
mount namespace (tests/lab/gpu.py). The probe reaches them exactly as on real nodes: pynvml
cannot load NVML there, so it reads nvidia-smi, which is the usual path on nodes whose
training environment lacks nvidia-ml-py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checks import gpu_memory
from preflight.model import RunReport
from preflight.view import Chart, MeterGrid
from reports import html
from tests.lab import GpuNode, MakeLab
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab


def test_a_pending_remap_is_named_and_a_healthy_remap_history_is_not(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    lab.make_gpu_node(1, GpuNode())
    # node2: GPU 3 has a row remap pending (takes effect at the next GPU reset): not fit to run.
    pending = {"remapped_rows.pending": "Yes", "remapped_rows.uncorrectable": "1"}
    lab.make_gpu_node(2, GpuNode(changes={3: pending}))
    # node3: rows remapped in the past and lifetime uncorrected errors that remapping handled,
    # nothing pending, nothing since boot: a healthy A100/H100 looks like this.
    history = {
        "remapped_rows.correctable": "2",
        "remapped_rows.uncorrectable": "1",
        "ecc.errors.uncorrected.aggregate.total": "3",
        "ecc.errors.uncorrected.aggregate.dram": "3",
    }
    lab.make_gpu_node(3, GpuNode(changes={5: history}))

    run, data = run_check(lab, tmp_path)

    assert run.returncode == 1, run.stdout + run.stderr
    failed = [r for r in results(data, "gpu_memory") if r["status"] == "fail"]
    node2, node3 = lab.node(2).address, lab.node(3).address
    assert [r["hosts"] for r in failed] == [[node2]], failed
    assert "GPU 3" in failed[0]["summary"] and "pending" in failed[0]["summary"]
    assert not any(node3 in r["hosts"] for r in results(data, "gpu_memory") if r["status"] == "fail")
    for host in data["hosts"]:
        gpus = host["facts"]["gpus"]
        assert len(gpus) == 8 and {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}, host["name"]
        assert host["facts"]["driver"]["version"] == "565.57.01"
    # Every node shows the same driver: nothing to report there.
    assert all(r["status"] in ("pass", "warn") for r in results(data, "versions"))
    # The training job cannot use these GPUs (no CUDA here): it says why instead of quietly
    # measuring the CPU: once, in the job's first check; the job's other checks refer to it.
    (job,) = results(data, "compute")
    assert job["status"] == "fail" and sorted(job["hosts"]) == sorted(n.address for n in lab.nodes)
    assert "8 GPUs listed, torch 2.13.0+cpu sees no CUDA device" in job["summary"]
    for later in ("intranode", "allreduce", "ddp"):
        (refers,) = results(data, later)
        assert refers["status"] == "skip" and "see compute" in refers["summary"] and not refers["hosts"]
    # The report shows every GPU of every node, the pending remap marked.
    report = RunReport.from_dict(data)
    (chart,) = [b for b in gpu_memory.PRESENTATION.evidence(report) if isinstance(b, Chart)]
    assert isinstance(chart.figure, MeterGrid)
    # The node with the fault on its own row, the two alike folded into one.
    subnet = node2.rsplit(".", 1)[0]
    assert chart.figure.rows == [node2, f"{subnet}.[11,13] \u00d72"]
    assert len(chart.figure.meters) == 2 * 8
    page = html.render(report)
    assert "row remapping pending" in page
