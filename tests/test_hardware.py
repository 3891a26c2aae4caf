"""The ``hardware`` audit: the facts probe's parsers on recorded kernel lines and sysfs layouts, and
the judge on nodes built from the recorded H100 nvidia-smi capture with one thing changed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from checks.hardware import judge_hardware
from checks.hardware.settings import HardwareSection
from checks.hardware.xid import action_of
from preflight.config import Config
from preflight.config_file import parse_config
from preflight.facts import NodeFacts
from preflight.node import hardware, net, smi
from tests.lab.gpu import IB_PORT_DOWN, GpuNode, write_infiniband

DATA = Path(__file__).parent / "data"
HARDWARE = DATA / "hardware"
H100 = smi.gpus_from_smi(
    (DATA / "facts" / "smi_query_gpu_h100_590.48.01_idle.csv").read_text(),
    (DATA / "facts" / "smi_compute_apps_h100_590.48.01_idle.csv").read_text(),
    header=True,
)[0]
CONFIG = Config()
HEALTHY_IB = GpuNode(infiniband=True)


def node(
    tmp_path: Path,
    name: str,
    gpu_changes: dict[int, dict[str, Any]] | None = None,
    ib: GpuNode | None = HEALTHY_IB,
    hardware: dict[str, Any] | None = None,
) -> NodeFacts:
    """A node with four H100s as recorded (each with its own index and serial, ``gpu_changes``
    applied) and the lab's InfiniBand tree read back by the probe's own reader."""
    gpus = []
    for index in range(4):
        gpu = copy.deepcopy(H100)
        gpu.update(index=index, serial=f"{name}-{index}", **(gpu_changes or {}).get(index, {}))
        gpus.append(gpu)
    ib_devices: list[dict[str, Any]] = []
    if ib is not None:
        root = tmp_path / name / "infiniband"
        write_infiniband(root, ib)
        ib_devices = net.ib_devices(str(root))
    raw = {
        "gpus": gpus,
        "net": {"interfaces": [], "ib_devices": ib_devices},
        "hardware": hardware
        or {"nvswitches": 0, "fabric_manager_running": False, "xid": {"readable": True, "events": []}},
    }
    return NodeFacts(raw)


def findings(nodes: dict[str, NodeFacts], config: Config = CONFIG) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.status, str(r.details.get("item")), r.hosts) for r in judge_hardware(nodes, config)]


def test_recorded_xid_lines_are_read_with_their_gpu_and_number() -> None:
    events = hardware.parse_xid_lines((HARDWARE / "dmesg_xid31_rtx4090.txt").read_text())
    assert [(e["pci"], e["xid"]) for e in events] == [("0000:01:00", 31), ("0000:01:00", 31)]
    assert events[0]["detail"].startswith("pid=14292, name=python, Ch 00000030")
    events = hardware.parse_xid_lines((HARDWARE / "dmesg_xid62_45.txt").read_text())
    assert [e["xid"] for e in events] == [31, 62, 45, 45]
    events = hardware.parse_xid_lines((HARDWARE / "journal_xid45_after_149.txt").read_text())
    assert [(e["pci"], e["xid"]) for e in events] == [
        ("0000:dc:00", 45),
        ("0000:ed:00", 45),
        ("0000:ba:00", 45),
    ]
    (fell,) = hardware.parse_xid_lines((HARDWARE / "xid79_line.txt").read_text())
    assert fell == {"pci": "0000:44:00", "xid": 79, "detail": "GPU has fallen off the bus"}
    assert (action_of(79), action_of(48), action_of(31), action_of(45), action_of(149), action_of(999)) == (
        "reboot", "reset_gpu", "application", "info", "investigate", None,
    )  # fmt: skip


def test_pcie_links_read_from_sysfs_as_the_kernel_prints_them(tmp_path: Path) -> None:
    device = tmp_path / "device"
    device.mkdir()
    for name, text in (("current_link_speed", "16.0 GT/s PCIe"), ("max_link_speed", "32.0 GT/s PCIe"),
                       ("current_link_width", "8"), ("max_link_width", "16")):  # fmt: skip
        (device / name).write_text(text + "\n")
    assert net.pcie_link(str(device)) == {
        "gen_current": 4,
        "gen_max": 5,
        "width_current": 8,
        "width_max": 16,
    }
    assert net.parse_pcie_speed("2.5 GT/s") == 2.5 and net.pcie_generation(2.5) == 1
    assert net.parse_pcie_speed("Unknown") is None
    assert net.pcie_link(str(tmp_path / "virtual")) is None


def test_the_recorded_h100_reads_its_link_persistence_and_reasons() -> None:
    view = NodeFacts({"gpus": [H100]}).gpus[0]  # type: ignore[index]
    assert view.pcie_link is not None and not view.pcie_link.narrow
    assert view.pcie_link.text() == "x16 of x16, Gen5 of Gen5"
    assert view.persistence_mode == "enabled" and view.clock_event_reasons == 0x1


def test_ib_ports_read_state_physical_state_and_counters(tmp_path: Path) -> None:
    root = tmp_path / "ib"
    write_infiniband(root, GpuNode(ib_changes={"mlx5_1": {**IB_PORT_DOWN, "counters/link_downed": "3"}}))
    ports = net.ib_devices(str(root))
    assert [(p["name"], p["state"], p["phys_state"]) for p in ports] == [
        ("mlx5_0", "ACTIVE", "LinkUp"), ("mlx5_1", "DOWN", "Disabled"),
        ("mlx5_2", "ACTIVE", "LinkUp"), ("mlx5_3", "ACTIVE", "LinkUp"), ("mlx5_bond_0", "ACTIVE", "LinkUp"),
    ]  # fmt: skip
    assert ports[1]["counters"] == {"link_downed": 3, "symbol_error": 0}


def test_alike_healthy_nodes_pass(tmp_path: Path) -> None:
    nodes = {f"gpu{i}": node(tmp_path, f"gpu{i}") for i in range(1, 4)}
    (result,) = judge_hardware(nodes, CONFIG)
    assert result.status == "pass"
    assert result.summary == (
        "3 nodes: 12 GPUs with their PCIe links at full width and none slowing itself down, all "
        "registered with their NVSwitch fabric; 15 InfiniBand/RoCE ports ACTIVE; no XID error in the "
        "kernel log of gpu[1-3]"
    )


def test_each_fault_is_named_on_its_node_only(tmp_path: Path) -> None:
    nodes = {
        "gpu1": node(tmp_path, "gpu1", {2: {"pcie_link": {**H100["pcie_link"], "width_current": 4}}}),
        "gpu2": node(tmp_path, "gpu2", {1: {"clock_event_reasons": 0x8 | 0x40, "temperature_c": 93}}),
        "gpu3": node(tmp_path, "gpu3", ib=GpuNode(ib_changes={"mlx5_3": IB_PORT_DOWN})),
        "gpu4": node(tmp_path, "gpu4", ib=GpuNode(ib_changes={"mlx5_0": {"rate": "200 Gb/sec (4X HDR)"}})),
        "gpu5": node(tmp_path, "gpu5"),
    }
    results = judge_hardware(nodes, CONFIG)
    assert [(r.status, r.details["item"], r.hosts) for r in results] == [
        ("fail", "gpu_pcie_width", ("gpu1",)),
        ("fail", "gpu_slowdown", ("gpu2",)),
        ("fail", "ib_port_down", ("gpu3",)),
        ("fail", "ib_rate", ("gpu4",)),
    ]
    assert (
        results[0].summary
        == "gpu1: GPU 2 (serial gpu1-2) PCIe x4 of x16, Gen5 of Gen5 (fewer lanes than it can use)"
    )
    assert results[1].summary == (
        "gpu2: GPU 1 (serial gpu2-1) in hardware slowdown and thermal slowdown at 93 °C "
        "before the job started"
    )
    assert (
        results[2].summary == "gpu3: mlx5_3 port 1 is DOWN (physical state Disabled), ACTIVE on gpu[1-2,4-5]"
    )
    assert (
        results[3].summary == "gpu4: mlx5_0 port 1 at 200 Gb/sec (4X HDR), 400 Gb/sec (4X NDR) on gpu[1-3,5]"
    )


def test_a_missing_hca_persistence_off_and_counters_are_named(tmp_path: Path) -> None:
    nodes = {f"gpu{i}": node(tmp_path, f"gpu{i}") for i in range(1, 4)}
    short = node(tmp_path, "gpu4")
    kept = [d for d in short.raw["net"]["ib_devices"] if d["name"] != "mlx5_3"]
    short_raw = {**short.raw, "net": {"interfaces": [], "ib_devices": kept}}
    nodes["gpu4"] = NodeFacts(short_raw)
    nodes["gpu5"] = node(tmp_path, "gpu5", {0: {"persistence_mode": "disabled"}},
                         ib=GpuNode(ib_changes={"mlx5_1": {"counters/symbol_error": "117"}}))  # fmt: skip
    results = judge_hardware(nodes, CONFIG)
    assert [(r.status, r.details["item"], r.hosts) for r in results] == [
        ("warn", "persistence_mode", ("gpu5",)),
        ("fail", "ib_hcas", ("gpu4",)),
        ("pass", "ib_counters", ("gpu5",)),
    ]
    assert results[1].summary == "gpu4: HCAs mlx5_3 missing (the other nodes have them)"
    # Symbol errors counted since the last clear are a note (tests/test_counters.py).
    assert results[2].is_note and "mlx5_1 port 1 symbol_error 117" in results[2].summary


def test_persistence_off_on_every_gpu_of_every_node_warns_and_on_everywhere_says_nothing(
    tmp_path: Path,
) -> None:
    off = {gpu: {"persistence_mode": "disabled"} for gpu in range(8)}
    nodes = {f"gpu{i}": node(tmp_path, f"gpu{i}", off) for i in range(1, 3)}
    (result,) = judge_hardware(nodes, CONFIG)
    assert (result.status, result.details["item"], result.hosts) == (
        "warn",
        "persistence_mode",
        ("gpu1", "gpu2"),
    )
    assert result.summary.startswith("gpu[1-2]: persistence mode off on every GPU: ")
    healthy = {f"gpu{i}": node(tmp_path, f"gpu{i}") for i in range(1, 3)}
    assert [r.status for r in judge_hardware(healthy, CONFIG)] == ["pass"]


def test_nouveau_loaded_on_a_gpu_node_fails_that_node(tmp_path: Path) -> None:
    """DCGM's denylist: the open-source driver holds the GPUs the NVIDIA driver should drive."""
    modules = {"nvidia": "loaded", "nouveau": "not loaded"}
    nodes = {
        f"gpu{i}": NodeFacts({**node(tmp_path, f"gpu{i}").raw, "kernel_modules": modules}) for i in (1, 2)
    }
    held = {**nodes["gpu2"].raw, "kernel_modules": {"nvidia": "not loaded", "nouveau": "loaded"}}
    nodes["gpu2"] = NodeFacts(held)
    (result,) = [r for r in judge_hardware(nodes, CONFIG) if r.details["item"] == "denylisted_module"]
    assert (result.status, result.hosts) == ("fail", ("gpu2",))
    assert "nouveau module is loaded" in result.summary
    cpu_only = {h: NodeFacts({**n.raw, "gpus": []}) for h, n in nodes.items()}
    assert not [r for r in judge_hardware(cpu_only, CONFIG) if r.details.get("item") == "denylisted_module"]


