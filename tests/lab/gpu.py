"""Lab nodes that look like GPU nodes to the facts probe.

A node gets a stand-in ``nvidia-smi`` on its PATH (``tests/lab/nvidia_smi.py``) serving a
capture built from a real recorded one (tests/data/facts: an H100, driver 590.48.01, every
field the driver offers), its NVLink states and error counters and its ``-q -d PCIE`` report
laid out as recorded ones, and the driver's proc file in its own mount namespace. Each GPU of
each node can differ from the recording in any field (a pending row remap, a narrower PCIe
link, NVLink errors, PCIe replays), or answer every field with an error word in nvidia-smi's
brackets (a GPU that no longer answers its driver). NVML stays unloadable there (no
libnvidia-ml), as on a node where pynvml is missing, so the probe takes its nvidia-smi path;
torch sees no CUDA device.
"""

from __future__ import annotations

import csv
import io
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"
RECORDED_GPU = DATA / "smi_query_gpu_h100_590.48.01_idle.csv"
RECORDED_APPS = DATA / "smi_compute_apps_h100_590.48.01_idle.csv"
RECORDED_DRIVER = DATA / "nvidia_version_open_565.57.01.txt"
# A real ``nvidia-smi -q`` of an H100 (driver 580.159.04): its heading and its PCI section.
RECORDED_QUERY = DATA.parent / "gpu_h100_580" / "smi_q.out"
# ``nvidia-smi nvlink -e``'s counters of each link, in the order the recorded H100 prints them
# (tests/data/facts/smi_nvlink_errors_h100_abridged.txt).
NVLINK_ERROR_COUNTERS = ("Replay Errors", "Recovery Errors", "CRC Errors")
STAND_IN = Path(__file__).resolve().parent / "nvidia_smi.py"


# A healthy NDR port as the kernel writes its files under /sys/class/infiniband/DEV/ports/N
# (drivers/infiniband/core/sysfs.c: state_show "%d: %s", phys_state_show, rate_show), the
# port counters a healthy link has, and the first entry of its P_Key table (show_port_pkey,
# "0x%04x"): the default partition, full member; the table's other entries are left out.
IB_PORT_FILES: Mapping[str, str] = {
    "state": "4: ACTIVE",
    "phys_state": "5: LinkUp",
    "rate": "400 Gb/sec (4X NDR)",
    "link_layer": "InfiniBand",
    "counters/link_downed": "0",
    "counters/symbol_error": "0",
    "pkeys/0": "0xffff",
}
# A port whose link is down: what an unplugged cable or a disabled switch port shows.
IB_PORT_DOWN: Mapping[str, str] = {
    "state": "1: DOWN",
    "phys_state": "3: Disabled",
    "rate": "10 Gb/sec (4X SDR)",
}
IB_HCAS = ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
# The compute HCAs' device files, and a front-end port beside them, as a real H100 node has them
# (tests/data/hardware/ib/sys-class-infiniband-h100: ConnectX-7, and a BlueField-3 bond on Ethernet).
IB_HCA_FILES: Mapping[str, str] = {"hca_type": "MT4129", "board_id": "MT_0000000838", "fw_ver": "28.41.1000"}
IB_FRONT_END = "mlx5_bond_0"
IB_FRONT_END_FILES: Mapping[str, str] = {
    "hca_type": "MT41692",
    "board_id": "MT_0000000884",
    "fw_ver": "32.38.3056",
}
IB_FRONT_END_PORT: Mapping[str, str] = {
    **IB_PORT_FILES,
    "rate": "200 Gb/sec (2X NDR)",
    "link_layer": "Ethernet",
}


@dataclass(frozen=True)
class GpuNode:
    """What one emulated node reports: ``gpus`` GPUs like the recorded H100, with per-GPU field
    changes (``{3: {"remapped_rows.pending": "Yes"}}``) or every field an error (``errors``: ``{3:
    "Unknown Error"}``, served as ``[Unknown Error]``; such a GPU lists no NVLink either), and the
    driver's proc text; with
    ``infiniband``, a /sys/class/infiniband tree of ``IB_HCAS`` (one port each) and the front-end
    ``IB_FRONT_END``, with per-device port file changes (``{"mlx5_2": IB_PORT_DOWN}``, or a file of
    a table: ``{"mlx5_2": {"pkeys/1": "0x8001"}}``)."""

    gpus: int = 8
    changes: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    errors: Mapping[int, str] = field(default_factory=dict)
    # NVLinks each GPU has, and those ``nvidia-smi nvlink --status`` lists as inactive, by GPU.
    nvlinks: int = 18
    inactive_links: Mapping[int, Sequence[int]] = field(default_factory=dict)
    # Counts ``nvidia-smi nvlink -e`` prints other than 0, by GPU and link (``{5: {3: {"CRC Errors":
    # 4812}}}``), and changes to a GPU's PCI section of ``-q -d PCIE`` (``{2: {"Replays Since
    # Reset": "4000"}}``).
    nvlink_errors: Mapping[int, Mapping[int, Mapping[str, int]]] = field(default_factory=dict)
    pcie_changes: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    driver_text: str | None = None
    infiniband: bool = False
    ib_changes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Changes to a card's own files (``{"mlx5_1": {"fw_ver": "28.39.1002"}}``).
    hca_changes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def _rows(path: Path) -> list[list[str]]:
    text = path.read_text(encoding="utf-8")
    return [[v.strip() for v in row] for row in csv.reader(io.StringIO(text), skipinitialspace=True) if row]


