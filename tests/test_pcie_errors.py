"""PCIe errors since boot (the kernel's AER counters): the probe's read of /sys/bus/pci/devices and
the note for a GPU or NIC that counted errors its like devices did not.

The counter files are written as drivers/pci/pcie/aer.c writes them (``NAME COUNT`` per error type,
then the ``TOTAL_ERR_*`` line), with the names and order a real Linux host's udev database lists
for a device's ``aer_dev_correctable`` and ``aer_dev_fatal`` (all zero there). The nodes are the
recorded H100 node of tests/data/runs/h100_node.json (its GPUs' PCI addresses)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from checks.hardware import judge_hardware
from checks.hardware.pcie_errors import judge_pcie_errors
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.node import pcie_devices

H100 = json.loads((Path(__file__).parent / "data" / "runs" / "h100_node.json").read_text())
CORRECTABLE = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF")
UNCORRECTABLE = ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF",
                 "MalfTLP", "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked",
                 "TLPBlockedErr", "PoisonTLPBlocked")  # fmt: skip


def _aer_file(names: tuple[str, ...], total: str, counts: dict[str, int] | None = None) -> str:
    counts = counts or {}
    lines = [f"{name} {counts.get(name, 0)}" for name in names]
    return "\n".join([*lines, f"{total} {sum(counts.values())}"]) + "\n"


def _device(root: Path, address: str, pci_class: str, vendor: str, **counts: dict[str, int]) -> None:
    device = root / address
    device.mkdir()
    (device / "class").write_text(pci_class + "\n")
    (device / "vendor").write_text(vendor + "\n")
    if pci_class != "0x020000":  # the virtio NIC's firmware gives no NUMA node
        (device / "numa_node").write_text(("1" if address.startswith("0000:3b") else "0") + "\n")
    if counts is not None and "none" not in counts:
        (device / "aer_dev_correctable").write_text(
            _aer_file(CORRECTABLE, "TOTAL_ERR_COR", counts.get("cor"))
        )
        (device / "aer_dev_nonfatal").write_text(
            _aer_file(UNCORRECTABLE, "TOTAL_ERR_NONFATAL", counts.get("nonfatal"))
        )
        (device / "aer_dev_fatal").write_text(
            _aer_file(UNCORRECTABLE, "TOTAL_ERR_FATAL", counts.get("fatal"))
        )


def test_the_probe_lists_the_gpus_and_nics_with_their_numa_node_and_aer_totals(tmp_path: Path) -> None:
    _device(tmp_path, "0000:04:00.0", "0x030200", "0x10de", cor={"BadTLP": 3, "RxErr": 1})
    _device(tmp_path, "0000:3b:00.0", "0x020700", "0x15b3", nonfatal={"CmpltTO": 2})
    _device(
        tmp_path, "0000:00:03.0", "0x020000", "0x1af4", none={}
    )  # virtio-net: no AER capability, no NUMA node
    _device(tmp_path, "0000:00:01.0", "0x060400", "0x8086")  # a bridge: not read
    assert pcie_devices.pci_devices(str(tmp_path)) == [
        {
            "address": "0000:00:03.0",
            "kind": "nic",
            "numa_node": None,
            "correctable": None,
            "nonfatal": None,
            "fatal": None,
        },
        {
            "address": "0000:04:00.0",
            "kind": "gpu",
            "numa_node": 0,
            "correctable": 4,
            "nonfatal": 0,
            "fatal": 0,
        },
        {
            "address": "0000:3b:00.0",
            "kind": "nic",
            "numa_node": 1,
            "correctable": 0,
            "nonfatal": 2,
            "fatal": 0,
        },
    ]
    assert pcie_devices.parse_aer("RxErr 2\nBadTLP 3\n") == 5  # no total line: the sum
    assert pcie_devices.pci_devices(str(tmp_path / "absent")) == []


def _node(
    counts: dict[int, dict[str, int]] | None = None, everywhere: dict[str, int] | None = None
) -> NodeFacts:
    facts: dict[str, Any] = copy.deepcopy(H100)
    devices = []
    for gpu in facts["gpus"]:
        address = "0000:" + gpu["pci_bus_id"].split(":", 1)[1].lower()
        own = {
            "correctable": 0,
            "nonfatal": 0,
            "fatal": 0,
            **(everywhere or {}),
            **(counts or {}).get(gpu["index"], {}),
        }
        devices.append({"address": address, "kind": "gpu", **own})
    devices.append({"address": "0000:3b:00.0", "kind": "nic", "correctable": 0, "nonfatal": 0, "fatal": 0})
    facts["pci_devices"] = devices
    return NodeFacts(facts)


def test_a_gpu_that_counted_uncorrectable_errors_its_peers_did_not_is_a_note() -> None:
    nodes = {f"gpu{i}": _node() for i in range(1, 5)}
    assert judge_pcie_errors(nodes) == []
    nodes["gpu3"] = _node({2: {"nonfatal": 2}})
    [note] = judge_pcie_errors(nodes)
    assert note.is_note and note.hosts == ("gpu3",) and note.details["item"] == "pcie_errors"
    assert note.summary == "gpu3: PCIe errors since boot: GPU 2 (0000:84:00.0): 2 non-fatal uncorrectable"
    [passed, *notes] = judge_hardware(nodes, Config())
    assert passed.status == "pass" and [n.details["item"] for n in notes] == ["pcie_errors"]


def test_correctable_errors_every_gpu_counts_alike_say_nothing_and_a_storm_on_one_is_named() -> None:
    # Every GPU counted a few correctable errors when its link trained at boot.
    nodes = {f"gpu{i}": _node(everywhere={"correctable": 3}) for i in range(1, 5)}
    assert judge_pcie_errors(nodes) == []
    nodes["gpu2"] = _node({3: {"correctable": 5000}}, everywhere={"correctable": 3})
    [note] = judge_pcie_errors(nodes)
    assert note.summary.endswith("GPU 3 (0000:e4:00.0): 5000 correctable (like devices' median 3)")
    nodes["gpu2"] = _node({3: {"correctable": 25}}, everywhere={"correctable": 3})
    assert judge_pcie_errors(nodes) == []  # under the floor: a few retrains


def test_nodes_that_did_not_report_aer_counters_are_not_judged() -> None:
    nodes = {"a": NodeFacts(copy.deepcopy(H100)), "b": NodeFacts(copy.deepcopy(H100))}
    assert judge_pcie_errors(nodes) == []


def test_fatal_uncorrectable_counts_on_a_gpu_fail_its_node_and_once_where_the_kernel_log_names_them() -> None:
    nodes = {f"gpu{i}": _node(everywhere={"correctable": 3}) for i in range(1, 5)}
    nodes["gpu3"] = _node({2: {"fatal": 1, "correctable": 5000}}, everywhere={"correctable": 3})
    (failed,) = judge_pcie_errors(nodes)
    assert (failed.status, failed.hosts, failed.details["item"]) == ("fail", ("gpu3",), "pcie_errors")
    assert failed.summary == (
        "gpu3: PCIe errors since boot: GPU 2 (0000:84:00.0): 1 fatal uncorrectable, "
        "5000 correctable (like devices' median 3)"
    )
    # The kernel log's finding already names the GPU's fatal errors: the counter says the rest.
    (note,) = judge_pcie_errors(nodes, {"gpu3": {("0000:84:00.0", "fatal")}})
    assert note.is_note
    assert note.summary.endswith("GPU 2 (0000:84:00.0): 5000 correctable (like devices' median 3)")
