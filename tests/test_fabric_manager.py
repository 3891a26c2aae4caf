"""The fabric manager of an NVSwitch node: the probe's parsers on what real fabric managers and
systemd printed (tests/data/hardware/fabric_manager, SOURCES.md), and the judge on nodes built from
the recorded H100 with those readings: a unit that failed, a fabric manager of another version than
the driver, errors in its log, each named once on its node; a healthy look-alike (an active unit of
the driver's version whose journal only says it started) and nodes without NVSwitches say nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checks.hardware import judge_hardware
from checks.hardware.fabric import fabric_manager
from checks.hardware.present import ADVICE, fabric_log
from checks.readings.judge import judge_readings
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.node import fabric_manager as node_fm
from preflight.node.gathering import Unavailable
from tests.test_hardware import node

DATA = Path(__file__).parent / "data" / "hardware" / "fabric_manager"
CONFIG = Config()
# The B300 machine's versions (nv_fabricmanager_version_b300.txt, and its nvidia-smi's driver).
B300_VERSION = "610.57.04"
# The unit's state as `systemctl show` says it for `Active: active (running)`, and for a start whose
# control process exited with status 1 (journal_nothing_to_do_rtx4090.txt).
ACTIVE = {"load_state": "loaded", "active_state": "active", "sub_state": "running", "result": "success"}
FAILED = {
    "load_state": "loaded", "active_state": "failed", "sub_state": "failed", "result": "exit-code",
    "exec_main_status": 1,
}  # fmt: skip
WAITING = {i: {"fabric": {"state": "not_started", "status": None}} for i in range(4)}


def capture(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def fm_facts(
    unit: dict[str, Any], log: str, version: str | None = None, source: str = "journalctl"
) -> dict[str, Any]:
    """The probe's ``fabric_manager`` facts for a unit in ``unit`` whose log is the capture ``log``."""
    parsed = node_fm.parse_log(capture(log))
    return {"unit": unit, "version": version or parsed["version"], "log": {"source": source, **parsed}}


def switch_node(
    tmp_path: Path,
    name: str,
    fm: dict[str, Any] | None,
    driver: str = B300_VERSION,
    running: bool = False,
    gpus: dict[int, dict[str, Any]] | None = None,
    switches: int = 4,
    kernel_log: bool = True,
) -> NodeFacts:
    """A node of four recorded H100s with ``switches`` NVSwitches, the driver ``driver`` and the
    fabric manager facts ``fm``; no process named nv-fabricmanage seen unless ``running`` (a
    process list that hides other users' processes sees none)."""
    xid = {"readable": True, "source": "dmesg", "events": []} if kernel_log else {"readable": False}
    hardware = {"nvswitches": switches, "fabric_manager_running": running, "xid": xid}
    if fm is not None:
        hardware["fabric_manager"] = fm
    raw = node(tmp_path, name, gpus, hardware=hardware).raw
    return NodeFacts({**raw, "driver": {"version": driver}})


def found(nodes: dict[str, NodeFacts]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.status, str(r.details.get("item")), r.hosts) for r in judge_hardware(nodes, CONFIG)]


def test_the_version_the_binary_prints_is_read_with_its_build_line() -> None:
    assert node_fm.parse_version(capture("nv_fabricmanager_version_b300.txt")) == B300_VERSION
    assert node_fm.parse_version("nv-fabricmanager: command not found\n") is None


def test_the_units_state_is_read_from_systemctl_show() -> None:
    shown = "LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=1\n"
    assert node_fm.parse_unit(shown) == FAILED
    assert node_fm.parse_unit("LoadState=not-found\nActiveState=inactive\n") == {
        "load_state": "not-found",
        "active_state": "inactive",
    }