def bus_id(gpu: int) -> str:
    """The PCI bus id of a lab node's GPU ``gpu``, as nvidia-smi writes it."""
    return f"00000000:{0x18 + 0x10 * gpu:02X}:00.0"


def gpu_heading(node_index: int, gpu: int) -> str:
    """How ``nvidia-smi nvlink`` names a GPU above its links."""
    return f"GPU {gpu}: NVIDIA H100 80GB HBM3 (UUID: GPU-{node_index:08d}-0000-0000-0000-{gpu:012d})"


def gpu_capture(node: GpuNode, node_index: int) -> str:
    """A ``--query-gpu=<every field> --format=csv`` capture of the node's GPUs."""
    header, recorded = _rows(RECORDED_GPU)[:2]
    names = [column.split(" [")[0] for column in header]
    lines = [", ".join(header)]
    for i in range(node.gpus):
        row = list(recorded)
        own = {
            "index": str(i),
            "uuid": f"GPU-{node_index:08d}-0000-0000-0000-{i:012d}",
            "serial": f"{node_index:07d}{i:06d}",
            "pci.bus_id": bus_id(i),
            **node.changes.get(i, {}),
        }
        for name, value in own.items():
            row[names.index(name)] = value
        if i in node.errors:
            row = [f"[{node.errors[i]}]"] * len(row)
        lines.append(", ".join(row))
    return "\n".join(lines) + "\n"


def nvlink_status(node: GpuNode, node_index: int) -> str:
    """``nvidia-smi nvlink --status`` of the node's GPUs, laid out as the recorded V100 output
    (tests/data/facts/smi_nvlink_status_v100_inactive.txt), at an H100's per-link rate."""
    lines = []
    for i in range(node.gpus):
        if i in node.errors:
            continue
        lines.append(gpu_heading(node_index, i))
        down = set(node.inactive_links.get(i, ()))
        lines += [f"\t Link {k}: {'<inactive>' if k in down else '26.562 GB/s'}" for k in range(node.nvlinks)]
    return "\n".join(lines) + "\n"


def nvlink_errors(node: GpuNode, node_index: int) -> str:
    """``nvidia-smi nvlink -e`` of the node's GPUs, laid out as the recorded H100 output
    (tests/data/facts/smi_nvlink_errors_h100_abridged.txt): each link's counters, a blank line
    between links."""
    lines = []
    for i in range(node.gpus):
        if i in node.errors:
            continue
        lines.append(gpu_heading(node_index, i))
        counts = node.nvlink_errors.get(i, {})
        for k in range(node.nvlinks):
            if k:
                lines.append("")
            own = counts.get(k, {})
            lines += [f"         Link {k}: {name}: {own.get(name, 0)}" for name in NVLINK_ERROR_COUNTERS]
    return "\n".join(lines) + "\n"


def pcie_report(node: GpuNode) -> str:
    """``nvidia-smi -q -d PCIE`` of the node's GPUs: the recorded ``-q``'s heading and, under each
    GPU's bus id, its PCI section with the GPU's own Bus Id and changes."""
    recorded = RECORDED_QUERY.read_text(encoding="utf-8").splitlines()
    first_gpu = next(n for n, line in enumerate(recorded) if line.startswith("GPU "))
    start = recorded.index("    PCI")
    end = next(n for n in range(start + 1, len(recorded)) if not recorded[n].startswith("     "))
    answering = [i for i in range(node.gpus) if i not in node.errors]
    lines = _with(recorded[:first_gpu], {"Attached GPUs": str(len(answering))})
    for i in answering:
        place = {"Bus": f"0x{bus_id(i)[9:11]}", "Device": "0x00", "Bus Id": bus_id(i)}
        own = {**place, **node.pcie_changes.get(i, {})}
        lines += [f"GPU {bus_id(i)}", *_with(recorded[start:end], own)]
    return "\n".join(lines) + "\n"


