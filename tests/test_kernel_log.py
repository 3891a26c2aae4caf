"""The kernel log as nodes really print it: XID lines and GPUs fallen off the bus under dmesg,
dmesg --ctime and journal prefixes, judged by NVIDIA's XID catalogue, and NVSwitch SXID lines judged
by the severity they print or NVIDIA's Fabric Manager User Guide (captures in
tests/data/hardware/kernel_log, see its SOURCES.md)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from checks.hardware.judge import judge_hardware
from checks.hardware.kernel_log import RECUR_PROCESSES, xid_findings
from checks.hardware.sxid import kind_of
from checks.hardware.xid import CATALOGUE, CATALOGUE_URL, action_of
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.node import hardware, smi
from preflight.node.gathering import Unavailable

DATA = Path(__file__).parent / "data"
LOGS = DATA / "hardware" / "kernel_log"
H100 = smi.gpus_from_smi(
    (DATA / "facts" / "smi_query_gpu_h100_590.48.01_idle.csv").read_text(),
    (DATA / "facts" / "smi_compute_apps_h100_590.48.01_idle.csv").read_text(),
    header=True,
)[0]


def events(name: str, lines: slice = slice(None)) -> list[dict[str, Any]]:
    text = "\n".join((LOGS / name).read_text().splitlines()[lines])
    return hardware.parse_xid_lines(text)


def node(log: list[dict[str, Any]], pcis: tuple[str, ...] = ()) -> NodeFacts:
    """A node whose kernel log gave ``log``, with one recorded H100 at each nvidia-smi address."""
    gpus = []
    for index, pci in enumerate(pcis):
        gpu = copy.deepcopy(H100)
        gpu.update(index=index, serial=f"16549220{index:05d}", pci_bus_id=pci)
        gpus.append(gpu)
    xid = {"readable": True, "source": "dmesg", "events": log}
    return NodeFacts(
        {"gpus": gpus, "hardware": {"nvswitches": 0, "fabric_manager_running": False, "xid": xid}}
    )


def judged(log: list[dict[str, Any]], pcis: tuple[str, ...] = ()) -> list[CheckResult]:
    results, _, _ = xid_findings({"gpu1": node(log, pcis)}, ())
    return results


def test_a_gpu_lost_at_load_is_read_from_the_multi_line_form_and_named_with_its_gpu() -> None:
    (lost,) = events("dmesg_fallen_multiline_570.txt")
    assert (lost["pci"], lost["xid"], lost["without_xid_line"]) == ("0000:b3:00", 79, True)
    assert "installed in this system has fallen off the bus" in lost["detail"]
    (result,) = judged([lost], ("00000000:1B:00.0", "00000000:B3:00.0"))
    assert result.status == "fail"
    assert result.details["action"] == "reboot"
    assert result.summary == (
        "gpu1: GPU fell off the bus, with no Xid line (XID 79) on 0000:b3:00 (GPU 1, serial 1654922000001) "
        "in the kernel log: reboot the node and check the GPU's seating, power and PCIe path"
    )
    # The driver usually no longer lists such a GPU: it is said so.
    (result,) = judged([lost], ("00000000:1B:00.0",))
    assert "on 0000:b3:00 (not a GPU the driver lists)" in result.summary


def test_the_driver_banner_and_probe_lines_of_a_healthy_load_are_not_errors() -> None:
    assert events("dmesg_fallen_multiline_570.txt", slice(3, None)) == []
    result, *notes = judge_hardware({"gpu1": node([])}, Config())
    assert (result.status, notes) == ("pass", [])


def test_the_older_one_line_form_is_read_once_per_gpu() -> None:
    assert [(e["pci"], e["xid"]) for e in events("dmesg_fallen_at_old.txt")] == [("0000:01:00", 79)]
    assert [r.status for r in judged(events("dmesg_fallen_at_old.txt"))] == ["fail"]


def test_a_loss_said_both_with_and_without_an_xid_line_is_one_event() -> None:
    (fell,) = events("nvrm_xid79_and_fallen_5090.txt")
    assert (fell["pci"], fell["xid"], "without_xid_line" in fell) == ("0000:06:00", 79, False)


def test_journal_and_ctime_prefixes_are_read_as_dmesg_is() -> None:
    assert [(e["pci"], e["xid"]) for e in events("journal_xid38_109_pl.txt")] == [("0000:07:00", 38)] + [
        ("0000:07:00", 109)
    ] * 5
    assert [(e["pci"], e["xid"]) for e in events("dmesg_ctime_xid13_109.txt")] == [("0000:cb:00", 13)] * 3 + [
        ("0000:cb:00", 109)
    ]
    assert {e["pci"] for e in events("journal_xid45_after_149_145.txt")} == {
        "0000:dc:00",
        "0000:ed:00",
        "0000:ba:00",
        "0000:97:00",
    }


def test_an_application_xid_is_a_note_and_a_reset_xid_beside_it_fails() -> None:
    # One Xid 13 fault of one process, printed as three lines: the application's, a note.
    (note,) = judged(events("dmesg_ctime_xid13_109.txt", slice(0, 4)))
    assert note.is_note and note.details["action"] == "application"
    assert "XID 13 (graphics engine exception) on 0000:cb:00 \u00d73" in note.summary
    # The same log goes on to a context switch timeout, which the catalogue resets the GPU for.
    failed, note = judged(events("dmesg_ctime_xid13_109.txt"))
    assert (failed.status, failed.details["xids"], failed.details["action"]) == ("fail", [109], "reset_gpu")
    assert (note.is_note, note.details["xids"]) == (True, [13])


def test_firmware_and_cleanup_xids_are_notes_and_the_timeouts_beside_them_fail() -> None:
    failed, note = judged(events("journal_xid38_109_pl.txt"))
    assert failed.summary.startswith("gpu1: XID 109 (context switch timeout) on 0000:07:00 \u00d75")
    assert (note.is_note, note.details["xids"], note.details["action"]) == (True, [38], "info")
    # Xid 45 after a previous XID: recorded for information on every GPU, nothing for the node.
    (note,) = judged(events("journal_xid45_after_149_145.txt"))
    assert note.is_note and note.details["xids"] == [45]
    assert len(note.details["events"]) == 4


def test_nvlink5_xids_follow_the_severity_they_print() -> None:
    failed, note = judged(events("nvlink5_xid144_149.txt"))
    assert (failed.status, failed.details["xids"]) == ("fail", [149])
    assert (note.is_note, note.details["xids"]) == (True, [144])
    # A non-fatal NVLink error and a contained ECC error: the node passes, with notes.
    results = judge_hardware({"gpu1": node(events("nvlink5_xid145_94.txt"))}, Config())
    assert [(r.status, r.is_note) for r in results] == [("pass", False), ("pass", True)]
    assert results[0].summary.endswith("only XIDs that need no action on gpu1 (see the notes)")


def test_xid_154_gives_the_recovery_action_its_gpu_needs_now() -> None:
    (failed,) = judged(events("dmesg_gb200_xid149_154.txt"))
    assert failed.status == "fail"
    by_gpu = {(e["xid"], e["pci"]): e["action"] for e in failed.details["events"]}
    assert by_gpu[(154, "0009:01:00")] == "drain"  # changed to 0x4 (Drain and Reset)
    assert by_gpu[(154, "0019:01:00")] == "reset_gpu"  # changed to 0x1 (GPU Reset Required)
    assert by_gpu[(149, "0009:01:00")] == "reset_gpu"  # NETIR_LINK_EVT Fatal
    assert failed.details["action"] == "drain"
    assert "stop the GPU's peer-to-peer work" in failed.summary
    # A GPU whose last 154 goes back to none needs nothing more.
    assert action_of(154, "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)") == "info"


def test_an_xid_the_catalogue_does_not_list_warns_with_where_to_look() -> None:
    """A number past the catalogue's last (the event is built: no capture of one was found)."""
    assert max(CATALOGUE) < 200
    (result,) = judged([{"pci": "0000:3b:00", "xid": 200, "detail": "pid=1, name=x, something new"}])
    assert result.status == "warn" and result.details["action"] is None
    assert "XID 200 (not in preflight's table of the catalogue)" in result.summary
    assert CATALOGUE_URL in result.summary