def test_the_log_file_is_the_one_the_configuration_names() -> None:
    assert (
        node_fm.log_file("LOG_LEVEL=4\nLOG_FILE_NAME=/var/log/fabricmanager.log\n")
        == "/var/log/fabricmanager.log"
    )
    assert node_fm.log_file("LOG_FILE_NAME=\nDAEMONIZE=0\n") is None  # to stderr: the journal
    assert node_fm.log_file(None) == node_fm.DEFAULT_LOG


def test_a_running_fabric_managers_log_keeps_its_errors_and_not_its_info_lines() -> None:
    parsed = node_fm.parse_log(capture("fabricmanager_h100_gpud_testdata.log"))
    assert parsed == {
        "started": None,
        "version": None,
        "lines": [
            {
                "level": "ERROR",
                "line": "[Feb 27 2025 15:10:02] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 "
                "on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 61",
                "since_start": True,
            }
        ],
    }


def test_journal_lines_mark_the_last_start_and_the_failures_after_it() -> None:
    started = node_fm.parse_log(capture("journal_start_stop_h20.txt"))
    assert started["started"] == (
        "Jan 05 14:44:41 TENCENT64 systemd[1]: Starting nvidia-fabricmanager.service - NVIDIA fabric "
        "manager service..."
    )
    assert started["lines"] == []
    refused = node_fm.parse_log(capture("journal_nothing_to_do_a40.txt"))
    assert refused["started"] is not None
    assert [(line["level"], line["since_start"]) for line in refused["lines"]] == [("ERROR", True)] * 2
    assert "[NV_WARN_NOTHING_TO_DO]" in refused["lines"][0]["line"]
    # The log file's own form inside journal lines: its [INFO] lines are no failure.
    for name in ("systemctl_status_active_p5_bottlerocket.txt", "systemctl_status_active_b300.txt"):
        assert node_fm.parse_log(capture(name))["lines"] == []
    # Errors before a later start are kept, marked as such.
    both = node_fm.parse_log(
        capture("journal_nothing_to_do_rtx4090.txt") + capture("journal_start_stop_h20.txt")
    )
    assert [line["since_start"] for line in both["lines"]] == [False] * 3


def test_a_refused_version_check_names_the_fabric_managers_version() -> None:
    assert node_fm.parse_log(capture("journal_version_mismatch_530.txt"))["version"] == "530.30.02"
    assert node_fm.parse_log(capture("version_mismatch_590_580_h200.txt"))["version"] == "590.48.01"


def test_the_probe_reads_the_unit_the_binary_and_the_configured_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "fabricmanager.log"
    log.write_text(capture("fabricmanager_h100_gpud_testdata.log"), encoding="utf-8")
    config = tmp_path / "fabricmanager.cfg"
    config.write_text(f"LOG_LEVEL=4\nLOG_FILE_NAME={log}\n", encoding="utf-8")
    outputs = {
        "systemctl": "LoadState=loaded\nActiveState=active\nSubState=running\nResult=success\n",
        "nv-fabricmanager": capture("nv_fabricmanager_version_b300.txt"),
    }

    def run(argv: list[str], timeout: float = 0) -> str:
        if argv[0] not in outputs:
            raise Unavailable(f"{argv[0]} not found on PATH")
        return outputs[argv[0]]

    monkeypatch.setattr(node_fm, "CONFIG", str(config))
    monkeypatch.setattr(node_fm, "find_tool", lambda name: name)
    monkeypatch.setattr(node_fm, "run_command", run)
    monkeypatch.setattr(node_fm, "LOG_TAIL_BYTES", 400)  # the last lines only, the first one cut
    facts = node_fm.fabric_manager_facts()
    assert facts["unit"] == {**ACTIVE}
    assert (facts["version"], facts["version_source"]) == (B300_VERSION, "nv-fabricmanager")
    assert facts["log"]["source"] == str(log)
    assert [line["level"] for line in facts["log"]["lines"]] == ["ERROR"]
    # No log file and a journal that tells nothing: why, and the unit still read.
    config.write_text("LOG_FILE_NAME=\n", encoding="utf-8")
    outputs["journalctl"] = ""
    del outputs["nv-fabricmanager"]
    facts = node_fm.fabric_manager_facts()
    assert facts["log"] == {
        "source": "journalctl",
        "readable": False,
        "reason": "the unit's journal is empty or not readable",
    }
    assert (facts["version"], facts["version_source"]) == (None, None)
    outputs["journalctl"] = capture("journal_version_mismatch_530.txt")
    facts = node_fm.fabric_manager_facts()
    assert (facts["version"], facts["version_source"]) == ("530.30.02", "log")
    del outputs["systemctl"]
    assert node_fm.fabric_manager_facts()["unit"] == {
        "readable": False,
        "reason": "systemctl not found on PATH",
    }


