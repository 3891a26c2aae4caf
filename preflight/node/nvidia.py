"""The NVIDIA gatherer: the driver and GPUs through NVML, or, where NVML is not usable, through the
driver's proc file, libcuda and nvidia-smi.
"""

from __future__ import annotations

import ctypes
import importlib
import re
import shutil

from preflight.node.gathering import Sink, Unavailable, read_text, run_command
from preflight.node.nvml import nvml_snapshot
from preflight.node.shared import decode_cuda_version
from preflight.node.smi import NVIDIA_SMI_TIMEOUT_S, smi_gpus

PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"


def parse_nvidia_driver_version(text: str) -> str | None:
    """The driver version in ``/proc/driver/nvidia/version`` (proprietary or open module)."""
    match = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def _libcuda_driver_version() -> str | None:
    """cuDriverGetVersion from libcuda (needs no cuInit); None where libcuda is missing."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        code = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(code)) != 0 or code.value <= 0:
            return None
        return decode_cuda_version(code.value)
    except Exception:
        return None


def gather_nvidia(sink: Sink) -> None:
    nvml_reason: str
    try:
        nv = importlib.import_module("pynvml")
    except Exception as exc:
        nvml_reason = f"pynvml not importable: {exc}"
    else:
        try:
            driver, gpus, problems = nvml_snapshot(nv)
        except Unavailable as exc:
            nvml_reason = str(exc)
        else:
            if driver["version"] is None:
                sink.unavailable["driver"] = problems.pop("driver", "NVML gave no driver version")
            else:
                sink.facts["driver"] = driver
            sink.facts["gpus"] = gpus
            sink.unavailable.update(problems)
            return

    # Fallback without NVML: the proc file for the driver, nvidia-smi for the GPUs.
    smi = shutil.which("nvidia-smi")
    gpu_reason = None
    if smi is not None:
        try:
            sink.facts["gpus"] = smi_gpus(smi)
        except Unavailable as exc:
            gpu_reason = f"{exc} ({nvml_reason})"
    proc_text = read_text(PROC_DRIVER_VERSION)
    version = parse_nvidia_driver_version(proc_text) if proc_text else None
    source = "proc"
    if version is None and smi is not None:
        try:
            query = [smi, "--query-gpu=driver_version", "--format=csv,noheader"]
            out = run_command(query, NVIDIA_SMI_TIMEOUT_S)
            version = next((line.strip() for line in out.splitlines() if line.strip()), None)
            source = "nvidia-smi"
        except Unavailable:
            version = None
    if version is not None:
        sink.facts["driver"] = {
            "version": version,
            "cuda": _libcuda_driver_version(),
            "source": source,
        }
    elif proc_text is None:
        sink.unavailable["driver"] = (
            f"no NVIDIA driver: {PROC_DRIVER_VERSION} missing and NVML not loadable ({nvml_reason})"
        )
    else:
        sink.unavailable["driver"] = f"{PROC_DRIVER_VERSION} has no version and {nvml_reason}"
    if "gpus" not in sink.facts:
        if gpu_reason is None and proc_text is None and version is None:
            gpu_reason = sink.unavailable["driver"]
        elif gpu_reason is None:
            gpu_reason = f"{nvml_reason}; nvidia-smi not found on PATH"
        sink.unavailable["gpus"] = gpu_reason
