"""The hardware audit end to end through real SSH, on lab nodes made to look like 8-GPU H100 nodes
with four InfiniBand HCAs each (tests/lab/gpu.py: a recorded H100's nvidia-smi fields served per
GPU, a /sys/class/infiniband tree in each node's own mount namespace). Each fault is named on its
node, with the GPU or port; the healthy look-alike node is not named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import GpuNode, MakeLab
from tests.lab.gpu import IB_PORT_DOWN
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab


def test_a_narrow_gpu_link_a_gpu_in_slowdown_and_a_port_down_are_each_named(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(4)
    narrow = {"pcie.link.width.current": "8"}
    slowdown = {
        "clocks_event_reasons.active": "0x0000000000000008",
        "clocks_event_reasons.hw_slowdown": "Active",
    }
    lab.make_gpu_node(1, GpuNode(infiniband=True, changes={2: narrow}))
    lab.make_gpu_node(2, GpuNode(infiniband=True, changes={6: slowdown}))
    lab.make_gpu_node(3, GpuNode(infiniband=True, ib_changes={"mlx5_2": IB_PORT_DOWN}))
    lab.make_gpu_node(4, GpuNode(infiniband=True))

    run, data = run_check(lab, tmp_path, "--only", "hardware")

    assert run.returncode == 1, run.stdout + run.stderr
    found = {r["details"]["item"]: r for r in results(data, "hardware") if r["status"] != "pass"}
    assert set(found) == {"gpu_pcie_width", "gpu_slowdown", "ib_port_down"}, found
    node1, node2, node3, node4 = (n.address for n in lab.nodes)
    width = found["gpu_pcie_width"]
    assert width["hosts"] == [node1] and width["details"]["gpus"] == [2]
    assert width["summary"] == (
        f"{node1}: GPU 2 (serial 0000001000002) PCIe x8 of x16, Gen5 of Gen5 (fewer lanes than it can use)"
    )
    slow = found["gpu_slowdown"]
    assert slow["hosts"] == [node2] and slow["details"]["gpus"] == [6]
    assert slow["summary"].startswith(f"{node2}: GPU 6 (serial 0000002000006) in hardware slowdown at ")
    down = found["ib_port_down"]
    assert down["hosts"] == [node3]
    assert down["summary"].startswith(f"{node3}: mlx5_2 port 1 is DOWN (physical state Disabled), ACTIVE on ")
    assert not any(node4 in r["hosts"] for r in results(data, "hardware"))
    facts = {h["name"]: h["facts"] for h in data["hosts"]}
    assert [p["state"] for p in facts[node4]["net"]["ib_devices"]] == ["ACTIVE"] * 5
    assert facts[node4]["hardware"]["xid"]["readable"] in (True, False)


def test_gpus_that_never_registered_with_their_fabric_are_named_and_the_alike_node_is_not(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    """The fabric manager of an NVSwitch node that runs but has not registered the GPUs (a version
    that does not match the driver's, a registration stuck after an upgrade): nvidia-smi says
    "In Progress" for each GPU, and CUDA will not start on them."""
    lab = make_lab(2)
    stuck = {"fabric.state": "In Progress", "fabric.status": "N/A"}
    lab.make_gpu_node(1, GpuNode(changes=dict.fromkeys(range(8), stuck)))
    lab.make_gpu_node(2, GpuNode())

    run, data = run_check(lab, tmp_path, "--only", "hardware")

    assert run.returncode == 1, run.stdout + run.stderr
    node1, node2 = (n.address for n in lab.nodes)
    (found,) = [r for r in results(data, "hardware") if r["status"] != "pass"]
    assert (found["details"]["item"], found["hosts"]) == ("gpu_fabric", [node1])
    assert found["summary"] == (
        f"{node1}: all 8 GPUs not registered with the NVSwitch fabric (registration in progress): "
        "CUDA cannot start on them"
    )
    facts = {h["name"]: h["facts"] for h in data["hosts"]}
    assert {g["fabric"]["state"] for g in facts[node2]["gpus"]} == {"completed"}


def test_the_job_is_not_launched_where_cuda_cannot_start_and_says_why_once(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    """One root cause, one finding: the hardware check names the unregistered GPUs; the job, which
    would only fail on them, is not launched and points there."""
    lab = make_lab(2)
    lab.make_gpu_node(1, GpuNode(changes={3: {"fabric.state": "Not Started", "fabric.status": "N/A"}}))
    lab.make_gpu_node(2, GpuNode())

    run, data = run_check(lab, tmp_path, "--only", "hardware,compute,allreduce")

    assert run.returncode == 1, run.stdout + run.stderr
    node1 = lab.nodes[0].address
    failed = [r for r in data["results"] if r["status"] == "fail"]
    assert [(r["check"], r["details"]["item"], r["hosts"]) for r in failed] == [
        ("hardware", "gpu_fabric", [node1])
    ]
    (compute,) = results(data, "compute")
    assert (compute["status"], compute["summary"]) == (
        "skip",
        f"not launched: {node1}: GPUs not registered with the NVSwitch fabric, so CUDA cannot start "
        "(see hardware)",
    )
    (allreduce,) = results(data, "allreduce")
    assert allreduce["summary"] == "not run: the job did not start (see compute)"

    # Without the hardware check, the job's own finding says it, and fails the run.
    run, data = run_check(lab, tmp_path, "--only", "allreduce")
    assert run.returncode == 1, run.stdout + run.stderr
    (alone,) = results(data, "allreduce")
    assert (alone["status"], alone["hosts"]) == ("fail", [node1])


def test_a_gpu_with_nvlinks_down_is_named_and_the_alike_node_is_not(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(2)
    lab.make_gpu_node(1, GpuNode(inactive_links={5: (3, 7)}))
    lab.make_gpu_node(2, GpuNode())

    run, data = run_check(lab, tmp_path, "--only", "hardware")

    assert run.returncode == 1, run.stdout + run.stderr
    node1, node2 = (n.address for n in lab.nodes)
    (found,) = [r for r in results(data, "hardware") if r["status"] != "pass"]
    assert (found["details"]["item"], found["hosts"]) == ("gpu_nvlink", [node1])
    assert found["summary"] == (
        f"{node1}: GPU 5 (serial 0000001000005) NVLinks 3 and 7 inactive, 16 up "
        "(the other NVIDIA H100 80GB HBM3 GPUs have 18 up)"
    )
    facts = {h["name"]: h["facts"] for h in data["hosts"]}
    assert [g["nvlink"] for g in facts[node2]["gpus"]] == [{"active": 18, "inactive": []}] * 8


def test_a_front_end_bond_at_half_rate_passes_and_a_compute_port_down_is_named(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    """Each node carries four ConnectX-7 on InfiniBand at 400 Gb/s and a BlueField-3 bond on
    Ethernet at 200 Gb/s: the bond is judged against the bonds, not against the compute ports."""
    lab = make_lab(3)
    lab.make_gpu_node(1, GpuNode(infiniband=True))
    lab.make_gpu_node(2, GpuNode(infiniband=True, ib_changes={"mlx5_1": IB_PORT_DOWN}))
    lab.make_gpu_node(3, GpuNode(infiniband=True))

    run, data = run_check(lab, tmp_path, "--only", "hardware")

    assert run.returncode == 1, run.stdout + run.stderr
    node1, node2, _ = (n.address for n in lab.nodes)
    (down,) = [r for r in results(data, "hardware") if r["status"] != "pass"]
    assert (down["details"]["item"], down["hosts"], down["details"]["ports"]) == (
        "ib_port_down", [node2], ["mlx5_1 port 1"],
    )  # fmt: skip
    assert down["summary"].startswith(f"{node2}: mlx5_1 port 1 is DOWN (physical state Disabled), ACTIVE on ")
    facts = {h["name"]: h["facts"] for h in data["hosts"]}
    bond = facts[node1]["net"]["ib_devices"][-1]
    assert (bond["name"], bond["link_layer"], bond["rate"], bond["hca_type"]) == (
        "mlx5_bond_0", "Ethernet", "200 Gb/sec (2X NDR)", "MT41692",
    )  # fmt: skip


def test_a_gpu_with_a_lowered_power_limit_is_named_with_the_command_that_restores_it(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(2)
    lowered = {"enforced.power.limit": "500.00 W", "power.limit": "500.00 W"}
    lab.make_gpu_node(1, GpuNode(changes={4: lowered}))
    lab.make_gpu_node(2, GpuNode())

    run, data = run_check(lab, tmp_path, "--only", "hardware")

    assert run.returncode == 0, run.stdout + run.stderr
    (warned,) = [r for r in results(data, "hardware") if r["status"] == "warn"]
    node1 = lab.nodes[0].address
    assert warned["hosts"] == [node1] and warned["details"]["item"] == "gpu_power_limit"
    assert warned["details"]["values"] == {"500 W": {node1: [4]}}
    assert "nvidia-smi -i 4 -pl 700" in warned["summary"]
