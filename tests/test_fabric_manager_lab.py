"""The fabric manager end to end through real SSH, on lab nodes made to look like 8-GPU H100 nodes with
four NVSwitches (tests/lab/gpu.py, tests/lab/fabric_manager.py), whose fabric manager answers through
stand-in commands with what real ones printed (tests/data/hardware/fabric_manager, SOURCES.md): the
node whose unit failed, its GPUs waiting for the fabric, is failed once with the unit's state and
the cause its journal gives; the two whose unit is active at the driver's version, no process of the
fabric manager's name in sight, are not named."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflight.node.nvidia import parse_nvidia_driver_version
from tests.lab import GpuNode, MakeLab
from tests.lab.fabric_manager import DATA, FabricManagerNode, install
from tests.lab.gpu import RECORDED_DRIVER
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab

DRIVER = parse_nvidia_driver_version(RECORDED_DRIVER.read_text())
ACTIVE = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "Result": "success"}
FAILED = {
    "LoadState": "loaded", "ActiveState": "failed", "SubState": "failed", "Result": "exit-code",
    "ExecMainStatus": "1",
}  # fmt: skip
# The journal of a fabric manager that came up: the B300 status's lines below its header.
STARTED = (DATA / "systemctl_status_active_b300.txt").read_text().split("\n\n", 1)[1]
# One that could not query its NVSwitches (data-infra/cube-studio#29).
REFUSED = (DATA / "journal_nothing_to_do_rtx4090.txt").read_text()


def test_a_failed_fabric_manager_fails_its_node_once_and_active_ones_say_nothing(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    assert DRIVER is not None
    lab = make_lab(3)
    waiting = {"fabric.state": "In Progress", "fabric.status": "N/A"}
    nodes = (
        (GpuNode(changes=dict.fromkeys(range(8), waiting)), FabricManagerNode(FAILED, DRIVER, REFUSED)),
        (GpuNode(), FabricManagerNode(ACTIVE, DRIVER, STARTED)),
        (GpuNode(), FabricManagerNode(ACTIVE, DRIVER, STARTED)),
    )
    for target, (gpus, fm) in zip(lab.nodes, nodes, strict=True):
        lab.make_gpu_node(target, gpus)
        lab.exec(target, ["sh", "-c", " && ".join(install(target.node_dir / "fabric_manager", fm))])

    run, data = run_check(lab, tmp_path, "--only", "hardware")

    assert run.returncode == 1, run.stdout + run.stderr
    node1, node2, node3 = (n.address for n in lab.nodes)
    (failed,) = [r for r in results(data, "hardware") if r["status"] != "pass"]
    assert (failed["status"], failed["hosts"], failed["details"]["item"]) == (
        "fail",
        [node1],
        "fabric_manager",
    )
    assert failed["summary"] == (
        f"{node1}: 4 NVSwitches but the fabric manager is not running: nvidia-fabricmanager is failed "
        '(exit-code, status 1); first error in its log since it started: "Sep 18 03:19:01 ubuntu2404 '
        "nvidia-fabricmanager-start.sh[4756]: request to query NVSwitch device information from NVSwitch "
        'driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]"; all 8 GPUs not registered '
        "with the fabric"
    )
    facts = {h["name"]: h["facts"]["hardware"] for h in data["hosts"]}
    for healthy in (node2, node3):
        assert facts[healthy]["fabric_manager_running"] is False
        fm = facts[healthy]["fabric_manager"]
        assert (fm["unit"]["active_state"], fm["version"], fm["log"]["source"]) == (
            "active",
            DRIVER,
            "journalctl",
        )
        assert fm["log"]["lines"] == []