def test_nvswitches_without_the_fabric_manager_fail(tmp_path: Path) -> None:
    lone = {"nvswitches": 4, "fabric_manager_running": False, "xid": {"readable": True, "events": []}}
    ok = {**lone, "fabric_manager_running": True}
    nodes = {"gpu1": node(tmp_path, "gpu1", hardware=ok), "gpu2": node(tmp_path, "gpu2", hardware=lone)}
    (result,) = judge_hardware(nodes, CONFIG)
    assert (result.status, result.hosts) == ("fail", ("gpu2",))
    assert "4 NVSwitches but the fabric manager (nv-fabricmanager) is not running" in result.summary


def test_the_recorded_h100_registered_with_its_fabric() -> None:
    assert H100["fabric"] == {"state": "completed", "status": "Success"}
    assert NodeFacts({"gpus": [H100]}).gpus[0].fabric_state == "completed"


FM_RUNNING = {"nvswitches": 4, "fabric_manager_running": True, "xid": {"readable": True, "events": []}}


def _fabric(state: str, status: str | None = None) -> dict[str, Any]:
    return {"fabric": {"state": state, "status": status}}


def test_gpus_not_registered_with_the_fabric_fail_on_their_node(tmp_path: Path) -> None:
    waiting = {i: _fabric("in_progress") for i in range(4)}
    nodes = {
        "gpu1": node(tmp_path, "gpu1", hardware=FM_RUNNING),
        "gpu2": node(tmp_path, "gpu2", gpu_changes=waiting, hardware=FM_RUNNING),
        "gpu3": node(tmp_path, "gpu3", gpu_changes={2: _fabric("not_started")}, hardware=FM_RUNNING),
    }
    results = judge_hardware(nodes, CONFIG)
    assert [(r.status, r.details["item"], r.hosts) for r in results] == [
        ("fail", "gpu_fabric", ("gpu2",)),
        ("fail", "gpu_fabric", ("gpu3",)),
    ]
    assert results[0].summary == (
        "gpu2: all 4 GPUs not registered with the NVSwitch fabric (registration in progress): "
        "CUDA cannot start on them"
    )
    assert results[1].summary.startswith("gpu3: GPU 2 (serial gpu3-2) not registered")
    assert results[1].details["gpus"] == [2]


