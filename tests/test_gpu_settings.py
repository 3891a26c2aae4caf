"""GPU settings and driver versions: the probe reads them from real nvidia-smi captures (and through
NVML), and the hardware judge names a GPU set away from its default with the command that restores
it, says a setting every GPU shares once, as a note, and fails a mode pending a reboot and a
driver/library version mismatch with both versions and what to do."""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from checks.hardware import judge_hardware
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.handback import hand_back
from preflight.model import CheckResult, HostReport
from preflight.node import nvidia, nvml, smi
from preflight.node.gathering import Sink
from tests.lab.gpu import RECORDED_APPS, GpuNode, gpu_capture

DATA = Path(__file__).parent / "data"
SETTINGS = DATA / "hardware" / "gpu_settings"
RECORDED_PROC = DATA / "facts" / "nvidia_version_open_565.57.01.txt"
HEALTHY_XID = {"nvswitches": 0, "fabric_manager_running": False, "xid": {"readable": True, "events": []}}


def gpus(changes: Mapping[int, Mapping[str, str]] | None = None, count: int = 4) -> list[dict[str, Any]]:
    """``count`` GPUs as the recorded H100 capture (driver 590.48.01) prints them, with the given
    nvidia-smi fields changed, read back by the probe's own parser."""
    text = gpu_capture(GpuNode(gpus=count, changes=changes or {}), 1)
    return smi.gpus_from_smi(text, RECORDED_APPS.read_text(), header=True)


def nodes(**changes: Mapping[int, Mapping[str, str]]) -> dict[str, NodeFacts]:
    """Four nodes of four recorded H100s; ``node2={0: {...}}`` changes fields on one node."""
    return {
        name: NodeFacts({"gpus": gpus(changes.get(name)), "hardware": HEALTHY_XID})
        for name in ("node1", "node2", "node3", "node4")
    }


def judged(found: Mapping[str, NodeFacts]) -> list[CheckResult]:
    return judge_hardware(found, Config())


def items(results: list[CheckResult]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.status, str(r.details.get("item")), r.hosts) for r in results if "item" in r.details]


# The probe reads the settings


def test_the_recorded_h100_reads_at_its_defaults() -> None:
    (gpu,) = smi.gpus_from_smi(
        (DATA / "facts" / "smi_query_gpu_h100_590.48.01_idle.csv").read_text(), None, header=True
    )
    assert (gpu["power_limit_w"], gpu["power_default_limit_w"]) == (700.0, 700.0)
    # Driver 590 prints "[Requested functionality has been deprecated]" for the applications clocks.
    assert gpu["clocks_applications_mhz"] is None and gpu["clocks_default_applications_mhz"] is None
    assert (gpu["ecc_mode"], gpu["ecc_mode_pending"]) == ("enabled", "enabled")
    assert (gpu["mig_mode"], gpu["mig_mode_pending"]) == ("disabled", "disabled")
    assert gpu["compute_mode"] == "default"


def test_the_recorded_mig_query_reads_one_gpu_with_mig_on_and_none_pending() -> None:
    rows = smi.parse_smi_csv((SETTINGS / "smi_mig_one_enabled.csv").read_text())
    read = [smi.gpu_from_smi_row(row) for row in rows]
    assert [(g["mig_mode"], g["mig_mode_pending"]) for g in read] == [
        ("enabled", "enabled"),
        ("disabled", "disabled"),
        ("disabled", "disabled"),
        ("disabled", "disabled"),
    ]
    found = {
        f"node{i}": NodeFacts({"gpus": [{**g, "index": 0}], "hardware": HEALTHY_XID})
        for i, g in enumerate(read)
    }
    assert not [r for r in judged(found) if r.details.get("item") == "gpu_mig_pending"]


def test_the_settings_fields_are_asked_in_groups_nvidia_smi_knows() -> None:
    header = (DATA / "facts" / "smi_query_gpu_h100_590.48.01_idle.csv").read_text().splitlines()[0]
    known = {column.strip().split(" [")[0] for column in header.split(",")}
    # clocks_throttle_reasons.active is the older drivers' name of clocks_event_reasons.active.
    asked = {field for group in smi.SMI_HEALTH_GROUPS for field in group} - {"clocks_throttle_reasons.active"}
    assert {"enforced.power.limit", "power.default_limit", "compute_mode", "ecc.mode.pending"} <= asked
    assert asked <= known