def test_application_xids_from_several_processes_on_one_gpu_warn() -> None:
    """Two processes (the recorded RTX 4090 log, tests/data/hardware) stay a note; the events for
    a third process are built from its lines, with the pid changed."""
    two = hardware.parse_xid_lines((DATA / "hardware" / "dmesg_xid31_rtx4090.txt").read_text())
    assert {e["detail"].split(",")[0] for e in two} == {"pid=14292", "pid=14566"}
    (note,) = judged(two)
    assert note.is_note
    third = dict(two[0], detail=two[0]["detail"].replace("pid=14292", "pid=15001"))
    assert RECUR_PROCESSES == 3
    (result,) = judged([*two, third])
    assert result.status == "warn"
    assert "dcgmi diag" in result.summary


def test_the_journal_is_read_where_dmesg_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (LOGS / "journal_xid38_109_pl.txt").read_text()

    def run(argv: list[str], timeout: float = 0) -> str:
        if argv[0].endswith("dmesg"):
            raise Unavailable("dmesg: read kernel buffer failed: Operation not permitted")
        return text

    monkeypatch.setattr(hardware, "find_tool", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(hardware, "run_command", run)
    facts = hardware.hardware_facts()
    assert facts["xid"]["source"] == "journalctl"
    assert [e["xid"] for e in facts["xid"]["events"]] == [38] + [109] * 5

    def refused(argv: list[str], timeout: float = 0) -> str:
        raise Unavailable(f"{argv[0]} refused")

    monkeypatch.setattr(hardware, "run_command", refused)
    assert hardware.hardware_facts()["xid"] == {
        "readable": False,
        "reason": "/usr/bin/dmesg refused; /usr/bin/journalctl refused",
    }


def switch_node(name: str) -> NodeFacts:
    """A node with four NVSwitches whose kernel log is the capture ``name``, read as the node does."""
    text = (LOGS / name).read_text()
    xid = {
        "readable": True,
        "source": "dmesg",
        "events": hardware.parse_xid_lines(text),
        "sxid_events": hardware.parse_sxid_lines(text),
    }
    return NodeFacts({"gpus": [], "hardware": {"nvswitches": 4, "fabric_manager_running": True, "xid": xid}})


def test_sxid_lines_are_read_with_their_switch_link_and_severity_and_companion_lines_fold_in() -> None:
    text = (LOGS / "dmesg_sxid20034_xid79.txt").read_text()
    # The XID lines of the same log read as before.
    assert [(e["pci"], e["xid"]) for e in hardware.parse_xid_lines(text)] == [("0000:91:00", 79)]
    assert [
        (e["switch"], e["pci"], e["sxid"], e["severity"], e["link"]) for e in hardware.parse_sxid_lines(text)
    ] == [
        ("nvswitch1", "0000:06:00.0", 20034, "Fatal", 48),
        ("nvswitch0", "0000:05:00.0", 20034, "Fatal", 63),
        ("nvswitch2", "0000:07:00.0", 20034, "Fatal", 37),
        ("nvswitch0", "0000:05:00.0", 20034, "Fatal", 62),
    ]
    assert hardware.parse_sxid_lines(text)[0]["detail"] == "LTSSM Fault Up"
    # The "Data {...}" and "Severity 0 Engine instance" lines of each report are left out.
    switch = hardware.parse_sxid_lines((LOGS / "dmesg_sxid22013_h100.txt").read_text())
    assert [(e["sxid"], e["severity"], e["link"]) for e in switch] == [
        (22013, "Non-fatal", n) for n in (44, 45, 46)
    ]
    # A log that kept only a report's Data line (dmesg --decode --time-format=iso) keeps it.
    (data,) = hardware.parse_sxid_lines((LOGS / "dmesg_iso_sxid12028_data.txt").read_text())
    assert (data["switch"], data["pci"], data["sxid"], data["severity"], data["link"]) == (
        "nvswitch1",
        "0000:84:00.0",
        12028,
        None,
        None,
    )
    assert data["detail"].startswith("Data {0x000001c0")


def test_a_fatal_sxid_fails_its_node_naming_the_switches_and_links() -> None:
    results = judge_hardware({"gpu1": switch_node("dmesg_sxid20034_xid79.txt"), "gpu2": node([])}, Config())
    xid, sxid = results
    assert (xid.status, xid.details["item"], xid.details["xids"]) == ("fail", "xid", [79])
    assert (sxid.status, sxid.hosts, sxid.details["item"], sxid.details["sxids"]) == (
        "fail",
        ("gpu1",),
        "sxid",
        [20034],
    )
    assert sxid.summary.startswith(
        "gpu1: NVSwitch SXID 20034 (LTSSM fault up: the link went down from active), Fatal, on "
        "nvswitch1 (0000:06:00.0) link 48, nvswitch0 (0000:05:00.0) links 62, 63, "
        "nvswitch2 (0000:07:00.0) link 37 in the kernel log: drain the node and reset its GPUs and NVSwitches"
    )
    assert [(e["switch"], e["links"], e["severity"], e["kind"]) for e in sxid.details["events"]] == [
        ("nvswitch1", [48], "Fatal", "fatal"),
        ("nvswitch0", [62, 63], "Fatal", "fatal"),
        ("nvswitch2", [37], "Fatal", "fatal"),
    ]


def test_a_non_fatal_sxid_the_guide_says_has_no_impact_is_a_note_and_the_node_passes() -> None:
    assert kind_of(22013) == "info"
    result, note = judge_hardware({"gpu1": switch_node("dmesg_sxid22013_h100.txt")}, Config())
    assert result.status == "pass"
    assert note.is_note and note.details["item"] == "sxid"
    assert note.summary == (
        "gpu1: NVSwitch SXID 22013 (Minion link DLREQ interrupt, which can be safely ignored), Non-fatal, "
        "on nvswitch3 (0000:04:00.0) links 44, 45, 46 in the kernel log: recorded for information; "
        "nothing for the node to fix"
    )


def test_an_sxid_without_a_severity_on_its_line_takes_the_guides_class() -> None:
    """12028 is non-fatal in the guide (its NVLink traffic stalls): a warning, not a failure."""
    (result,) = judge_hardware({"gpu1": switch_node("dmesg_iso_sxid12028_data.txt")}, Config())
    assert (result.status, result.details["item"], result.details["sxids"]) == ("warn", "sxid", [12028])
    assert (
        "SXID 12028 (egress non-posted PRIV error: the GPU's NVLink traffic stalls), non-fatal by the guide, "
        in (result.summary)
    )
    assert "on nvswitch1 (0000:84:00.0) in the kernel log" in result.summary
    assert result.details["events"][0]["kind"] == "non_fatal"


def test_a_log_with_xids_and_no_sxids_is_judged_as_without_the_sxid_reader() -> None:
    for name in sorted(p.name for p in LOGS.glob("*.txt") if "sxid" not in p.name):
        text = (LOGS / name).read_text()
        assert hardware.parse_sxid_lines(text) == [], name
        events = hardware.parse_xid_lines(text)
        before = judge_hardware({"gpu1": node(events)}, Config())
        with_reader = node(events)
        with_reader.hardware["xid"]["sxid_events"] = []
        after = judge_hardware({"gpu1": with_reader}, Config())
        assert [(r.status, r.summary, r.details) for r in after] == [
            (r.status, r.summary, r.details) for r in before
        ]


def test_the_node_reports_sxid_lines_beside_the_xid_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (LOGS / "dmesg_sxid20034_xid79.txt").read_text()
    monkeypatch.setattr(hardware, "find_tool", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(hardware, "run_command", lambda argv, timeout=0: text)
    facts = hardware.hardware_facts()["xid"]
    assert (facts["source"], [e["xid"] for e in facts["events"]]) == ("dmesg", [79])
    assert [e["link"] for e in facts["sxid_events"]] == [48, 63, 37, 62]