def healthy(tmp_path: Path, name: str) -> NodeFacts:
    """The look-alike: an active unit of the driver's version whose journal only says it started."""
    fm = fm_facts(ACTIVE, "systemctl_status_active_b300.txt", B300_VERSION)
    return switch_node(tmp_path, name, fm)


def test_a_healthy_look_alike_says_nothing(tmp_path: Path) -> None:
    nodes = {f"gpu{i}": healthy(tmp_path, f"gpu{i}") for i in range(1, 4)}
    assert found(nodes) == [("pass", "None", ())]
    # The process list saw no nv-fabricmanage on any of them: the unit's state decides.
    assert [fabric_manager(n).stopped for n in nodes.values()] == [None] * 3


def test_a_failed_unit_fails_its_node_once_with_its_state_and_the_cause_in_its_log(tmp_path: Path) -> None:
    # What a fabric manager prints where the NVSwitches do not answer its query (an HGX B200
    # without NVLSM does the same: siderolabs/extensions#717); its GPUs wait for the fabric.
    fm = fm_facts(FAILED, "journal_nothing_to_do_rtx4090.txt", B300_VERSION)
    nodes = {"gpu1": healthy(tmp_path, "gpu1"), "gpu2": switch_node(tmp_path, "gpu2", fm, gpus=WAITING)}
    results = judge_hardware(nodes, CONFIG)
    assert [(r.status, r.details["item"], r.hosts) for r in results] == [
        ("fail", "fabric_manager", ("gpu2",))
    ]
    assert results[0].summary == (
        "gpu2: 4 NVSwitches but the fabric manager is not running: nvidia-fabricmanager is failed "
        '(exit-code, status 1); first error in its log since it started: "Sep 18 03:19:01 ubuntu2404 '
        "nvidia-fabricmanager-start.sh[4756]: request to query NVSwitch device information from NVSwitch "
        'driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]"; all 4 GPUs not registered '
        "with the fabric"
    )
    details = results[0].details
    assert details["unit_state"] == "nvidia-fabricmanager is failed (exit-code, status 1)"
    assert (details["gpus"], details["log_source"], len(details["log"])) == ([0, 1, 2, 3], "journalctl", 3)
    (table,) = fabric_log(results[0])
    assert [row[1].text for row in table.rows] == ["yes"] * 3
    assert "reset the GPUs" in ADVICE["fabric_manager"]


def test_another_version_than_the_drivers_is_the_one_finding(tmp_path: Path) -> None:
    """The 530 capture: fabric manager 530.30.02 refused driver 530.41.03 and its unit failed; its
    GPUs wait. One finding, the version's, with the state and the line that says so."""
    fm = fm_facts(FAILED, "journal_version_mismatch_530.txt")
    nodes = {
        "gpu1": switch_node(tmp_path, "gpu1", fm_facts(ACTIVE, "journal_start_stop_h20.txt", "530.41.03"),
                            driver="530.41.03"),
        "gpu2": switch_node(tmp_path, "gpu2", fm, driver="530.41.03", gpus=WAITING),
    }  # fmt: skip
    results = judge_hardware(nodes, CONFIG)
    assert [(r.status, r.details["item"], r.hosts) for r in results] == [
        ("fail", "fabric_manager_version", ("gpu2",))
    ]
    assert results[0].summary.startswith(
        "gpu2: fabric manager 530.30.02 with driver 530.41.03: the fabric manager runs only with the driver "
        "of its own version; nvidia-fabricmanager is failed (exit-code, status 1); first error in its log "
        'since it started: "nv-fabricmanager[3228]: fabric manager NVIDIA GPU driver interface version '
        "530.30.02 don't match"
    )
    assert results[0].summary.endswith("; all 4 GPUs not registered with the fabric")
    assert (results[0].details["version"], results[0].details["driver_version"]) == ("530.30.02", "530.41.03")