class _FakeNvml:
    """pynvml's calls for the settings, answering as an H100 with its power limit lowered."""

    NVMLError = RuntimeError
    NVML_CLOCK_GRAPHICS, NVML_CLOCK_MEM = 0, 2

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: object) -> int:
        return 500_000

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: object) -> int:
        return 700_000

    def nvmlDeviceGetApplicationsClock(self, handle: object, domain: int) -> int:
        return {0: 1410, 2: 2619}[domain]

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: object, domain: int) -> int:
        return {0: 1980, 2: 2619}[domain]

    def nvmlDeviceGetComputeMode(self, handle: object) -> int:
        return 3


def test_nvml_gives_the_same_settings_as_nvidia_smi() -> None:
    found = nvml._nvml_settings(_FakeNvml(), object(), (1, 0), (0, 1))
    assert found == {
        "power_limit_w": 500.0,
        "power_default_limit_w": 700.0,
        "clocks_applications_mhz": {"graphics": 1410, "memory": 2619},
        "clocks_default_applications_mhz": {"graphics": 1980, "memory": 2619},
        "ecc_mode_pending": "disabled",
        "mig_mode_pending": "enabled",
        "compute_mode": "exclusive_process",
    }
    assert set(found) <= set(gpus()[0])


# The judge


def test_healthy_nodes_at_their_defaults_give_nothing() -> None:
    (only,) = judged(nodes())
    assert only.status == "pass" and not only.is_note


def test_a_lowered_power_limit_on_one_gpu_is_named_with_both_values_and_the_command() -> None:
    results = judged(nodes(node3={2: {"enforced.power.limit": "500.00 W", "power.limit": "500.00 W"}}))
    assert items(results) == [("warn", "gpu_power_limit", ("node3",))]
    summary = results[0].summary
    assert "500 W on node3 GPU 2" in summary and "700 W on node[1-2,4]; node3 GPUs 0, 1, 3" in summary
    assert "nvidia-smi -i 2 -pl 700" in summary
    assert results[0].details["values"] == {"500 W": {"node3": [2]}}


def test_the_same_lowered_limit_on_every_gpu_is_a_note_not_a_warning() -> None:
    lowered = {key: {"enforced.power.limit": "500.00 W"} for key in range(4)}
    results = judged(nodes(node1=lowered, node2=lowered, node3=lowered, node4=lowered))
    assert [r.status for r in results] == ["pass", "pass"]
    note = results[1]
    assert note.is_note and note.details["item"] == "gpu_power_limit"
    assert "500 W on node[1-4]" in note.summary and "nvidia-smi -pl 700" in note.summary


def test_applications_clocks_below_their_default_are_named_with_rac() -> None:
    defaults = {
        "clocks.default_applications.graphics": "1980 MHz",
        "clocks.default_applications.memory": "2619 MHz",
        "clocks.applications.graphics": "1980 MHz",
        "clocks.applications.memory": "2619 MHz",
    }
    slow = {**defaults, "clocks.applications.graphics": "1410 MHz"}
    every = dict.fromkeys(range(4), defaults)
    results = judged(nodes(node1=every, node2={**every, 1: slow}, node3=every, node4=every))
    assert items(results) == [("warn", "gpu_app_clocks", ("node2",))]
    assert "graphics 1410 MHz, memory 2619 MHz on node2 GPU 1" in results[0].summary
    assert "nvidia-smi -i 1 -rac" in results[0].summary


def test_a_pending_ecc_change_fails_the_node_with_the_command_that_keeps_the_current_mode() -> None:
    results = judged(nodes(node4={key: {"ecc.mode.pending": "Disabled"} for key in range(4)}))
    assert items(results) == [("fail", "gpu_ecc_pending", ("node4",))]
    summary = results[0].summary
    assert "ECC enabled now, disabled after the next reboot on node4" in summary
    assert "nvidia-smi -i 0,1,2,3 -e 1" in summary
    assert results[0].details["action"] == "reset_gpu"


