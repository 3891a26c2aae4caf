"""The GPUs' firmware: the probe reads each GPU's VBIOS and InfoROM image versions (and, through
NVML, whether its InfoROM is valid), and the ``versions`` judge names the nodes whose GPUs run
other firmware than the same model elsewhere, and fails a corrupted InfoROM. Nodes are the recorded
H100 node (tests/data/runs/h100_node.json) with the firmware the recorded nvidia-smi capture shows."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from checks.versions import judge_versions
from checks.versions.gpu_firmware import judge_gpu_firmware
from checks.versions.present import PRESENTATION
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.node import nvml, smi
from tests.lab.gpu import GpuNode, gpu_capture
from tests.test_node_facts import fake_pynvml

DATA = Path(__file__).parent / "data"
H100 = json.loads((DATA / "runs" / "h100_node.json").read_text(encoding="utf-8"))
CAPTURE = DATA / "facts" / "smi_query_gpu_h100_590.48.01_idle.csv"
MODEL, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
VBIOS, OLD_VBIOS = "96.00.A5.00.01", "96.00.61.00.01"
INFOROM, OLD_INFOROM = "G520.0200.00.05", "G520.0200.00.03"
SERIAL = "1652923017654"

GpuChanges = Mapping[int, Mapping[str, Any]]  # GPU index -> GPU facts changed


# --------------------------------------------------------------------------- the probe, through NVML


def firmware_nvml(inforom_error: int | None = None, **missing: bool) -> Any:
    """pynvml's firmware calls as an H100 answers them (bytes, as older pynvml returns); the
    InfoROM validation raises NVMLError(``inforom_error``) where given. ``vbios=True`` etc. in
    ``missing``: that call is not in this pynvml."""

    def validate(handle: object) -> None:
        if inforom_error is not None:
            raise pynvml.NVMLError(inforom_error)

    calls = {
        "vbios": ("nvmlDeviceGetVbiosVersion", lambda handle: VBIOS.encode()),
        "image": ("nvmlDeviceGetInforomImageVersion", lambda handle: INFOROM),
        "validate": ("nvmlDeviceValidateInforom", validate),
    }
    return SimpleNamespace(
        NVMLError=pynvml.NVMLError,
        NVMLError_NotSupported=pynvml.NVMLError_NotSupported,
        NVML_ERROR_CORRUPTED_INFOROM=pynvml.NVML_ERROR_CORRUPTED_INFOROM,
        **{name: call for key, (name, call) in calls.items() if not missing.get(key)},
    )


def test_nvml_reads_the_vbios_the_inforom_image_and_a_valid_inforom() -> None:
    assert nvml._nvml_firmware(firmware_nvml(), object()) == {
        "vbios_version": VBIOS,
        "inforom_image": INFOROM,
        "inforom_valid": True,
    }


def test_nvml_says_a_corrupted_inforom_is_not_valid() -> None:
    found = nvml._nvml_firmware(firmware_nvml(pynvml.NVML_ERROR_CORRUPTED_INFOROM), object())
    assert found["inforom_valid"] is False


# What a driver answers where it cannot validate the InfoROM: unknown, not corrupted.
UNKNOWN_ERRORS = (
    pynvml.NVML_ERROR_NOT_SUPPORTED,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    pynvml.NVML_ERROR_UNKNOWN,
)


@pytest.mark.parametrize("error", UNKNOWN_ERRORS)
def test_a_driver_that_cannot_validate_the_inforom_leaves_it_unknown(error: int) -> None:
    assert nvml._nvml_firmware(firmware_nvml(error), object())["inforom_valid"] is None


def test_a_pynvml_without_the_firmware_calls_reads_them_as_unknown() -> None:
    found = nvml._nvml_firmware(firmware_nvml(vbios=True, image=True, validate=True), object())
    assert found == {"vbios_version": None, "inforom_image": None, "inforom_valid": None}


def test_the_firmware_is_part_of_each_gpu_read_through_nvml_without_a_problem() -> None:
    nv = fake_pynvml()
    nv.NVML_ERROR_CORRUPTED_INFOROM = 14
    nv.nvmlDeviceGetVbiosVersion = lambda handle: VBIOS
    nv.nvmlDeviceGetInforomImageVersion = lambda handle: b"G520.0200.00.05"
    nv.nvmlDeviceValidateInforom = lambda handle: None
    _, (hopper, volta), problems = nvml.nvml_snapshot(nv)
    for gpu in (hopper, volta):
        assert (gpu["vbios_version"], gpu["inforom_image"], gpu["inforom_valid"]) == (VBIOS, INFOROM, True)
    assert not [label for label in problems if "vbios" in label or "inforom" in label]


# --------------------------------------------------------------------------- the probe, through nvidia-smi


def test_nvidia_smi_reads_the_recorded_h100s_vbios_and_inforom_image() -> None:
    (gpu,) = smi.gpus_from_smi(CAPTURE.read_text(encoding="utf-8"), None, header=True)
    assert gpu["vbios_version"] == VBIOS
    assert gpu["inforom_image"] == INFOROM
    assert gpu["inforom_valid"] is None  # NVML's validation only


def test_the_firmware_fields_are_asked_in_their_own_group_the_recorded_driver_knows() -> None:
    header = CAPTURE.read_text(encoding="utf-8").splitlines()[0]
    known = {column.strip().split(" [")[0] for column in header.split(",")}
    assert ("vbios_version", "inforom.img") in smi.SMI_HEALTH_GROUPS
    assert {"vbios_version", "inforom.img"} <= known


def test_one_gpus_vbios_changed_in_the_stand_in_capture_reads_back() -> None:
    text = gpu_capture(GpuNode(gpus=4, changes={2: {"vbios_version": OLD_VBIOS}}), 1)
    gpus = smi.gpus_from_smi(text, None, header=True)
    assert [g["vbios_version"] for g in gpus] == [VBIOS, VBIOS, OLD_VBIOS, VBIOS]
    assert {g["inforom_image"] for g in gpus} == {INFOROM}


def test_not_available_firmware_reads_as_unknown() -> None:
    row = {"index": "0", "uuid": "GPU-1", "vbios_version": "[N/A]", "inforom.img": "N/A"}
    gpu = smi.gpu_from_smi_row(row)
    assert (gpu["vbios_version"], gpu["inforom_image"]) == (None, None)


# --------------------------------------------------------------------------- the judge


def node(changes: GpuChanges | None = None, gpus: int = 4, **everywhere: Any) -> dict[str, Any]:
    """The recorded H100 node with ``gpus`` GPUs running the recorded firmware, ``everywhere``
    set on each GPU and ``changes`` on the GPUs named by index."""
    facts = copy.deepcopy(H100)
    recorded = facts["gpus"]
    facts["gpus"] = [
        {
            **copy.deepcopy(recorded[i % len(recorded)]),
            "index": i,
            "vbios_version": VBIOS,
            "inforom_image": INFOROM,
            "inforom_valid": True,
            **everywhere,
            **(changes or {}).get(i, {}),
        }
        for i in range(gpus)
    ]
    return dict(facts)


def cluster(n: int = 4, **nodes: dict[str, Any]) -> dict[str, NodeFacts]:
    """``n`` nodes node1.. of the recorded H100 node; ``node3=node(...)`` replaces one."""
    return {f"node{i}": NodeFacts(nodes.get(f"node{i}") or node()) for i in range(1, n + 1)}


def firmware(found: Mapping[str, NodeFacts]) -> list[CheckResult]:
    return judge_gpu_firmware(found, "versions")


def only(results: list[CheckResult]) -> CheckResult:
    assert len(results) == 1, [r.summary for r in results]
    return results[0]


def test_four_nodes_with_the_same_firmware_have_no_finding_and_versions_still_pass() -> None:
    nodes = cluster()
    assert firmware(nodes) == []
    result = only(judge_versions(nodes, Config()))
    assert result.status == "pass"
    assert result.summary == "9 versions and 18 packages agree on 4 nodes"


def test_one_node_of_four_with_another_vbios_is_named_alone() -> None:
    nodes = cluster(node3=node(vbios_version=OLD_VBIOS))
    result = only(judge_versions(nodes, Config()))
    assert (result.status, result.hosts, result.details["item"]) == ("warn", ("node3",), "gpu_vbios")
    assert result.summary == f"node3: VBIOS {OLD_VBIOS} on its {MODEL} GPUs, {VBIOS} on node[1-2,4]"
    assert result.details["model"] == MODEL
    assert result.details["firmware"] == {
        "vbios": {"majority": VBIOS, "values": {VBIOS: ["node1", "node2", "node4"], OLD_VBIOS: ["node3"]}}
    }
    assert "nvflash" in PRESENTATION.advice(result)


def test_another_inforom_image_alone_is_its_own_item() -> None:
    result = only(firmware(cluster(node2=node(inforom_image=OLD_INFOROM))))
    assert (result.status, result.hosts, result.details["item"]) == ("warn", ("node2",), "gpu_inforom")
    assert result.summary == f"node2: InfoROM {OLD_INFOROM} on its {MODEL} GPUs, {INFOROM} on node[1,3-4]"


def test_a_node_behind_in_both_vbios_and_inforom_is_one_finding_saying_both() -> None:
    result = only(firmware(cluster(node4=node(vbios_version=OLD_VBIOS, inforom_image=OLD_INFOROM))))
    assert (result.status, result.hosts, result.details["item"]) == ("warn", ("node4",), "gpu_firmware")
    assert result.summary == (
        f"node4: VBIOS {OLD_VBIOS} and InfoROM {OLD_INFOROM} on its {MODEL} GPUs, "
        f"VBIOS {VBIOS} and InfoROM {INFOROM} on node[1-3]"
    )
    assert set(result.details["firmware"]) == {"vbios", "inforom"}


def test_two_nodes_that_differ_are_both_named_with_no_majority() -> None:
    result = only(firmware(cluster(2, node2=node(vbios_version=OLD_VBIOS))))
    assert (result.status, set(result.hosts)) == ("warn", {"node1", "node2"})
    sides = f"node1: {VBIOS}; node2: {OLD_VBIOS}"
    assert result.summary == f"VBIOS differs on the {MODEL} GPUs, no majority: {sides}"
    assert result.details["firmware"]["vbios"]["majority"] is None


def test_two_against_two_names_every_node_with_no_majority() -> None:
    old = node(vbios_version=OLD_VBIOS)
    result = only(firmware(cluster(node3=old, node4=old)))
    assert set(result.hosts) == {"node1", "node2", "node3", "node4"}
    assert "no majority" in result.summary


def test_a_node_with_one_gpu_of_another_vbios_among_eight_is_named_with_the_gpu() -> None:
    nodes = {name: NodeFacts(node(gpus=8)) for name in ("node1", "node2", "node3", "node4")}
    nodes["node2"] = NodeFacts(node({3: {"vbios_version": OLD_VBIOS}}, gpus=8))
    result = only(firmware(nodes))
    assert (result.status, result.hosts, result.details["item"]) == ("warn", ("node2",), "gpu_firmware_mixed")
    assert result.summary == (
        f"node2: its {MODEL} GPUs run different firmware: VBIOS {OLD_VBIOS} on GPU 3, {VBIOS} on GPUs 0-2,4-7"
    )
    assert result.details["gpus"] == {"vbios": {VBIOS: [0, 1, 2, 4, 5, 6, 7], OLD_VBIOS: [3]}}


def test_a_lone_node_is_compared_with_nothing() -> None:
    assert firmware(cluster(1)) == []


def test_a_corrupted_inforom_fails_naming_the_node_the_gpu_and_its_serial() -> None:
    nodes = cluster(node3=node({5: {"inforom_valid": False, "serial": SERIAL}}, gpus=8))
    result = only(judge_versions(nodes, Config()))
    assert (result.status, result.hosts) == ("fail", ("node3",))
    assert result.details["item"] == "gpu_inforom_corrupt"
    assert result.summary == (
        f"node3: the InfoROM of GPU 5 (serial {SERIAL}) is corrupted (NVML's InfoROM validation fails)"
    )
    assert result.details["gpus"] == [{"index": 5, "serial": SERIAL}]
    assert result.details["action"] == "drain"


def test_a_corrupted_inforom_fails_a_lone_node_too() -> None:
    result = only(judge_versions(cluster(1, node1=node({0: {"inforom_valid": False}})), Config()))
    assert (result.status, result.hosts) == ("fail", ("node1",))
    assert "GPU 0 is corrupted" in result.summary


def test_each_gpu_model_is_compared_with_its_own_kind_only() -> None:
    a100 = node(name=A100, vbios_version="92.00.45.00.06", inforom_image="G506.0212.00.02")
    assert firmware(cluster(node3=a100, node4=a100)) == []
    # An A100 node behind the other A100s is named against them alone.
    older = node(name=A100, vbios_version="92.00.36.00.02", inforom_image="G506.0212.00.02")
    result = only(firmware(cluster(6, node3=a100, node4=a100, node5=a100, node6=older)))
    assert result.hosts == ("node6",)
    assert result.summary == f"node6: VBIOS 92.00.36.00.02 on its {A100} GPUs, 92.00.45.00.06 on node[3-5]"


def test_nodes_that_reported_no_vbios_are_not_compared_nor_named() -> None:
    unknown = node(vbios_version=None, inforom_image=None, inforom_valid=None)
    assert firmware(cluster(node2=unknown, node3=unknown)) == []
    # One node left with a version: nothing to compare it with.
    assert firmware(cluster(2, node2=unknown)) == []


def test_with_no_majority_every_node_is_named_in_one_finding_with_all_it_runs() -> None:
    """Two against two in VBIOS, one of them also behind in InfoROM: one finding, no side kept."""
    nodes = cluster(
        node3=node(vbios_version=OLD_VBIOS), node4=node(vbios_version=OLD_VBIOS, inforom_image=OLD_INFOROM)
    )
    result = only(firmware(nodes))
    assert (result.details["item"], result.hosts) == ("gpu_firmware", ("node1", "node2", "node3", "node4"))
    assert result.summary.startswith(f"VBIOS and InfoROM differ on the {MODEL} GPUs, no majority for VBIOS: ")
    assert f"node4: VBIOS {OLD_VBIOS} and InfoROM {OLD_INFOROM}" in result.summary
    assert result.summary.endswith(f"(InfoROM {INFOROM} on node[1-3])")
