"""A GPU's link error counters on nvidia-smi's path (preflight/node/smi_counters.py): the NVLink
errors of ``nvidia-smi nvlink -e`` summed over links and the PCIe replays of ``nvidia-smi -q -d
PCIE``, read from real captures (tests/data/facts/SOURCES.md, tests/data/gpu_h100_580/SOURCES.md)
into the same ``link_errors`` as NVML's path, and judged by ``hardware``'s ``gpu_link_errors``."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from checks.hardware.gpu_link_errors import judge_gpu_link_errors
from preflight.facts import NodeFacts
from preflight.facts_gpu import GpuFacts
from preflight.node import smi
from preflight.node.nvml import LINK_ERROR_FIELDS
from preflight.node.smi_counters import (
    LINK_ERROR_KEYS,
    add_link_errors,
    nvlink_errors_from_smi,
    pcie_replays_from_smi,
)
from tests.lab.gpu import GpuNode, bus_id, nvlink_errors, nvlink_status, pcie_report

TESTS = Path(__file__).parent
NVLINK_H100 = (TESTS / "data" / "facts" / "smi_nvlink_errors_h100_abridged.txt").read_text(encoding="utf-8")
QUERY_H100 = (TESTS / "data" / "gpu_h100_580" / "smi_q.out").read_text(encoding="utf-8")
H100_NODE = json.loads((TESTS / "data" / "runs" / "h100_node.json").read_text(encoding="utf-8"))
LAB_SMI = TESTS / "lab" / "nvidia_smi.py"
QUERY_GPU = TESTS / "data" / "facts" / "smi_query_gpu_h100_590.48.01_idle.csv"
APPS = TESTS / "data" / "facts" / "smi_compute_apps_h100_590.48.01_idle.csv"


def test_the_recorded_h100_counts_no_nvlink_error_on_the_links_it_shows() -> None:
    """Its three counters of links 0, 1 and 17 (the source cut the others to ``[...]``); nvidia-smi
    prints no data CRC count on this driver, so none is read."""
    assert nvlink_errors_from_smi(NVLINK_H100) == {
        0: {"nvlink_replay": 0, "nvlink_recovery": 0, "nvlink_crc_flit": 0}
    }


def test_counts_are_summed_over_a_gpus_links_and_older_drivers_words_are_read() -> None:
    """The recorded layout with counts in it, and a GPU printing nvml.h's words for the four
    counters (older drivers); a GPU that prints no counter (no NVLink) has no entry."""
    counted = NVLINK_H100.replace("Link 1: CRC Errors: 0", "Link 1: CRC Errors: 4812").replace(
        "Link 17: CRC Errors: 0", "Link 17: CRC Errors: 8"
    )
    older = (
        "GPU 1: Tesla P100-SXM2-16GB (UUID: GPU-1)\n"
        "\t Link 0: Data link receive flow control digit CRC error counter: 2\n"
        "\t Link 0: Data link receive data CRC error counter: 3\n"
        "\t Link 0: Data link transmit replay error counter: 5\n"
        "\t Link 0: Data link transmit recovery error counter: 1\n"
        "\t Link 1: Data link receive data CRC error counter: 4\n"
        "GPU 2: NVIDIA L4 (UUID: GPU-2)\n"
    )
    assert nvlink_errors_from_smi(counted + older) == {
        0: {"nvlink_replay": 0, "nvlink_recovery": 0, "nvlink_crc_flit": 4820},
        1: {"nvlink_crc_flit": 2, "nvlink_crc_data": 7, "nvlink_replay": 5, "nvlink_recovery": 1},
    }
    assert nvlink_errors_from_smi("") == {}


def test_the_recorded_h100s_pcie_replays_are_read_by_its_bus_id() -> None:
    assert pcie_replays_from_smi(QUERY_H100) == {"0000:00:06.0": 0}
    # Older drivers write "Replays since reset".
    older = QUERY_H100.replace(
        "Replays Since Reset                            : 0", "Replays since reset : 4000"
    )
    assert pcie_replays_from_smi(older) == {"0000:00:06.0": 4000}


def test_both_paths_give_the_same_counters() -> None:
    """The keys of NVML's field values are the smi path's; a counter the report does not print is
    None on both paths, and the typed facts read neither as a count."""
    assert tuple(key for key, _, _ in LINK_ERROR_FIELDS) == LINK_ERROR_KEYS
    gpus: list[dict[str, Any]] = [{"index": 0, "pci_bus_id": "00000000:00:06.0"}]
    add_link_errors(gpus, NVLINK_H100, QUERY_H100)
    assert gpus[0]["link_errors"] == {
        "pcie_replays": 0,
        "nvlink_crc_flit": 0,
        "nvlink_crc_data": None,
        "nvlink_replay": 0,
        "nvlink_recovery": 0,
    }
    assert GpuFacts(gpus[0]).link_errors == {
        "pcie_replays": 0,
        "nvlink_crc_flit": 0,
        "nvlink_replay": 0,
        "nvlink_recovery": 0,
    }


def test_a_report_that_failed_is_no_count() -> None:
    """Both reports failed: no counters at all (None, not zeros); one failed: its counters None;
    a GPU neither report lists (one that answers nothing) has no counters either."""
    gpus: list[dict[str, Any]] = [{"index": 0, "pci_bus_id": "00000000:00:06.0"}, {"index": 7}]
    add_link_errors(gpus, None, None)
    assert [g["link_errors"] for g in gpus] == [None, None]
    add_link_errors(gpus, None, QUERY_H100)
    assert gpus[0]["link_errors"] == {"pcie_replays": 0, **dict.fromkeys(LINK_ERROR_KEYS[1:])}
    add_link_errors(gpus, NVLINK_H100, None)
    assert gpus[0]["link_errors"]["pcie_replays"] is None and gpus[0]["link_errors"]["nvlink_replay"] == 0
    assert gpus[1]["link_errors"] is None


def _node(counts: dict[str, int | None]) -> NodeFacts:
    facts: dict[str, Any] = copy.deepcopy(H100_NODE)
    for gpu in facts["gpus"]:
        gpu["link_errors"] = dict(counts)
    return NodeFacts(facts)


def test_healthy_captures_say_nothing_and_one_gpus_crc_errors_are_a_note() -> None:
    gpus: list[dict[str, Any]] = [{"index": 0, "pci_bus_id": "00000000:00:06.0"}]
    add_link_errors(gpus, NVLINK_H100, QUERY_H100)
    healthy = gpus[0]["link_errors"]
    nodes = {f"gpu{i}": _node(healthy) for i in range(1, 4)}
    assert judge_gpu_link_errors(nodes) == []
    nodes["gpu2"].raw["gpus"][1]["link_errors"] = {**healthy, "nvlink_crc_flit": 4812}
    [note] = judge_gpu_link_errors(nodes)
    assert note.hosts == ("gpu2",) and note.details["gpus"] == [1]
    assert "GPU 1: NVLink CRC flit errors 4812 (like GPUs' median 0)" in note.summary


def _stand_in(tmp_path: Path, node: GpuNode) -> str:
    """The lab's stand-in nvidia-smi serving ``node``'s reports beside the recorded capture."""
    capture = tmp_path / "query-gpu.csv"
    capture.write_text(QUERY_GPU.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "nvlink-status.txt").write_text(nvlink_status(node, 1), encoding="utf-8")
    (tmp_path / "nvlink-errors.txt").write_text(nvlink_errors(node, 1), encoding="utf-8")
    (tmp_path / "query-pcie.txt").write_text(pcie_report(node), encoding="utf-8")
    script = tmp_path / "nvidia-smi"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{LAB_SMI}" "{capture}" "{APPS}" "$@"\n')
    script.chmod(0o755)
    return str(script)


def test_the_reports_are_merged_by_gpu_index_and_bus_id(tmp_path: Path) -> None:
    """Through the lab's stand-in serving the recorded H100's fields: the NVLink counts of GPU 0
    and the replays printed under the recorded GPU's bus id land on it; replays printed under
    another bus id do not."""
    node = GpuNode(
        gpus=1,
        nvlink_errors={0: {3: {"CRC Errors": 4812}, 5: {"Replay Errors": 2}}},
        pcie_changes={0: {"Replays Since Reset": "17"}},
    )
    script = _stand_in(tmp_path, node)
    (gpu,) = smi.smi_gpus(script)
    assert gpu["pci_bus_id"] == "00000000:00:09.0" != bus_id(0)
    assert gpu["link_errors"] == {
        "pcie_replays": None,
        "nvlink_crc_flit": 4812,
        "nvlink_crc_data": None,
        "nvlink_replay": 2,
        "nvlink_recovery": 0,
    }
    report = pcie_report(node).replace(bus_id(0), "00000000:00:09.0")
    (tmp_path / "query-pcie.txt").write_text(report, encoding="utf-8")
    (gpu,) = smi.smi_gpus(script)
    assert gpu["link_errors"]["pcie_replays"] == 17


def test_a_refused_report_leaves_no_count(tmp_path: Path) -> None:
    """An nvidia-smi that refuses ``-q -d PCIE`` and lists no NVLink: no counters, not zeros."""
    script = _stand_in(tmp_path, GpuNode(gpus=1))
    for name in ("query-pcie.txt", "nvlink-status.txt"):
        (tmp_path / name).unlink()
    (gpu,) = smi.smi_gpus(script)
    assert gpu["link_errors"] is None