def test_a_stopped_fabric_manager_and_its_unregistered_gpus_are_one_finding(tmp_path: Path) -> None:
    stopped = {**FM_RUNNING, "fabric_manager_running": False}
    waiting = {i: _fabric("not_started") for i in range(4)}
    nodes = {
        "gpu1": node(tmp_path, "gpu1", hardware=FM_RUNNING),
        "gpu2": node(tmp_path, "gpu2", gpu_changes=waiting, hardware=stopped),
    }
    (result,) = judge_hardware(nodes, CONFIG)
    assert (result.status, result.details["item"], result.hosts) == ("fail", "fabric_manager", ("gpu2",))
    assert result.summary == (
        "gpu2: 4 NVSwitches but the fabric manager (nv-fabricmanager) is not running; "
        "all 4 GPUs not registered with the fabric"
    )


def test_a_registration_completed_with_an_error_is_judged_against_the_same_gpus_elsewhere(
    tmp_path: Path,
) -> None:
    # The status a production node's GPUs reported ("nvidia-smi -q": Fabric State Completed,
    # Status Insufficient Resources, CliqueId 0; Azure/azhpc-images#506).
    erred = _fabric("completed", "Insufficient Resources")
    nodes = {
        "gpu1": node(tmp_path, "gpu1", hardware=FM_RUNNING),
        "gpu2": node(tmp_path, "gpu2", gpu_changes={1: erred}, hardware=FM_RUNNING),
    }
    (result,) = judge_hardware(nodes, CONFIG)
    assert (result.status, result.hosts) == ("fail", ("gpu2",))
    assert "GPU 1 (serial gpu2-1) completed fabric registration with an error (Insufficient Resources)" in (
        result.summary
    )
    # Where no GPU of that model registered cleanly (some systems report an error and run), nothing.
    everywhere = {i: erred for i in range(4)}
    alike = {name: node(tmp_path / "alike", name, gpu_changes=everywhere) for name in ("gpu1", "gpu2")}
    assert [r.status for r in judge_hardware(alike, CONFIG)] == ["pass"]


