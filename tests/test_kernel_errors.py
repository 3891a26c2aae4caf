"""The kernel log's hardware errors beyond XIDs, as real machines printed them: PCIe AER reports
(the kernel's own and firmware-first), machine checks and memory errors, block devices' I/O errors;
the probe's reader and the ``hardware`` judge naming the node, the device and its GPU or NIC
(captures in tests/data/hardware/kernel_errors, see its SOURCES.md)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from checks.hardware.judge import judge_hardware
from checks.hardware.kernel_errors import BLOCK_ITEM, MACHINE_ITEM, PCIE_ITEM, disk_of, pci_function
from checks.hardware.present import ADVICE
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.node import hardware, kernel_errors, smi

DATA = Path(__file__).parent / "data"
LOGS = DATA / "hardware" / "kernel_errors"
H100 = smi.gpus_from_smi(
    (DATA / "facts" / "smi_query_gpu_h100_590.48.01_idle.csv").read_text(),
    (DATA / "facts" / "smi_compute_apps_h100_590.48.01_idle.csv").read_text(),
    header=True,
)[0]
HEALTHY = (
    "dmesg_boot_healthy_xps13_5.7.txt",
    "dmesg_root_port_corrected_timeouts.txt",
    "dmesg_old_id_corrected_cant_find_device.txt",
    "journal_correctable_message_received_amd_port.txt",
    "journal_ghes_pcie_corrected_amd_port.txt",
    "dmesg_thermal_throttle.txt",
    "journal_edac_skx_ecc_disabled.txt",
    "vm_sr0_empty_cdrom.txt",
    "vm_fd0_no_floppy.txt",
)


def read(name: str) -> str:
    return (LOGS / name).read_text()


def log_of(*names: str) -> dict[str, Any]:
    """The errors the probe reads in the captures ``names``, one log after the other."""
    return kernel_errors.kernel_errors("\n".join(read(n) for n in names))


def node(
    log: dict[str, Any] | None = None,
    gpus: Sequence[str] = (),
    devices: Sequence[dict[str, Any]] = (),
) -> NodeFacts:
    """A node whose dmesg gave ``log`` (none: an empty log), with one recorded H100 at each
    nvidia-smi address of ``gpus`` and ``devices`` on its PCI bus."""
    records = []
    for index, pci in enumerate(gpus):
        gpu = copy.deepcopy(H100)
        gpu.update(index=index, serial=f"16549220{index:05d}", pci_bus_id=pci)
        records.append(gpu)
    xid = {"readable": True, "source": "dmesg", "events": [], **(log or log_of())}
    return NodeFacts({"gpus": records, "pci_devices": list(devices), "hardware": {"xid": xid}})


def judged(subject: NodeFacts, *others: NodeFacts) -> list[CheckResult]:
    """The hardware judge's results for gpu1 = ``subject`` beside ``others`` (two quiet nodes by
    default), the pass or first finding first."""
    peers = others or (node(), node())
    return judge_hardware({"gpu1": subject, **{f"gpu{i}": n for i, n in enumerate(peers, 2)}}, Config())


def findings(results: Sequence[CheckResult], item: str) -> list[CheckResult]:
    return [r for r in results if r.details.get("item") == item]


def nic(address: str, **counts: int) -> dict[str, Any]:
    return {
        "address": address,
        "kind": "nic",
        "numa_node": 0,
        "correctable": 0,
        "nonfatal": 0,
        "fatal": 0,
        **counts,
    }


def test_a_fatal_error_on_the_root_port_above_a_gpu_fails_its_node_naming_the_gpu() -> None:
    (event,) = log_of("dmesg_h_gpu_root_port_fatal_cmpltto.txt")["pcie_events"]
    assert (event["pci"], event["severity"], event["count"]) == ("0000:00:03.0", "fatal", 1)
    assert (event["errors"], event["id"], event["recovery"]) == (["SDES", "CmpltTO"], "8086:6f08", "failed")
    # The devices the recovery reached below the port, read after the report only.
    assert event["affected"] == ["0000:03:00.0", "0000:03:00.1"]

    results = judged(node(log_of("dmesg_h_gpu_root_port_fatal_cmpltto.txt"), gpus=("00000000:03:00.0",)))
    (failed,) = [r for r in results if r.status != "pass"]
    assert (failed.status, failed.hosts, failed.details["item"]) == ("fail", ("gpu1",), PCIE_ITEM)
    assert failed.summary == (
        "gpu1: 1 fatal uncorrected PCIe error on 0000:00:03.0, the port above GPU 0 (serial 1654922000000) "
        "(SDES, CmpltTO; recovery failed) in the kernel log since boot; last: [  +0.000004] pcieport "
        "0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)"
    )
    (device,) = failed.details["devices"]
    assert (device["device"], device["kind"], device["counts"]) == (
        "GPU 0 (serial 1654922000000)", "gpu", {"fatal": 1},
    )  # fmt: skip
    assert "drain the node" in ADVICE[PCIE_ITEM]


def test_a_fatal_error_named_on_the_gpu_itself_or_its_other_function_is_the_gpus() -> None:
    text = read("dmesg_h_gpu_root_port_fatal_cmpltto.txt")
    # The same report re-addressed: the GPU's second function prints its own PCIe Bus Error lines.
    own = text.replace("pcieport 0000:00:03.0: PCIe", "nvidia 0000:03:00.1: PCIe").replace(
        "pcieport 0000:00:03.0:  ", "nvidia 0000:03:00.1:  "
    )
    (event,) = kernel_errors.kernel_errors(own)["pcie_events"]
    assert event["pci"] == "0000:03:00.1"
    (failed,) = [
        r
        for r in judged(node(kernel_errors.kernel_errors(own), gpus=("00000000:03:00.0",)))
        if r.status != "pass"
    ]
    assert "on GPU 0 (serial 1654922000000), function 1 (0000:03:00.1)" in failed.summary


def test_the_older_id_form_names_the_port_and_a_fatal_error_below_no_gpu_or_nic_warns() -> None:
    (event,) = log_of("dmesg_old_id_fatal_malformed_tlp_amdgpu.txt")["pcie_events"]
    assert (event["pci"], event["errors"], event["affected"]) == (
        "0000:00:1c.4", ["Malformed TLP"], ["0000:06:00.0", "0000:06:00.1"],
    )  # fmt: skip
    (warned,) = [
        r for r in judged(node(log_of("dmesg_old_id_fatal_malformed_tlp_amdgpu.txt"))) if r.status != "pass"
    ]
    assert warned.status == "warn"
    assert warned.summary.startswith("gpu1: 1 fatal uncorrected PCIe error on 0000:00:1c.4 [8086:a114] ")


def test_a_non_fatal_error_on_a_port_above_no_gpu_is_a_note_and_the_corrected_one_before_it_counts() -> None:
    events = log_of("uncorrectable_non_fatal_message_received_acsviol.txt")["pcie_events"]
    assert [(e["pci"], e["severity"], e["count"]) for e in events] == [
        ("0000:80:1b.4", "corrected", 1),
        ("0000:80:1b.4", "nonfatal", 1),
    ]
    assert events[1]["affected"] == ["0000:84:00.0", "0000:97:00.0"]
    passed, note = judged(node(log_of("uncorrectable_non_fatal_message_received_acsviol.txt")))
    assert (passed.status, note.is_note, note.details["item"]) == ("pass", True, PCIE_ITEM)
    assert note.summary.startswith(
        "gpu1: 1 non-fatal uncorrected and 1 corrected PCIe errors on 0000:80:1b.4 "
    )


def test_an_error_is_the_device_whose_bus_error_line_it_is_not_the_source_the_port_names() -> None:
    # An AMD root port names 0000:00:00.0 as the source, and prints its own errors.
    (event,) = log_of("journal_correctable_message_received_amd_port.txt")["pcie_events"]
    assert (event["pci"], event["count"], event["errors"]) == ("0000:00:03.1", 2, ["Timeout", "BadTLP"])
    # One report, two devices that printed their own errors.
    events = log_of("dmesg_port_and_nvme_multiple_corrected.txt")["pcie_events"]
    assert [(e["pci"], e["count"]) for e in events] == [("0000:00:1d.0", 2), ("0000:03:00.0", 1)]


def test_corrected_errors_on_a_nic_are_a_note_naming_its_rdma_device_from_sysfs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "0000:07:00.0" / "infiniband" / "mlx5_0").mkdir(parents=True)
    monkeypatch.setattr(hardware, "find_tool", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(
        hardware, "run_command", lambda argv, timeout=0: read("alx_corrected_device_attributed.txt")
    )
    monkeypatch.setattr(hardware, "SYS_BUS_PCI", str(tmp_path))
    xid = hardware.hardware_facts()["xid"]
    (event,) = xid["pcie_events"]
    assert (event["pci"], event["hca"], event["id"], event["errors"]) == (
        "0000:07:00.0",
        "mlx5_0",
        "1969:e0b1",
        ["BadTLP"],
    )
    assert (xid["machine_check_events"], xid["block_io_events"]) == ([], [])

    passed, note = judged(node(xid, devices=[nic("0000:07:00.0")]))
    assert (passed.status, note.is_note, note.hosts) == ("pass", True, ("gpu1",))
    assert note.summary == (
        "gpu1: 1 corrected PCIe error on NIC mlx5_0 (0000:07:00.0) (BadTLP) in the kernel log since boot; "
        "last: alx 0000:07:00.0: AER: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Receiver ID)"
    )


def test_corrected_errors_far_above_the_other_nodes_on_a_gpu_link_warn() -> None:
    log = log_of("alx_corrected_device_attributed.txt")
    # The count the probe folds from 150 such reports.
    log["pcie_events"][0]["count"] = 150
    gpu = ("00000000:07:00.0",)
    (warned,) = [r for r in judged(node(log, gpus=gpu), node(gpus=gpu), node(gpus=gpu)) if r.status != "pass"]
    assert warned.status == "warn" and warned.summary.startswith("gpu1: 150 corrected PCIe errors on GPU 0 ")
    # Alike on every node: the platform's, a note each.
    results = judged(node(log, gpus=gpu), node(log, gpus=gpu), node(log, gpus=gpu))
    assert [r.status for r in results] == ["pass"] * 4 and all(r.is_note for r in results[1:])


def test_healthy_boot_lines_a_few_corrected_errors_on_root_ports_and_a_vms_cdrom_say_nothing() -> None:
    log = log_of(*HEALTHY)
    assert log["machine_check_events"] == [] and log["block_io_events"] == []
    # Corrected errors on root ports only, under any form.
    assert {(e["pci"], e["severity"]) for e in log["pcie_events"]} == {
        ("0000:00:1c.1", "corrected"), ("0000:00:1c.5", "corrected"),
        ("0000:00:03.1", "corrected"), ("0000:60:03.1", "corrected"),
    }  # fmt: skip
    assert [(r.status, r.is_note) for r in judged(node(log, gpus=("00000000:18:00.0",)))] == [("pass", False)]


def test_a_fatal_firmware_first_error_on_a_nic_fails_once_beside_its_aer_counter() -> None:
    log = log_of("ghes_pcie_fatal_nic_endpoint_dell_c4140.txt")
    assert [(e["pci"], e["severity"], e["count"]) for e in log["pcie_events"]] == [
        ("0000:05:00.1", "fatal", 1)
    ]
    counted = [nic("0000:05:00.1", fatal=1)]
    results = judged(node(log, devices=counted), node(devices=[nic("0000:05:00.1")]))
    (failed,) = [r for r in results if r.status == "fail"]
    assert (failed.details["item"], failed.hosts) == (PCIE_ITEM, ("gpu1",))
    assert failed.summary.startswith("gpu1: 1 fatal uncorrected PCIe error on NIC (0000:05:00.1) ")
    assert not findings(results, "pcie_errors")
    # An older probe read no PCIe lines: the counter says it, and fails the node.
    older = NodeFacts(
        {"gpus": [], "pci_devices": counted, "hardware": {"xid": {"readable": True, "events": []}}}
    )
    (counter,) = [r for r in judged(older, node(devices=[nic("0000:05:00.1")])) if r.status != "pass"]
    assert (counter.status, counter.details["item"]) == ("fail", "pcie_errors")
    assert counter.summary == "gpu1: PCIe errors since boot: NIC (0000:05:00.1): 1 fatal uncorrectable"


def test_a_fatal_firmware_first_error_on_the_port_above_a_nic_names_the_nic_on_its_bus() -> None:
    (event,) = log_of("ghes_pcie_fatal_root_port_two_sections.txt")["pcie_events"]
    assert (event["pci"], event["count"], event["secondary_bus"]) == ("0000:80:03.0", 2, "0000:88")
    results = judged(
        node(log_of("ghes_pcie_fatal_root_port_two_sections.txt"), devices=[nic("0000:88:00.0")])
    )
    (failed,) = [r for r in results if r.status != "pass"]
    assert failed.status == "fail"
    assert failed.summary.startswith(
        "gpu1: 2 fatal uncorrected PCIe errors on 0000:80:03.0, the port above NIC "
    )


def test_an_uncorrected_memory_error_fails_its_node_and_the_decoders_lines_are_not_counted_again() -> None:
    events = log_of("dmesg_einj_ue_skx_ghes_recoverable.txt")["machine_check_events"]
    assert [(e["source"], e["severity"], e["where"], e["count"]) for e in events] == [
        ("mce", "uncorrected", "memory", 1),
        ("ghes", "uncorrected", "NODE 3 CPU0_DIMM_G1", 1),
        ("logged", "unknown", None, 2),
        ("edac", "uncorrected", "MC3 CPU_SrcID#0_MC#3_Chan#0_DIMM#0", 2),
    ]
    (failed,) = [
        r for r in judged(node(log_of("dmesg_einj_ue_skx_ghes_recoverable.txt"))) if r.status != "pass"
    ]
    assert (failed.status, failed.details["item"]) == ("fail", MACHINE_ITEM)
    assert (failed.details["uncorrected"], failed.details["corrected"]) == (4, 0)
    assert failed.summary.startswith(
        "gpu1: 1 uncorrected machine check on memory; 1 uncorrected firmware-reported hardware error on "
        "NODE 3 CPU0_DIMM_G1; 2 uncorrected memory errors on MC3 CPU_SrcID#0_MC#3_Chan#0_DIMM#0 (+1 more) "
    )


def test_a_bank_that_held_an_uncorrected_error_at_boot_fails_and_corrected_banks_are_a_note() -> None:
    (logged, bank) = log_of("journal_mce_bank_uncorrected_at_boot.txt")["machine_check_events"]
    assert (bank["severity"], bank["where"], logged["source"]) == ("uncorrected", "CPU 0 bank 4", "logged")
    assert [r.status for r in judged(node(log_of("journal_mce_bank_uncorrected_at_boot.txt")))] == ["fail"]

    for name in ("journal_mce_bank_corrected_overflow.txt", "dmesg_mce_amd_corrected_then_logged.txt"):
        events = log_of(name)["machine_check_events"]
        assert {e["severity"] for e in events} <= {"corrected", "unknown"}, name
        passed, note = judged(node(log_of(name)))
        assert (passed.status, note.is_note, note.details["item"]) == ("pass", True, MACHINE_ITEM), name
    assert [
        e["count"] for e in log_of("journal_mce_bank_corrected_overflow.txt")["machine_check_events"]
    ] == [1, 1, 2]


def test_corrected_memory_errors_are_a_note_and_warn_where_the_node_stands_out() -> None:
    scrub = log_of("journal_edac_sbridge_ce_scrubbing.txt")["machine_check_events"]
    assert [(e["source"], e["where"], e["count"]) for e in scrub] == [
        ("logged", None, 1),
        ("edac", "MC1 CPU_SrcID#1_Ha#0_Chan#0_DIMM#0", 1),
    ]
    older = log_of("journal_edac_ce_no_label_prefix.txt")["machine_check_events"]
    assert (older[1]["where"], older[1]["count"]) == ("MC0 CPU#0Channel#2_DIMM#0", 16)
    firmware = log_of("journal_ghes_memory_corrected.txt")["machine_check_events"]
    assert [(e["source"], e["severity"], e["where"]) for e in firmware] == [("ghes", "corrected", "D2")]
    for log in (log_of("journal_edac_sbridge_ce_scrubbing.txt"), log_of("journal_ghes_memory_corrected.txt")):
        assert [(r.status, r.is_note) for r in judged(node(log))] == [("pass", False), ("pass", True)]

    overflow = log_of("dmesg_ctime_edac_262_ce_overflow.txt")
    (warned,) = [r for r in judged(node(overflow)) if r.status != "pass"]
    assert warned.status == "warn" and warned.details["corrected"] == 262
    assert warned.summary.startswith(
        "gpu1: 262 corrected memory errors on MC1 CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 "
    )
    # Every node alike: not this node's, a note each.
    assert [r.status for r in judged(node(overflow), node(overflow), node(overflow))] == ["pass"] * 4


def test_block_io_errors_warn_naming_each_disk_with_its_partitions_counted_in() -> None:
    log = log_of(
        "console_nvme_timeout_then_blk_update_request.txt", "dmesg_io_error_buffer_on_device_nvme.txt"
    )
    (warned,) = [r for r in judged(node(log)) if r.status != "pass"]
    assert (warned.status, warned.details["item"]) == ("warn", BLOCK_ITEM)
    assert [(d["disk"], d["count"], d["kinds"]) for d in warned.details["disks"]] == [
        ("nvme0n1", 15, {"io_error": 13, "buffer_io_error": 2}),
        ("nvme0", 1, {"nvme_timeout": 1}),
    ]
    assert warned.summary.startswith(
        "gpu1: I/O errors on nvme0n1 (13 I/O errors, 2 buffer I/O errors), nvme0 (1 NVMe command timeout) "
        "in the kernel log since boot; last: [ 4730.852943] I/O error, dev nvme0n1, sector 167434032 "
    )


@pytest.mark.parametrize(
    ("name", "disks"),
    [
        ("journal_print_req_error_sdc.txt", {"sdc": {"io_error": 4}}),
        ("dmesg_usb_disk_blk_update_request_buffer.txt", {"sda": {"buffer_io_error": 9, "io_error": 2}}),
        ("dmesg_ext4_error_sd_card.txt", {"mmcblk0": {"buffer_io_error": 5, "fs_error": 1}}),
        ("journal_xfs_metadata_io_error_among_mounts.txt", {"dm-7": {"fs_error": 1}}),
        ("syslog_nvme_tag_opcode_timeout.txt", {"nvme0": {"nvme_timeout": 4}}),
    ],
)
def test_each_form_of_block_io_error_is_read(name: str, disks: dict[str, dict[str, int]]) -> None:
    (warned,) = [r for r in judged(node(log_of(name))) if r.status != "pass"]
    assert {d["disk"]: d["kinds"] for d in warned.details["disks"]} == disks


def test_partitions_fold_into_their_disk_and_addresses_into_the_kernels_form() -> None:
    assert [disk_of(d) for d in ("sdb1", "nvme0n1p2", "mmcblk0p2", "nvme0", "dm-7", "sdaa12")] == [
        "sdb", "nvme0n1", "mmcblk0", "nvme0", "dm-7", "sdaa",
    ]  # fmt: skip
    assert pci_function("00000000:3B:00.0") == pci_function("0000:3b:00.0") == "0000:3b:00.0"


def test_the_probe_keeps_the_last_entries_with_their_counts() -> None:
    line = read("journal_print_req_error_sdc.txt").splitlines()[0]
    text = "\n".join(
        line.replace("dev sdc", f"dev sd{chr(97 + i // 26)}{chr(97 + i % 26)}") for i in range(130)
    )
    folded = kernel_errors.kernel_errors(text + "\n" + line)["block_io_events"]
    assert len(folded) == kernel_errors.KEEP
    assert (folded[-1]["dev"], folded[-2]["dev"], folded[0]["dev"]) == ("sdc", "sdez", "sdbf")
    assert kernel_errors.fold([{"dev": "sda", "count": 2}, {"dev": "sda"}], ("dev",)) == [
        {"dev": "sda", "count": 3}
    ]


def test_an_older_probes_facts_without_the_new_keys_are_judged_as_before() -> None:
    older = NodeFacts({"gpus": [], "hardware": {"xid": {"readable": True, "source": "dmesg", "events": []}}})
    assert [(r.status, r.is_note) for r in judged(older, older)] == [("pass", False)]
