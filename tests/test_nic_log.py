"""The ConnectX driver's (mlx5_core) errors in the kernel log, as nodes really print them: the
probe's reader on captures published with their dmesg, ``dmesg --ctime``, journal, ``pdsh`` and
line-number prefixes, and the ``hardware`` judge naming the node and the card (captures in
tests/data/hardware/mlx5, see its SOURCES.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checks.hardware.judge import judge_hardware
from checks.hardware.nic_log import ITEM, KINDS, nic_findings
from checks.hardware.present import ADVICE
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.node import hardware
from preflight.node.gathering import Unavailable

LOGS = Path(__file__).parent / "data" / "hardware" / "mlx5"
FAULTS = (
    "dmesg_cx4lx_vf_fatal_miss_count_cmd_timeout.txt",
    "dmesg_cx5_cx7_dpc_pci_error.txt",
    "pdsh_dmesg_create_dct_cmd_timeout.txt",
    "dmesg_cx6_x4_slot_insufficient_power.txt",
    "dmesg_ctime_host_insufficient_power_27w.txt",
)
HEALTHY = (
    "dmesg_cx6_x16_slot_healthy.txt",
    "numbered_dmesg_gpu_node_power_not_advertised.txt",
    "journal_cx7_umbriel_access_reg_benign.txt",
)


def read(name: str) -> str:
    return (LOGS / name).read_text()


def events(name: str) -> list[dict[str, Any]]:
    return hardware.parse_nic_lines(read(name))


def node(nic_events: list[dict[str, Any]], source: str | None = "dmesg") -> NodeFacts:
    """A node without GPUs whose kernel log (read with ``source``) gave ``nic_events``."""
    xid: dict[str, Any] = {"readable": True, "events": [], "sxid_events": [], "nic_events": nic_events}
    if source is not None:
        xid["source"] = source
    return NodeFacts({"gpus": [], "hardware": {"nvswitches": 0, "fabric_manager_running": False, "xid": xid}})


def judged(nic_events: list[dict[str, Any]], source: str | None = "dmesg") -> list[CheckResult]:
    """The hardware judge's findings for node3 with ``nic_events`` beside a node with none."""
    return judge_hardware({"node3": node(nic_events, source), "node4": node([])}, Config())