def test_errors_in_a_running_fabric_managers_log_warn(tmp_path: Path) -> None:
    """The gpud capture: a running fabric manager that logged an NVSwitch non-fatal error. Where the
    kernel log was read, that error is its SXID, judged there; elsewhere it is named here. A
    multicast setup that failed (gpud's example lines) is the fabric manager's own."""
    sxid = fm_facts(
        ACTIVE, "fabricmanager_h100_gpud_testdata.log", B300_VERSION, "/var/log/fabricmanager.log"
    )
    nodes = {"gpu1": healthy(tmp_path, "gpu1"), "gpu2": switch_node(tmp_path, "gpu2", sxid)}
    assert found(nodes) == [("pass", "None", ())]
    nodes["gpu2"] = switch_node(tmp_path, "gpu2", sxid, kernel_log=False)
    (warned,) = [r for r in judge_hardware(nodes, CONFIG) if r.details.get("item") == "fabric_manager_log"]
    assert (warned.status, warned.hosts) == ("warn", ("gpu2",))
    assert warned.summary == (
        "gpu2: 1 error in the fabric manager's log since it last started; last: \"[Feb 27 2025 15:10:02] "
        "[ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id "
        '00000000:86:00.0 physical id 3 port 61"'
    )
    multicast = fm_facts(ACTIVE, "fabricmanager_lines_gpud_log_matcher.txt", B300_VERSION)
    nodes["gpu2"] = switch_node(tmp_path, "gpu2", multicast)
    assert found(nodes) == [("warn", "fabric_manager_log", ("gpu2",))]
    assert judge_hardware(nodes, CONFIG)[0].summary.startswith(
        "gpu2: 1 error in the fabric manager's log since it last started; last: \"[Sep 17 2024 06:01:46] "
        "[ERROR] [tid 1230079] failed to find the GPU handle"
    )


def test_errors_from_before_the_last_start_count_only_where_registration_is_unknown(tmp_path: Path) -> None:
    # A start that failed, then one that came up: the failure is behind it.
    fm = fm_facts(ACTIVE, "journal_nothing_to_do_rtx4090.txt", B300_VERSION)
    fm["log"] = {"source": "journalctl", **node_fm.parse_log(
        capture("journal_nothing_to_do_rtx4090.txt") + capture("journal_start_stop_h20.txt"))}  # fmt: skip
    nodes = {"gpu1": healthy(tmp_path, "gpu1"), "gpu2": switch_node(tmp_path, "gpu2", fm)}
    assert found(nodes) == [("pass", "None", ())]  # every GPU registered
    unknown = {i: {"fabric": None} for i in range(4)}  # an A100 system: no registration to read
    nodes["gpu2"] = switch_node(tmp_path, "gpu2", fm, gpus=unknown)
    (result,) = judge_hardware(nodes, CONFIG)
    assert (result.status, result.details["item"], result.hosts) == ("warn", "fabric_manager_log", ("gpu2",))
    assert result.summary.startswith(
        "gpu2: 3 errors in the fabric manager's log before it last started, and its GPUs' registration "
        "is unknown"
    )