def test_a_pending_mig_change_fails_the_node() -> None:
    results = judged(nodes(node2={5 % 4: {"mig.mode.pending": "Enabled"}}))
    assert items(results) == [("fail", "gpu_mig_pending", ("node2",))]
    assert "nvidia-smi -i 1 -mig 0" in results[0].summary


def test_exclusive_process_on_one_node_warns_and_prohibited_fails() -> None:
    exclusive = {key: {"compute_mode": "Exclusive_Process"} for key in range(4)}
    results = judged(nodes(node1=exclusive, node2={0: {"compute_mode": "Prohibited"}}))
    assert sorted(items(results)) == [
        ("fail", "gpu_compute_mode", ("node2",)),
        ("warn", "gpu_compute_mode", ("node1",)),
    ]
    warned = next(r for r in results if r.status == "warn")
    assert "exclusive_process on node1" in warned.summary and "nvidia-smi -c 0" in warned.summary


# Driver/library version mismatch


def test_the_library_version_is_read_from_what_nvidia_smi_prints_and_from_the_file_name() -> None:
    assert smi.nvml_library_version((SETTINGS / "smi_mismatch_570.124.txt").read_text()) == "570.124"
    assert smi.nvml_library_version((SETTINGS / "smi_mismatch_550.144.txt").read_text()) == "550.144"
    assert smi.nvml_library_version((SETTINGS / "smi_mismatch_no_library_line.txt").read_text()) is None
    assert nvidia.version_in_file_name("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.04") == "570.124.04"
    assert nvidia.version_in_file_name("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1") is None


def test_a_mismatch_is_gathered_with_both_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML refuses to start, nvidia-smi prints the recorded message and exits 18, as it does; the
    proc file is the recorded open module 565.57.01."""

    def refuse() -> None:
        raise RuntimeError("Driver/library version mismatch")

    fake = types.SimpleNamespace(NVMLError=RuntimeError, nvmlInit=refuse)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    said = tmp_path / "said.txt"
    said.write_text((SETTINGS / "smi_mismatch_570.124.txt").read_text())
    script = tmp_path / "nvidia-smi"
    script.write_text(f'#!/bin/sh\ncat "{said}"\nexit 18\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setattr(nvidia, "PROC_DRIVER_VERSION", str(RECORDED_PROC))
    sink = Sink()
    nvidia.gather_nvidia(sink)
    assert sink.facts["driver_mismatch"]["module"] == "565.57.01"
    assert sink.facts["driver_mismatch"]["library"] == "570.124"
    assert "version mismatch" in sink.unavailable["gpus"]


def test_a_node_without_a_mismatch_gathers_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nvidia, "PROC_DRIVER_VERSION", str(RECORDED_PROC))
    sink = Sink()
    nvidia.gather_nvidia(sink)
    assert "driver_mismatch" not in sink.facts and sink.facts["driver"]["version"] == "565.57.01"


def test_a_mismatch_fails_the_node_with_both_versions_and_what_to_do() -> None:
    found = nodes()
    found["node2"] = NodeFacts(
        {
            "driver": {"version": "570.124.06", "source": "proc"},
            "driver_mismatch": {"module": "570.124.06", "library": "570.124", "says": "..."},
            "unavailable": {"gpus": "nvidia-smi exited with status 18: Failed to initialize NVML"},
            "hardware": HEALTHY_XID,
        }
    )
    results = judged(found)
    assert items(results) == [("fail", "driver_mismatch", ("node2",))]
    summary = results[0].summary
    assert "kernel module 570.124.06" in summary and "library (libnvidia-ml) 570.124" in summary
    assert "Reboot the node" in summary and "rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia" in summary
    hosts = [HostReport(name=h, address=h, reachable=True, facts=dict(n.raw)) for h, n in found.items()]
    (bad,) = hand_back(hosts, results, {"hardware": "drain"}, unreached_check="connect").bad
    assert (bad.name, bad.action) == ("node2", "fix_config")