def _with(lines: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """``-q`` lines (``Name   : value``) with the values of the names in ``values`` replaced."""
    found = []
    for line in lines:
        name, colon, _ = line.partition(" : ")
        found.append(f"{name} : {values[name.strip()]}" if colon and name.strip() in values else line)
    return found


def write_infiniband(root: Path, node: GpuNode) -> None:
    """The node's /sys/class/infiniband tree under ``root``."""
    cards = [(hca, IB_HCA_FILES, IB_PORT_FILES) for hca in IB_HCAS]
    for hca, device_files, port_files in [*cards, (IB_FRONT_END, IB_FRONT_END_FILES, IB_FRONT_END_PORT)]:
        port = root / hca / "ports" / "1"
        for name, text in {**port_files, **node.ib_changes.get(hca, {})}.items():
            (port / name).parent.mkdir(parents=True, exist_ok=True)
            (port / name).write_text(text + "\n", encoding="utf-8")
        for name, text in {**device_files, **node.hca_changes.get(hca, {})}.items():
            (root / hca / name).write_text(text + "\n", encoding="utf-8")


def _infiniband_commands(root: Path) -> list[str]:
    """Mount the tree at /sys/class/infiniband in the node's own mount namespace: sysfs allows no
    new directory, so /sys/class becomes a tmpfs holding the node's /sys/class/net (moved back)
    and the tree."""
    q = shlex.quote
    staging = q(str(root / "sys-class-net"))
    return [
        f"mkdir -p {staging}",
        f"mount --bind /sys/class/net {staging}",
        "mount -t tmpfs -o mode=755 pflab-sys-class /sys/class",
        "mkdir /sys/class/net",
        f"mount --move {staging} /sys/class/net",
        f"cp -r {q(str(root / 'infiniband'))} /sys/class/infiniband",
    ]


def install(root: Path, node: GpuNode, node_index: int, python: str) -> list[str]:
    """Write the node's captures under ``root``; the shell commands that mount them in the node."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "query-gpu.csv").write_text(gpu_capture(node, node_index), encoding="utf-8")
    (root / "nvlink-status.txt").write_text(nvlink_status(node, node_index), encoding="utf-8")
    (root / "nvlink-errors.txt").write_text(nvlink_errors(node, node_index), encoding="utf-8")
    (root / "query-pcie.txt").write_text(pcie_report(node), encoding="utf-8")
    shutil.copy(RECORDED_APPS, root / "query-compute-apps.csv")
    shutil.copy(STAND_IN, root / "nvidia_smi.py")
    wrapper = root / "nvidia-smi"
    served = (root / "nvidia_smi.py", root / "query-gpu.csv", root / "query-compute-apps.csv")
    args = " ".join(shlex.quote(str(p)) for p in served)
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(python)} {args} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    (root / "version").write_text(node.driver_text or RECORDED_DRIVER.read_text(), encoding="utf-8")
    q = shlex.quote
    ib = []
    if node.infiniband:
        write_infiniband(root / "infiniband", node)
        ib = _infiniband_commands(root)
    return [
        *ib,
        # /usr/local/sbin is first on root's PATH in an SSH session, and empty on the host.
        "mount -t tmpfs -o mode=755 pflab-gpu-bin /usr/local/sbin",
        f"cp {q(str(wrapper))} /usr/local/sbin/nvidia-smi",
        "mount -t tmpfs -o mode=755 pflab-gpu-driver /proc/driver",
        "mkdir /proc/driver/nvidia",
        f"cp {q(str(root / 'version'))} /proc/driver/nvidia/version",
    ]


def install_infiniband(root: Path, node: GpuNode) -> list[str]:
    """Write the node's /sys/class/infiniband tree under ``root``; the commands that mount it, and
    nothing else (a CPU node with HCAs, where the job runs)."""
    write_infiniband(root / "infiniband", node)
    return _infiniband_commands(root)


# Two XID 31 lines (an application's MMU fault) from a real kernel log, with the lines before
# them (tests/data/hardware/SOURCES.md); NVIDIA's catalogue puts XID 31 on the application.
RECORDED_APP_XID = Path(__file__).resolve().parents[1] / "data" / "hardware" / "dmesg_xid31_rtx4090.txt"


def kernel_log_commands(root: Path, text: str) -> list[str]:
    """A stand-in ``dmesg`` that prints ``text`` whatever it is asked, on the PATH of a node made
    a GPU node by :func:`install` (whose /usr/local/sbin comes first); the commands that put it
    there."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "kernel.log").write_text(text, encoding="utf-8")
    stand_in = root / "dmesg"
    stand_in.write_text(f"#!/bin/sh\nexec cat {shlex.quote(str(root / 'kernel.log'))}\n", encoding="utf-8")
    stand_in.chmod(0o755)
    return [f"cp {shlex.quote(str(stand_in))} /usr/local/sbin/dmesg"]
