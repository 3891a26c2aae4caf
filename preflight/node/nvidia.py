"""The NVIDIA gatherer: the driver and GPUs through NVML, or, where NVML is not usable, through the
driver's proc file, libcuda and nvidia-smi; where NVML refuses a kernel module of another version
than its own, both versions.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import re
import shutil
import subprocess

from preflight.node.gathering import Sink, Unavailable, read_text, run_command
from preflight.node.nvml import nvml_snapshot
from preflight.node.shared import decode_cuda_version
from preflight.node.smi import NVIDIA_SMI_TIMEOUT_S, nvml_library_version, smi_gpus

PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"
# What NVML and nvidia-smi say when the user-space library and the loaded kernel module differ
# ("Failed to initialize NVML: Driver/library version mismatch").
VERSION_MISMATCH = "driver/library version mismatch"
# Where distributions and containers put libnvidia-ml.so.1, a link to the versioned file
# (libnvidia-ml.so.570.124.04).
NVML_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
)
_LIBRARY_FILE_RE = re.compile(r"^libnvidia-ml\.so\.(\d+(?:\.\d+)+)$")


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


def version_in_file_name(path: str) -> str | None:
    """The version in a libnvidia-ml file name (``libnvidia-ml.so.570.124.04`` -> 570.124.04)."""
    match = _LIBRARY_FILE_RE.match(os.path.basename(path))
    return match.group(1) if match else None


def _nvml_library_file() -> str | None:
    """The version of the first libnvidia-ml.so.1 found, read from the file its link points to."""
    for folder in NVML_LIBRARY_DIRS:
        link = os.path.join(folder, "libnvidia-ml.so.1")
        if os.path.exists(link) and (version := version_in_file_name(os.path.realpath(link))):
            return version
    return None


def _smi_says(smi: str | None) -> str:
    """Everything plain ``nvidia-smi`` prints, whatever its exit status ("" where it cannot run)."""
    if smi is None:
        return ""
    try:
        proc = subprocess.run(
            [smi],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            env=dict(os.environ, LC_ALL="C"),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (proc.stdout + proc.stderr).decode("utf-8", "replace")


def version_mismatch(module: str | None, smi_text: str, library_file: str | None) -> dict[str, str | None]:
    """Both sides of a driver/library version mismatch: the loaded kernel module's version (from
    the proc file), the user-space library's (as nvidia-smi names it, else from the library's
    file name) and what NVML said."""
    return {
        "module": module,
        "library": nvml_library_version(smi_text) or library_file,
        "says": "Failed to initialize NVML: Driver/library version mismatch",
    }


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
    if VERSION_MISMATCH in f"{nvml_reason} {gpu_reason or ''}".lower():
        module = parse_nvidia_driver_version(proc_text) if proc_text else None
        sink.facts["driver_mismatch"] = version_mismatch(module, _smi_says(smi), _nvml_library_file())
    if "gpus" not in sink.facts:
        if gpu_reason is None and proc_text is None and version is None:
            gpu_reason = sink.unavailable["driver"]
        elif gpu_reason is None:
            gpu_reason = f"{nvml_reason}; nvidia-smi not found on PATH"
        sink.unavailable["gpus"] = gpu_reason