def facts_of(text: str, monkeypatch: pytest.MonkeyPatch, sysfs: Path) -> dict[str, Any]:
    """``hardware.xid`` as the node's probe reports it for a kernel log of ``text``, with ``sysfs``
    as its /sys/bus/pci/devices."""
    monkeypatch.setattr(hardware, "find_tool", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(hardware, "run_command", lambda argv, timeout=0: text)
    monkeypatch.setattr(hardware, "SYS_BUS_PCI", str(sysfs))
    xid: dict[str, Any] = hardware.hardware_facts()["xid"]
    return xid


def rdma_device(sysfs: Path, pci: str, name: str) -> None:
    """Give the PCI function ``pci`` the RDMA device ``name``, as the kernel lists it in sysfs."""
    (sysfs / pci / "infiniband" / name).mkdir(parents=True)


def test_a_card_whose_firmware_stopped_answering_fails_its_node_named_with_its_rdma_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    text = read("dmesg_cx4lx_vf_fatal_miss_count_cmd_timeout.txt")
    assert [e["kind"] for e in hardware.parse_nic_lines(text)] == [
        "fw_fatal",
        "fw_syndrome",
        "health_compromised",
        "fw_syndrome",
        *["cmd_timeout"] * 3,
    ]
    rdma_device(tmp_path, "0000:00:00.0", "mlx5_0")
    xid = facts_of(text, monkeypatch, tmp_path)
    assert {(e["pci"], e.get("hca")) for e in xid["nic_events"]} == {("0000:00:00.0", "mlx5_0")}
    assert xid["nic_events"][2]["line"] == (
        "poll_health:709:(pid 0): device's health compromised - reached miss count"
    )
    # The mlx5_ib line of the same log ("infiniband mlx5_0: destroy_qp_common ...") is not the card's.
    assert not any("destroy_qp_common" in e["line"] for e in xid["nic_events"])

    result, *others = judge_hardware(
        {"node3": NodeFacts({"gpus": [], "hardware": {"xid": xid}}), "node4": node([])}, Config()
    )
    assert others == []
    assert (result.status, result.hosts, result.details["item"]) == ("fail", ("node3",), ITEM)
    assert result.summary == (
        "node3: mlx5_core 0000:00:00.0 (mlx5_0): firmware fatal error (health compromised) "
        "in the kernel log since boot (+3 more)"
    )
    assert result.details["kinds"] == ["health_compromised", "fw_fatal", "fw_syndrome", "cmd_timeout"]
    assert [(e["kind"], e["status"], e["lines"]) for e in result.details["events"]] == [
        ("health_compromised", "fail", 1),
        ("fw_fatal", "fail", 1),
        ("fw_syndrome", "fail", 2),
        ("cmd_timeout", "warn", 3),
    ]
    assert result.details["events"][2]["line"].endswith("synd 0xff: unrecognized error")
    assert result.details["source"] == "dmesg"


def test_a_pci_channel_error_fails_the_node_and_keeps_the_pci_address_where_sysfs_names_no_device() -> None:
    found = events("dmesg_cx5_cx7_dpc_pci_error.txt")
    assert {e["pci"] for e in found} == {"0004:01:00.0", "0004:01:00.1"}
    assert {e["kind"] for e in found} == {"pci_error", "fw_fatal", "internal_error"}
    # The recovery's ordinary lines (E-Switch, pages, "interface is down, NOP") are not errors.
    assert not any("E-Switch" in e["line"] or "NOP" in e["line"] for e in found)
    (result,) = judged(found)
    assert result.status == "fail"
    assert result.summary == (
        "node3: mlx5_core 0004:01:00.0: PCI channel error in the kernel log since boot (+4 more)"
    )
    assert [(e["pci"], e["hca"], e["kind"]) for e in result.details["events"]] == [
        ("0004:01:00.0", None, "pci_error"),
        ("0004:01:00.1", None, "pci_error"),
        ("0004:01:00.1", None, "fw_fatal"),
        ("0004:01:00.0", None, "internal_error"),
        ("0004:01:00.1", None, "internal_error"),
    ]


def test_firmware_command_timeouts_warn_naming_the_command() -> None:
    found = events("pdsh_dmesg_create_dct_cmd_timeout.txt")
    # "No done completion" comes before each timeout line of the same command: only the timeouts count.
    assert [(e["pci"], e["kind"]) for e in found] == [("0000:61:00.0", "cmd_timeout")] * 3
    (result,) = judged(found)
    assert (result.status, result.details["kinds"], result.details["events"][0]["lines"]) == (
        "warn",
        ["cmd_timeout"],
        3,
    )
    assert result.summary == (
        "node3: mlx5_core 0000:61:00.0: firmware command timeout (CREATE_DCT) in the kernel log since boot"
    )


@pytest.mark.parametrize(
    ("name", "pci", "watts"),
    [
        ("dmesg_cx6_x4_slot_insufficient_power.txt", "0000:04:00.0", "25W"),
        ("dmesg_ctime_host_insufficient_power_27w.txt", "0000:5c:00.0", "27W"),
    ],
)
def test_a_slot_short_of_power_warns_with_the_power_it_gives(name: str, pci: str, watts: str) -> None:
    # The card's boot lines beside it (firmware version, E-Switch, cable plugged, link down) are not kept.
    (found,) = events(name)
    assert (found["pci"], found["kind"]) == (pci, "insufficient_power")
    (result,) = judged([found], source="journalctl")
    assert result.status == "warn"
    assert result.summary == (
        f"node3: mlx5_core {pci}: insufficient power on the PCIe slot ({watts}) in the kernel log since boot"
    )


@pytest.mark.parametrize("name", HEALTHY)
def test_a_healthy_cards_boot_and_runtime_lines_give_no_event_and_no_finding(name: str) -> None:
    """Firmware version, bandwidth, E-Switch, rate limit, cable plugged, slot power advertised or not,
    link up and down, and a register read the firmware refuses (mlx5_cmd_out_err): none is a fault."""
    assert "mlx5_core" in read(name)
    assert events(name) == []
    result, *notes = judged([])
    assert (result.status, notes) == ("pass", [])


def test_each_fault_capture_gives_one_finding_of_its_node() -> None:
    for name in FAULTS:
        results = nic_findings("node3", {"readable": True, "source": "dmesg", "nic_events": events(name)})
        assert [(r.hosts, r.details["item"]) for r in results] == [(("node3",), ITEM)], name


def test_journal_syslog_and_dmesg_prefixes_read_alike() -> None:
    """Whatever precedes "mlx5_core" does not matter: the captures' own lines under other prefixes."""
    line = read("dmesg_cx4lx_vf_fatal_miss_count_cmd_timeout.txt").splitlines()[16]
    bare = line[line.index("mlx5_core") :]
    power = read("dmesg_ctime_host_insufficient_power_27w.txt").strip()
    power_bare = power[power.index("mlx5_core") :]
    for message in (bare, power_bare):
        expected = hardware.parse_nic_lines(message)
        assert len(expected) == 1
        for prefix in (
            "[   47.099220] ",
            "[Mon Jun 15 10:02:11 2020] ",
            "Jun 15 10:02:11 gpu7 kernel: ",
            "2020-06-15T10:02:11.123456+02:00 gpu7 kernel: ",
            "<3>Jun 15 10:02:11 gpu7 kernel: [   47.099220] ",
            "kern  :err   : [   47.099220] ",
            "gpu7: ",
        ):
            assert hardware.parse_nic_lines(prefix + message) == expected, prefix


def test_a_node_whose_log_is_not_readable_or_carries_no_nic_events_says_nothing_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(argv: list[str], timeout: float = 0) -> str:
        raise Unavailable(f"{argv[0]} refused")

    monkeypatch.setattr(hardware, "find_tool", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(hardware, "run_command", refused)
    xid = hardware.hardware_facts()["xid"]
    assert "nic_events" not in xid
    unreadable = NodeFacts({"gpus": [], "hardware": {"xid": xid}})
    (result,) = judge_hardware({"node3": unreadable}, Config())
    assert result.status == "pass"
    reason = "/usr/bin/dmesg refused; /usr/bin/journalctl refused"
    assert result.details["xid_not_readable"] == {"node3": reason}
    assert nic_findings("node3", xid) == []
    # An older probe's facts, without the key: nothing either.
    older = {"readable": True, "source": "dmesg", "events": [], "sxid_events": []}
    assert nic_findings("node3", older) == []


def test_a_log_without_a_known_boot_source_is_not_said_to_span_the_boot() -> None:
    (result,) = judged(events("pdsh_dmesg_create_dct_cmd_timeout.txt"), source=None)
    assert result.summary.endswith("firmware command timeout (CREATE_DCT) in the kernel log")
    assert result.details["source"] is None


def test_a_form_a_newer_probe_reports_warns_under_its_own_name() -> None:
    (result,) = judged([{"pci": "0000:3b:00.0", "kind": "module_overheat", "line": "..."}])
    assert result.status == "warn"
    assert "mlx5_core 0000:3b:00.0: module overheat in the kernel log" in result.summary


def test_every_form_the_probe_reads_is_judged_and_the_finding_has_advice() -> None:
    assert [name for name, _ in hardware.MLX5_ERRORS] == [
        "health_compromised",
        "pci_error",
        "fw_fatal",
        "fw_syndrome",
        "internal_error",
        "cmd_timeout",
        "insufficient_power",
    ]
    assert {name for catalogue in hardware.NIC_ERRORS.values() for name, _ in catalogue} == set(KINDS)
    assert {status for status, _ in KINDS.values()} == {"fail", "warn"}
    assert "mlxfwreset" in ADVICE[ITEM]
    assert "rmmod efa" in ADVICE[ITEM]
