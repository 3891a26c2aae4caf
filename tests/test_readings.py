"""The general comparison of like parts (``checks/readings``) on recorded facts of real machines:
the H100 VM of tests/data/gpu_h100_580 (facts_nvml.json, facts_smi.json) and the ConnectX-7 node's
InfiniBand tree of tests/data/hardware/ib; each test changes one reading of one part of a copy."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from checks.readings import judge_readings
from checks.readings.doc import BEGIN, END, tables
from checks.readings.fields import GPU_FIELDS, NIC_FIELDS, NODE_FIELDS, PORT_FIELDS
from preflight.facts import NodeFacts

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
H100 = json.loads((DATA / "gpu_h100_580" / "facts_nvml.json").read_text())["facts"]
H100_SMI = json.loads((DATA / "gpu_h100_580" / "facts_smi.json").read_text())["facts"]


def _node(gpus: int = 8, facts: Mapping[str, Any] = H100) -> dict[str, Any]:
    """A copy of the H100 VM's facts with ``gpus`` GPUs like its one."""
    node = copy.deepcopy(dict(facts))
    one = node["gpus"][0]
    node["gpus"] = [{**copy.deepcopy(one), "index": i, "serial": f"17530240370{i:02d}"} for i in range(gpus)]
    return node


def _cluster(n: int, gpus: int = 8, facts: Mapping[str, Any] = H100) -> dict[str, dict[str, Any]]:
    return {f"gpu{i}": _node(gpus, facts) for i in range(1, n + 1)}


