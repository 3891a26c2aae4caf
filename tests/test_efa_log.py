"""The AWS EFA driver's (efa) errors in the kernel log, read like the ConnectX driver's: healthy
boots and commands the device refused (real captures in tests/data/hardware/efa, SOURCES.md there)
give no finding; the error forms fail or warn the node, named with the driver, the PCI function
and the RDMA device. No public capture of an EFA device failing was found: those lines are written
from the driver's own format strings (amzn-drivers kernel/linux/efa/src/efa_com.c and efa_main.c,
cited at each), on the function and device of the healthy capture."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from checks.hardware.judge import judge_hardware
from checks.hardware.nic_log import ITEM, nic_findings
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.node import hardware

LOGS = Path(__file__).parent / "data" / "hardware" / "efa"
HEALTHY_BOOTS = (
    "dmesg_lkml_i4g_efa_boot_healthy.txt",
    "dmesg_amzn_drivers_114_efa_boot_infiniband_prefix.txt",
)
REFUSED = ("dmesg_neuron_trn1_dereg_mr_benign.txt", "dmesg_aws_ofi_nccl_22_alloc_pd_enomem.txt")
# The healthy capture's function and device, with the prefix dmesg gave its lines.
AT = "[  812.114211] efa 0000:00:1b.0 efa_0: "
AT_PCI = "[  812.114211] efa 0000:00:1b.0: "
# efa_com_wait_and_process_admin_cq_interrupts(), then efa_com_cmd_exec() and
# efa_com_create_qp() (efa_com_cmd.c): "The device didn't send any completion for admin cmd %s(%d)
# status %d (id: %d, sq producer: %d, sq consumer: %d, cq consumer: %d)", "Failed to process
# command %s (opcode %u) err %d", "Failed to create qp [%d]"; CREATE_QP is opcode 1
# (efa_admin_cmds_defs.h), status 2 EFA_CMD_SUBMITTED (efa_com.c).
TIMEOUT = (
    AT + "The device didn't send any completion for admin cmd CREATE_QP(1) status 2 (id: 7, sq producer: 42, "
    "sq consumer: 41, cq consumer: 41)",
    AT + "Failed to process command CREATE_QP (opcode 1) err -62",
    AT + "Failed to create qp [-62]",
)
# efa_com_submit_admin_cmd() for every command after: "Admin queue is closed", then
# efa_com_cmd_exec(): "Failed to submit command %s (opcode %u) err %d" (-ENODEV).
CLOSED = (AT + "Admin queue is closed", AT + "Failed to submit command REG_MR (opcode 7) err -19")


def read(name: str) -> str:
    return (LOGS / name).read_text()


def node(nic_events: list[dict[str, Any]]) -> NodeFacts:
    xid: dict[str, Any] = {
        "readable": True,
        "source": "dmesg",
        "events": [],
        "sxid_events": [],
        "nic_events": nic_events,
    }
    return NodeFacts({"gpus": [], "hardware": {"nvswitches": 0, "fabric_manager_running": False, "xid": xid}})


def judged(nic_events: list[dict[str, Any]]) -> list[CheckResult]:
    return judge_hardware({"node3": node(nic_events), "node4": node([])}, Config())


@pytest.mark.parametrize("name", HEALTHY_BOOTS + REFUSED)
def test_healthy_boots_and_commands_the_device_refused_are_no_fault(name: str) -> None:
    """Probe, irq setup and registration lines, in both print forms; a DEREG_MR refused in the race
    with a terminating process (AWS Neuron's documentation calls it benign), an ALLOC_PD refused for
    lack of resources (ENOMEM): the device answered."""
    text = read(name)
    assert "efa" in text
    assert hardware.parse_nic_lines(text) == []
    result, *others = judged(hardware.parse_nic_lines(text))
    assert (result.status, others) == ("pass", [])


def test_an_admin_command_timeout_fails_the_node_naming_the_efa_device_and_the_command() -> None:
    text = read("dmesg_lkml_i4g_efa_boot_healthy.txt") + "\n".join(TIMEOUT + CLOSED) + "\n"
    found = hardware.parse_nic_lines(text)
    assert [(e["driver"], e["pci"], e["hca"], e["kind"]) for e in found] == [
        ("efa", "0000:00:1b.0", "efa_0", "admin_cmd_timeout"),
        ("efa", "0000:00:1b.0", "efa_0", "admin_queue_closed"),
    ]
    (result,) = judged(found)
    assert (result.status, result.hosts, result.details["item"]) == ("fail", ("node3",), ITEM)
    assert result.summary == (
        "node3: efa 0000:00:1b.0 (efa_0): admin command timeout (CREATE_QP) in the kernel log since boot "
        "(+1 more)"
    )
    assert [(e["driver"], e["kind"], e["status"]) for e in result.details["events"]] == [
        ("efa", "admin_cmd_timeout", "fail"),
        ("efa", "admin_queue_closed", "fail"),
    ]


def test_the_old_kernels_infiniband_prefix_is_read_and_its_function_found_in_sysfs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without ibdev_err() the driver prints through the RDMA device (kcompat.h): "infiniband efa_0:",
    as the #114 capture's registration line; efa_com_wait_and_process_admin_cq_polling() prints
    "Wait for completion (polling) timeout"."""
    boot = read("dmesg_amzn_drivers_114_efa_boot_infiniband_prefix.txt")
    text = boot + "[40102.000117] infiniband efa_0: Wait for completion (polling) timeout\n"
    (tmp_path / "devices" / "0000:00:07.0").mkdir(parents=True)
    (tmp_path / "infiniband" / "efa_0").mkdir(parents=True)
    os.symlink("../../devices/0000:00:07.0", tmp_path / "infiniband" / "efa_0" / "device")
    monkeypatch.setattr(hardware, "find_tool", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(hardware, "run_command", lambda argv, timeout=0: text)
    monkeypatch.setattr(hardware, "SYS_CLASS_INFINIBAND", str(tmp_path / "infiniband"))
    xid = hardware.hardware_facts()["xid"]
    assert xid["nic_events"] == [
        {
            "driver": "efa",
            "kind": "admin_cmd_timeout",
            "line": "Wait for completion (polling) timeout",
            "hca": "efa_0",
            "pci": "0000:00:07.0",
        }
    ]
    (result,) = nic_findings("node3", xid)
    assert (
        result.summary
        == "node3: efa 0000:00:07.0 (efa_0): admin command timeout in the kernel log since boot"
    )
    # Where sysfs names no function, the device alone.
    (unresolved,) = nic_findings("node3", {**xid, "nic_events": [{**xid["nic_events"][0], "pci": None}]})
    assert unresolved.summary.startswith("node3: efa efa_0: admin command timeout")


def test_a_probe_that_gave_up_fails_unless_the_function_registered_its_device_later() -> None:
    """efa_probe_device(): "EFA device init failed" after efa_com_dev_reset()'s "Reset indication
    didn't turn on"; a reset that timed out defers the probe (-EPROBE_DEFER), and the retry's
    registration (the healthy capture's own line) clears them."""
    failed = AT_PCI + "Reset indication didn't turn on\n" + AT_PCI + "EFA device init failed\n"
    assert [e["kind"] for e in hardware.parse_nic_lines(failed)] == ["reset_failed", "probe_failed"]
    (result,) = judged(hardware.parse_nic_lines(failed))
    assert result.status == "fail"
    assert result.summary.startswith("node3: efa 0000:00:1b.0: device reset failed in the kernel log")
    retried = failed + read("dmesg_lkml_i4g_efa_boot_healthy.txt")
    assert hardware.parse_nic_lines(retried) == []
    # A registration of another function clears nothing.
    other = failed + "[    9.000001] efa 0000:00:1c.0 efa_1: IB device registered\n"
    assert len(hardware.parse_nic_lines(other)) == 2


def test_an_event_the_driver_has_no_handler_for_warns() -> None:
    """unimplemented_aenq_handler(): the device's fatal-error and warning reports land there."""
    line = AT + "Unknown event was received or event with unimplemented handler"
    (result,) = judged(hardware.parse_nic_lines(line))
    assert (result.status, result.details["kinds"]) == ("warn", ["device_event"])


def test_ena_lines_of_the_same_wording_are_not_efa_and_each_driver_is_named() -> None:
    """A real ENA capture (its register reads timing out, its init failing) is another driver's;
    a ConnectX line beside an EFA one keeps its own driver's name."""
    assert hardware.parse_nic_lines(read("ena_amzn_drivers_162_reg_read_timeout.txt")) == []
    mlx5 = (
        Path(__file__).parent / "data" / "hardware" / "mlx5" / "pdsh_dmesg_create_dct_cmd_timeout.txt"
    ).read_text()
    found = hardware.parse_nic_lines(mlx5 + CLOSED[0] + "\n")
    assert {(e["driver"], e["kind"]) for e in found} == {
        ("mlx5_core", "cmd_timeout"),
        ("efa", "admin_queue_closed"),
    }
    assert hardware.parse_nic_lines(mlx5) == [e for e in found if e["driver"] == "mlx5_core"]
    (result,) = judged(found)
    assert result.summary.startswith("node3: efa 0000:00:1b.0 (efa_0): admin queue closed in the kernel log")
    assert [e["driver"] for e in result.details["events"]] == ["efa", "mlx5_core"]


def test_an_older_probes_events_without_a_driver_are_mlx5_cores() -> None:
    (result,) = judged([{"pci": "0000:61:00.0", "kind": "cmd_timeout", "line": "..."}])
    assert result.summary.startswith("node3: mlx5_core 0000:61:00.0:")