def test_gpus_without_a_fabric_are_not_judged_on_it(tmp_path: Path) -> None:
    """PCIe GPUs and A100 systems report no registration ("N/A"): nothing to judge."""
    none = {i: {"fabric": None} for i in range(4)}
    nodes = {name: node(tmp_path, name, gpu_changes=none) for name in ("gpu1", "gpu2")}
    assert [r.status for r in judge_hardware(nodes, CONFIG)] == ["pass"]


def _links(up: int, inactive: list[int]) -> dict[str, Any]:
    return {"nvlink": {"active": up, "inactive": inactive}}


def test_a_gpu_with_nvlinks_down_is_named_against_the_same_gpus(tmp_path: Path) -> None:
    healthy = {i: _links(18, []) for i in range(4)}
    nodes = {
        "gpu1": node(tmp_path, "gpu1", healthy),
        "gpu2": node(tmp_path, "gpu2", {**healthy, 1: _links(16, [5, 11])}),
        "gpu3": node(tmp_path, "gpu3", {**healthy, 0: _links(17, [3])}),
    }
    results = judge_hardware(nodes, CONFIG)
    assert [(r.status, r.details["item"], r.hosts) for r in results] == [
        ("fail", "gpu_nvlink", ("gpu2",)),
        ("fail", "gpu_nvlink", ("gpu3",)),
    ]
    assert results[0].summary == (
        "gpu2: GPU 1 (serial gpu2-1) NVLinks 5 and 11 inactive, 16 up "
        "(the other NVIDIA H100 80GB HBM3 GPUs have 18 up)"
    )
    assert results[0].details["inactive"] == {"1": [5, 11]}
    assert results[1].summary.startswith("gpu3: GPU 0 (serial gpu3-0) NVLink 3 inactive, 17 up")