def _judge(cluster: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    return judge_readings({host: NodeFacts(facts) for host, facts in cluster.items()})


def _problems(cluster: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    return [r for r in _judge(cluster) if r.status != "pass"]


@pytest.mark.parametrize("facts", [H100, H100_SMI], ids=["nvml", "nvidia-smi"])
@pytest.mark.parametrize("nodes", [2, 3, 8])
def test_healthy_recorded_nodes_pass_and_say_what_was_compared(facts: Mapping[str, Any], nodes: int) -> None:
    results = _judge(_cluster(nodes, facts=facts))
    assert [r.status for r in results] == ["pass"]
    details = results[0].details
    assert details["fields_compared"]["GPU"] >= 4
    assert details["parts"]["GPU"] == 8 * nodes
    assert details["undeclared"] == {}


def test_a_gpu_idling_45_c_hotter_than_its_like_gpus_is_named_on_its_node() -> None:
    cluster = _cluster(3)
    cluster["gpu2"]["gpus"][5]["temperature_c"] = 49 + 45
    [result] = _problems(cluster)
    assert (result.status, result.hosts, result.details["item"]) == ("warn", ("gpu2",), "odd_reading")
    assert "GPU 5 (serial 1753024037005)" in result.summary
    assert "idle temperature 94 C" in result.summary and "49 C" in result.summary
    [field] = result.details["fields"]
    assert field["parts"] == [
        {"host": "gpu2", "part": "GPU 5 (serial 1753024037005)", "slot": "5", "value": "94 C"}
    ]


@pytest.mark.parametrize("nodes", [2, 3])
def test_a_hot_gpu_is_named_in_a_small_cluster_of_one_gpu_a_node(nodes: int) -> None:
    cluster = _cluster(nodes, gpus=1)
    cluster["gpu1"]["gpus"][0]["temperature_c"] = 90
    [result] = _problems(cluster)
    assert result.hosts == ("gpu1",)


def test_a_natural_spread_of_idle_temperatures_and_power_says_nothing() -> None:
    """31-44 C and 60-130 W across healthy GPUs, and one at 47 C: none named."""
    cluster = _cluster(4)
    temperatures = iter([31, 33, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44] * 3)
    powers = iter([60, 70, 75, 80, 90, 100, 110, 130] * 4)
    for node in cluster.values():
        for gpu in node["gpus"]:
            gpu["temperature_c"] = next(temperatures)
            gpu["power_w"] = float(next(powers))
    cluster["gpu3"]["gpus"][2]["temperature_c"] = 47
    assert _problems(cluster) == []


def test_a_busy_gpu_is_not_held_to_idle_readings() -> None:
    cluster = _cluster(3)
    gpu = cluster["gpu1"]["gpus"][0]
    gpu.update(
        temperature_c=80,
        power_w=650.0,
        processes=[{"pid": 4242, "used_memory_bytes": 1 << 30, "name": "python"}],
    )
    assert _problems(cluster) == []


def test_a_gpu_in_a_slower_slot_is_named_with_its_like_gpus_value() -> None:
    cluster = _cluster(3)
    cluster["gpu3"]["gpus"][1]["pcie_link"]["gen_max"] = 4
    [result] = _problems(cluster)
    assert (result.hosts, result.details["item"]) == (("gpu3",), "odd_setting")
    assert "PCIe generation it can run at (its slot's) 4" in result.summary
    assert result.details["fields"][0]["usual"] == "5"


def test_an_hca_on_older_firmware_than_the_same_hcas_elsewhere_is_named_once() -> None:
    """Four ConnectX-7 cards a node (one port each) on three nodes; one node's cards run older
    firmware: one finding on that node listing its four ports, with both versions."""
    cluster = _cluster(3)
    for node in cluster.values():
        node["net"] = {"interfaces": [], "ib_devices": [_port(f"mlx5_{i}", "28.41.1000") for i in range(4)]}
    for port in cluster["gpu2"]["net"]["ib_devices"]:
        port["fw_ver"] = "28.39.1002"
    [result] = _problems(cluster)
    assert result.hosts == ("gpu2",)
    assert "firmware 28.39.1002" in result.summary and "28.41.1000" in result.summary
    assert "InfiniBand, MT4129" in result.summary
    assert len(result.details["fields"][0]["parts"]) == 4


def test_two_nodes_that_differ_are_both_named_where_no_majority_decides() -> None:
    cluster = _cluster(2)
    cluster["gpu1"]["sysctl"]["net.core.somaxconn"] = 4096
    cluster["gpu2"]["sysctl"]["net.core.somaxconn"] = 128
    [result] = _problems(cluster)
    assert set(result.hosts) == {"gpu1", "gpu2"}
    assert "no majority decides" in result.summary and "net.core.somaxconn" in result.summary
    assert {s["value"] for s in result.details["fields"][0]["sides"]} == {"4096", "128"}


def test_fields_that_differ_on_the_same_node_are_one_finding() -> None:
    cluster = _cluster(3)
    for node in cluster.values():
        node["dmi"] = {"bios_version": "1.8.2", "bios_date": "05/14/2024", "board_name": "X13DEG-OAD"}
    cluster["gpu3"]["dmi"].update(bios_version="1.4.0", bios_date="01/09/2023")
    [result] = _problems(cluster)
    assert result.hosts == ("gpu3",)
    assert sorted(f["words"] for f in result.details["fields"]) == ["BIOS date", "BIOS version"]
    assert "1.4.0" in result.summary and "1.8.2" in result.summary


def test_a_field_no_one_declared_is_compared_and_listed_as_undeclared() -> None:
    cluster = _cluster(3)
    for node in cluster.values():
        node["gpus"][0]["fan_speed_pct"] = 30
    cluster["gpu1"]["gpus"][0]["fan_speed_pct"] = 100
    [result] = _problems(cluster)
    assert result.hosts == ("gpu1",)
    assert result.details["undeclared"] == {"GPU": ["fan_speed_pct"]}


def test_swap_is_compared_on_or_off_not_by_size() -> None:
    cluster = _cluster(3)
    for size, node in zip((8 << 30, (8 << 30) - 4096, 7 << 30), cluster.values(), strict=True):
        node["memory"]["swap_total_bytes"] = size
    assert _problems(cluster) == []
    cluster["gpu2"]["memory"]["swap_total_bytes"] = 0
    [result] = _problems(cluster)
    assert result.hosts == ("gpu2",) and "swap off" in result.summary and "on" in result.summary


def test_a_counter_since_boot_far_above_its_like_parts_is_a_note() -> None:
    cluster = _cluster(3)
    cluster["gpu1"]["gpus"][3]["remapped_rows"]["correctable"] = 3
    assert _problems(cluster) == [] and not [r for r in _judge(cluster) if r.is_note]
    cluster["gpu1"]["gpus"][3]["remapped_rows"]["correctable"] = 400
    [note] = [r for r in _judge(cluster) if r.is_note]
    assert note.hosts == ("gpu1",) and note.details["item"] == "odd_counter"


def test_fields_another_rule_judges_are_left_to_it() -> None:
    """A GPU with persistence mode off and a lower power limit: hardware's rules name them."""
    cluster = _cluster(3)
    cluster["gpu1"]["gpus"][0].update(persistence_mode="disabled", power_limit_w=500.0)
    cluster["gpu1"]["os"]["kernel"] = "5.15.0-91-generic"
    assert _problems(cluster) == []


def test_nodes_of_another_kind_are_not_like_parts() -> None:
    cluster = _cluster(3)
    cluster["login"] = copy.deepcopy(cluster["gpu1"])
    cluster["login"]["cpu"]["model"] = "Intel(R) Xeon(R) Platinum 8480+"
    cluster["login"]["limits"]["nproc"] = {"soft": 4096, "hard": 4096}
    assert _problems(cluster) == []


def test_every_declaration_is_one_path_each() -> None:
    for fields in (GPU_FIELDS, PORT_FIELDS, NIC_FIELDS, NODE_FIELDS):
        paths = [f.path for f in fields]
        assert len(paths) == len(set(paths))


def test_the_docs_list_every_declared_field() -> None:
    page = (ROOT / "docs" / "readings.md").read_text(encoding="utf-8")
    start, end = page.index(BEGIN), page.index(END) + len(END)
    assert page[start:end] == tables()


def _port(name: str, firmware: str) -> dict[str, Any]:
    """A ConnectX-7 port as the probe reads tests/data/hardware/ib/sys-class-infiniband-h100."""
    return {
        "name": name,
        "port": 1,
        "state": "ACTIVE",
        "rate": "400 Gb/sec (4X NDR)",
        "link_layer": "InfiniBand",
        "phys_state": "LinkUp",
        "counters": {"link_downed": 0, "symbol_error": 0},
        "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
        "width": "4X",
        "hca_type": "MT4129",
        "board_id": "MT_0000000838",
        "fw_ver": firmware,
        "node_desc": f"{name} HCA",
        "node_guid": "946d:ae03:00cd:e72c",
        "virtual": False,
    }


def test_corrected_ecc_far_above_like_gpus_is_a_note_and_routine_counts_say_nothing() -> None:
    cluster = _cluster(3)
    counts = iter([0, 0, 3, 0, 12, 0, 1, 40] * 3)
    for node in cluster.values():
        for gpu in node["gpus"]:
            gpu["ecc_corrected_aggregate"] = next(counts)
    assert [r for r in _judge(cluster) if r.is_note or r.status != "pass"] == []
    cluster["gpu3"]["gpus"][6]["ecc_corrected_aggregate"] = 5000
    [note] = [r for r in _judge(cluster) if r.is_note]
    assert (note.hosts, note.details["item"]) == (("gpu3",), "odd_counter")
    assert note.summary == (
        "gpu3 GPU 6 (serial 1753024037006): corrected ECC errors over its life 5000; "
        "like GPUs (NVIDIA H100 80GB HBM3): a median of 0"
    )


def _nic(name: str, **extra: Any) -> dict[str, Any]:
    """A ConnectX-7 Ethernet interface as the probe reads it (its PCIe link, driver, counters)."""
    return {
        "name": name,
        "addresses": [],
        "mtu": 9000,
        "state": "up",
        "mac": "b8:3f:d2:00:00:01",
        "speed_mbps": 400000,
        "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
        "driver": "mlx5_core",
        "statistics": {"rx_errors": 0, "rx_crc_errors": 0, "rx_dropped": 1200},
        "carrier_changes": 2,
        **extra,
    }


def test_a_network_card_that_flapped_far_more_than_its_like_cards_warns_and_drops_say_nothing() -> None:
    cluster = _cluster(3)
    for i, node in enumerate(cluster.values()):
        node["net"] = {"interfaces": [_nic("ens1f0np0", statistics={"rx_dropped": 1200 * (i + 1)})]}
    assert _problems(cluster) == []
    cluster["gpu2"]["net"]["interfaces"][0]["carrier_changes"] = 412
    [result] = _problems(cluster)
    assert (result.hosts, result.details["item"]) == (("gpu2",), "odd_counter")
    assert result.summary == (
        "gpu2 ens1f0np0: link state changes since boot 412; like network cards (ens1f0np0): a median of 2"
    )


def test_a_network_card_at_a_lower_speed_or_mtu_than_its_like_cards_is_named() -> None:
    cluster = _cluster(4)
    for node in cluster.values():
        node["net"] = {
            "interfaces": [_nic("ens1f0np0"), {"name": "docker0", "addresses": [], "state": "down"}]
        }
    cluster["gpu4"]["net"]["interfaces"][0].update(speed_mbps=200000, mtu=1500)
    cluster["gpu1"]["net"]["interfaces"][1]["state"] = "up"  # a bridge: no card, not compared
    [result] = _problems(cluster)
    assert result.hosts == ("gpu4",)
    assert sorted(f["words"] for f in result.details["fields"]) == ["MTU", "link speed (Mb/s)"]


def test_a_setting_every_node_holds_differently_names_a_few_values_and_keeps_them_all() -> None:
    cluster = _cluster(6, gpus=1)
    for i, node in enumerate(cluster.values()):
        node["sysctl"]["net.core.rmem_max"] = 212992 * (i + 1)
    [result] = _problems(cluster)
    assert len(result.hosts) == 6
    assert result.summary.endswith("; and 2 more values")
    assert len(result.details["fields"][0]["sides"]) == 6
