"""Lab nodes that look like GPU nodes to the facts probe.

A node gets a stand-in ``nvidia-smi`` on its PATH (``tests/lab/nvidia_smi.py``) serving a
capture built from a real recorded one (tests/data/facts: an H100, driver 590.48.01, every
field the driver offers), and the driver's proc file in its own mount namespace. Each GPU of
each node can differ from the recording in any field (a pending row remap, a narrower PCIe
link). NVML stays unloadable there (no libnvidia-ml), as on a node where pynvml is missing, so
the probe takes its nvidia-smi path; torch sees no CUDA device.
"""

from __future__ import annotations

import csv
import io
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"
RECORDED_GPU = DATA / "smi_query_gpu_h100_590.48.01_idle.csv"
RECORDED_APPS = DATA / "smi_compute_apps_h100_590.48.01_idle.csv"
RECORDED_DRIVER = DATA / "nvidia_version_open_565.57.01.txt"
STAND_IN = Path(__file__).resolve().parent / "nvidia_smi.py"


@dataclass(frozen=True)
class GpuNode:
    """What one emulated node reports: ``gpus`` GPUs like the recorded H100, with per-GPU field
    changes (``{3: {"remapped_rows.pending": "Yes"}}``), and the driver's proc text."""

    gpus: int = 8
    changes: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    driver_text: str | None = None


def _rows(path: Path) -> list[list[str]]:
    text = path.read_text(encoding="utf-8")
    return [[v.strip() for v in row] for row in csv.reader(io.StringIO(text), skipinitialspace=True) if row]


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
            "pci.bus_id": f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            **node.changes.get(i, {}),
        }
        for name, value in own.items():
            row[names.index(name)] = value
        lines.append(", ".join(row))
    return "\n".join(lines) + "\n"


def install(root: Path, node: GpuNode, node_index: int, python: str) -> list[str]:
    """Write the node's captures under ``root``; the shell commands that mount them in the node."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "query-gpu.csv").write_text(gpu_capture(node, node_index), encoding="utf-8")
    shutil.copy(RECORDED_APPS, root / "query-compute-apps.csv")
    shutil.copy(STAND_IN, root / "nvidia_smi.py")
    wrapper = root / "nvidia-smi"
    served = (root / "nvidia_smi.py", root / "query-gpu.csv", root / "query-compute-apps.csv")
    args = " ".join(shlex.quote(str(p)) for p in served)
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(python)} {args} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    (root / "version").write_text(node.driver_text or RECORDED_DRIVER.read_text(), encoding="utf-8")
    q = shlex.quote
    return [
        # /usr/local/sbin is first on root's PATH in an SSH session, and empty on the host.
        "mount -t tmpfs -o mode=755 pflab-gpu-bin /usr/local/sbin",
        f"cp {q(str(wrapper))} /usr/local/sbin/nvidia-smi",
        "mount -t tmpfs -o mode=755 pflab-gpu-driver /proc/driver",
        "mkdir /proc/driver/nvidia",
        f"cp {q(str(root / 'version'))} /proc/driver/nvidia/version",
    ]