def test_a_gpu_with_every_nvlink_down_is_named_and_cards_without_a_bridge_are_not(tmp_path: Path) -> None:
    healthy = {i: _links(18, []) for i in range(4)}
    down = {"nvlink": {"active": 0, "inactive": [], "all_inactive": True}}
    nodes = {"gpu1": node(tmp_path, "gpu1", healthy), "gpu2": node(tmp_path, "gpu2", {**healthy, 2: down})}
    (result,) = judge_hardware(nodes, CONFIG)
    assert result.summary == (
        "gpu2: GPU 2 (serial gpu2-2) all NVLinks inactive, 0 up "
        "(the other NVIDIA H100 80GB HBM3 GPUs have 18 up)"
    )
    # Cards with NVLink but no bridge fitted say the same of every GPU: nothing to compare.
    bare = {i: down for i in range(4)}
    nodes = {name: node(tmp_path, name, bare) for name in ("gpu1", "gpu2")}
    assert [r.status for r in judge_hardware(nodes, CONFIG)] == ["pass"]


def test_links_inactive_alike_on_every_gpu_are_not_named(tmp_path: Path) -> None:
    """Cards joined by NVLink bridges list their unconnected links as inactive, every one alike."""
    bridged = {i: _links(12, list(range(12, 18))) for i in range(4)}
    nodes = {name: node(tmp_path, name, bridged) for name in ("gpu1", "gpu2")}
    assert [r.status for r in judge_hardware(nodes, CONFIG)] == ["pass"]


def test_xids_are_classified_ignored_on_request_and_an_unreadable_log_is_said(tmp_path: Path) -> None:
    def log(name: str) -> dict[str, Any]:
        events = hardware.parse_xid_lines((HARDWARE / name).read_text())
        return {"nvswitches": 0, "fabric_manager_running": False, "xid": {"readable": True, "events": events}}

    unreadable = {
        "xid": {"readable": False, "reason": "dmesg: read kernel buffer failed: Operation not permitted"}
    }
    nodes = {
        "gpu1": node(tmp_path, "gpu1", hardware=log("xid79_line.txt")),
        "gpu2": node(tmp_path, "gpu2", hardware=log("dmesg_xid31_rtx4090.txt")),
        "gpu3": node(tmp_path, "gpu3", hardware=unreadable),
    }
    results = judge_hardware(nodes, CONFIG)
    assert [(r.status, r.hosts, r.is_note) for r in results] == [
        ("fail", ("gpu1",), False),
        ("pass", ("gpu2",), True),
    ]
    assert results[0].summary == (
        "gpu1: XID 79 (GPU has fallen off the bus) on 0000:44:00 (not a GPU the driver lists) in the kernel "
        "log: reboot the node and check the GPU's seating, power and PCIe path"
    )
    assert results[1].summary.startswith(
        "gpu2: XID 31 (GPU memory page fault) on 0000:01:00 (not a GPU the driver lists) \u00d72 in the "
        "kernel log: an application fault"
    )
    assert results[0].details["xid_not_readable"] == {"gpu3": unreadable["xid"]["reason"]}
    quiet = Config().with_sections(HardwareSection(ignore_xids=(31, 79)))
    (result,) = judge_hardware(nodes, quiet)
    assert result.status == "pass"
    assert result.summary.endswith(
        "no XID error in the kernel log of gpu[1-2]; "
        "kernel log not readable on gpu3, so XID errors are unknown there"
    )


def test_the_hardware_section_parses() -> None:
    parsed = parse_config({"hardware": {"ignore_xids": [13, 31]}})
    assert parsed.section(HardwareSection).ignore_xids == (13, 31)
    with pytest.raises(Exception, match=r"hardware\.ignore_xids"):
        parse_config({"hardware": {"ignore_xids": "31"}})