def test_gpus_not_registered_under_a_running_fabric_manager_carry_its_log(tmp_path: Path) -> None:
    multicast = fm_facts(ACTIVE, "fabricmanager_lines_gpud_log_matcher.txt", B300_VERSION)
    stuck = {2: {"fabric": {"state": "in_progress", "status": None}}}
    nodes = {"gpu1": healthy(tmp_path, "gpu1"), "gpu2": switch_node(tmp_path, "gpu2", multicast, gpus=stuck)}
    (result,) = judge_hardware(nodes, CONFIG)
    assert (result.status, result.details["item"]) == ("fail", "gpu_fabric")
    assert result.summary.startswith(
        "gpu2: GPU 2 (serial gpu2-2) not registered with the NVSwitch fabric (registration in progress): "
        "CUDA cannot start on them; first error in the fabric manager's log since it started: "
        '"[Sep 17 2024 06:01:46] [ERROR] [tid 1230079] failed to find the GPU handle'
    )


def test_nodes_without_nvswitches_are_not_judged_on_their_fabric_manager(tmp_path: Path) -> None:
    """The A40 pair joined by a bridge: a fabric manager installed there fails with nothing to do."""
    fm = fm_facts(FAILED, "journal_nothing_to_do_a40.txt", "515.105.01")
    nodes = {name: switch_node(tmp_path, name, fm, switches=0) for name in ("gpu1", "gpu2")}
    assert found(nodes) == [("pass", "None", ())]


def test_without_systemd_the_process_list_decides(tmp_path: Path) -> None:
    """No systemd (a container), or no unit: a process named nv-fabricmanage, as before."""
    unit = {"readable": False, "reason": "systemctl not found on PATH"}
    log = {"source": "/var/log/fabricmanager.log", "readable": False, "reason": "missing"}
    no_systemd = {"unit": unit, "version": None, "log": log}
    nodes = {
        "gpu1": switch_node(tmp_path, "gpu1", no_systemd, running=True),
        "gpu2": switch_node(tmp_path, "gpu2", no_systemd),
    }
    assert found(nodes) == [("fail", "fabric_manager", ("gpu2",))]
    assert judge_hardware(nodes, CONFIG)[0].summary == (
        "gpu2: 4 NVSwitches but the fabric manager (nv-fabricmanager) is not running"
    )


def test_a_stopped_unit_fails_unless_a_process_of_its_name_runs(tmp_path: Path) -> None:
    """The H20 capture: the fabric manager was stopped (`Stopped "Nvidia Fabric Manager"`), which
    leaves its unit inactive (dead). A fabric manager run in the driver's container leaves the
    host's unit inactive too, and runs as a process the node sees."""
    stopped = {"load_state": "loaded", "active_state": "inactive", "sub_state": "dead", "result": "success"}
    fm = fm_facts(stopped, "journal_start_stop_h20.txt", B300_VERSION)
    nodes = {"gpu1": healthy(tmp_path, "gpu1"), "gpu2": switch_node(tmp_path, "gpu2", fm)}
    (result,) = judge_hardware(nodes, CONFIG)
    assert (result.status, result.details["item"], result.hosts) == ("fail", "fabric_manager", ("gpu2",))
    assert result.summary == (
        "gpu2: 4 NVSwitches but the fabric manager is not running: nvidia-fabricmanager is inactive (dead)"
    )
    nodes["gpu2"] = switch_node(tmp_path, "gpu2", fm, running=True)
    assert found(nodes) == [("pass", "None", ())]


def test_the_readings_check_leaves_the_fabric_manager_to_this_one(tmp_path: Path) -> None:
    """Its facts differ between a failed and a healthy node (state, version, log lines): the
    ``readings`` comparison leaves them to the rules above, and declares them."""
    fm = fm_facts(FAILED, "journal_nothing_to_do_rtx4090.txt", "530.30.02")
    nodes = {"gpu1": healthy(tmp_path, "gpu1"), "gpu2": switch_node(tmp_path, "gpu2", fm)}
    nodes["gpu3"] = healthy(tmp_path, "gpu3")
    (result,) = judge_readings(nodes)
    assert (result.status, result.details.get("undeclared")) == ("pass", {})
