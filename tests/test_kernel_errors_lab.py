"""The kernel log's PCIe errors end to end through real SSH, on lab nodes made to look like 8-GPU H100
nodes (tests/lab/gpu.py) whose ``dmesg`` prints a log built from real captures
(tests/data/hardware/kernel_errors, see its SOURCES.md): a fatal uncorrected AER error on one GPU's
link fails that node, naming the GPU; a look-alike node whose log holds only corrected errors on a
root port and boot lines, and a node with boot lines only, are not named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import GpuNode, MakeLab
from tests.lab.gpu import kernel_log_commands
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab

LOGS = Path(__file__).parent / "data" / "hardware" / "kernel_errors"
BOOT = (LOGS / "dmesg_boot_healthy_xps13_5.7.txt").read_text()
CORRECTED = (LOGS / "dmesg_root_port_corrected_timeouts.txt").read_text()
# The fatal report of a real GPU node (rwth-i6/returnn #1500), as its root port prints it where the
# GPU erred: the GPU's own PCIe Bus Error lines, at the lab's GPU 0 (nvidia-smi: 00000000:18:00.0).
FATAL = (
    (LOGS / "dmesg_h_gpu_root_port_fatal_cmpltto.txt")
    .read_text()
    .replace("received: 0000:00:03.0", "received: 0000:18:00.0")
    .replace("pcieport 0000:00:03.0: PCIe Bus Error", "nvidia 0000:18:00.0: PCIe Bus Error")
    .replace("pcieport 0000:00:03.0:   device [8086:6f08]", "nvidia 0000:18:00.0:   device [10de:2330]")
    .replace("pcieport 0000:00:03.0:    [", "nvidia 0000:18:00.0:    [")
)


def test_a_fatal_pcie_error_on_a_gpus_link_fails_its_node_and_corrected_root_port_errors_do_not(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    for target, log in zip(lab.nodes, (BOOT + FATAL, BOOT + CORRECTED, BOOT), strict=True):
        lab.make_gpu_node(target, GpuNode())
        lab.exec(target, ["sh", "-c", " && ".join(kernel_log_commands(target.node_dir / "kernel_log", log))])

    run, data = run_check(lab, tmp_path, "--only", "hardware")

    assert run.returncode == 1, run.stdout + run.stderr
    node1, node2, node3 = (n.address for n in lab.nodes)
    found = [r for r in results(data, "hardware") if r["status"] != "pass" or r["details"].get("note")]
    (failed,) = found
    assert (failed["status"], failed["hosts"], failed["details"]["item"]) == ("fail", [node1], "pcie_aer")
    assert failed["summary"].startswith(
        f"{node1}: 1 fatal uncorrected PCIe error on GPU 0 (serial 0000001000000) (0000:18:00.0) "
        "(SDES, CmpltTO; recovery failed) in the kernel log since boot; last: "
    )
    assert [d["device"] for d in failed["details"]["devices"]] == ["GPU 0 (serial 0000001000000)"]
    assert not any({node2, node3} & set(r["hosts"]) for r in results(data, "hardware"))
    # The look-alike's log was read: its root port's corrected errors, said nothing of.
    facts = {h["name"]: h["facts"]["hardware"]["xid"] for h in data["hosts"]}
    assert [(e["pci"], e["severity"], e["count"]) for e in facts[node2]["pcie_events"]] == [
        ("0000:00:1c.1", "corrected", 3)
    ]
    assert facts[node3]["pcie_events"] == []
