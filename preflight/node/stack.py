"""The node's software stack: Python, its packages, the environment variables a distributed run
reads, the system's NCCL and cuDNN, nvcc, and torch.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import re
import shutil
import sys
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Sink, Unavailable, run_command
from preflight.node.masking import is_secret_name, mask_env, secret_digest
from preflight.node.shared import decode_cudnn_version, decode_nccl_version, error_text, format_nccl_version

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    JsonDict = dict[str, Any]

# Environment variables worth comparing across nodes: what NCCL, torch, CUDA and gloo read, and
# what NCCL's network plugins read (libfabric's FI_* for the OFI plugin, UCX_* for UCX's).
ENV_PREFIXES = ("NCCL_", "CUDA_", "GLOO_", "TORCH_", "PYTORCH_", "FI_", "UCX_")
ENV_NAMES = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
)


def select_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that matter to a distributed run, sorted by name (not yet masked)."""
    return {
        name: environ[name] for name in sorted(environ) if name.startswith(ENV_PREFIXES) or name in ENV_NAMES
    }


def parse_nvcc_version(text: str) -> str | None:
    """``nvcc --version`` -> "12.4.131" (or the release, "12.4", where there is no V part)."""
    match = re.search(r"release\s+[\d.]+,\s*V(\d+(?:\.\d+)+)", text)
    if match:
        return match.group(1)
    match = re.search(r"release\s+(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def normalize_package_name(name: str) -> str:
    """PEP 503 normalisation: lowercase, runs of ``-``, ``_`` and ``.`` become ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def gather_python(sink: Sink) -> None:
    sink.facts["python"] = {
        "version": platform.python_version(),
        "executable": sys.executable or None,
        "implementation": platform.python_implementation(),
    }


# The system's NCCL and cuDNN are looked up in a child process: loaded here, the dynamic loader
# would hand these copies to torch when the probe imports it, instead of torch's own, and the
# probe would report a stack the real job never sees.
LIBRARY_PROBE = r"""
import ctypes, json
def load(names):
    failures = []
    for name in names:
        try:
            return ctypes.CDLL(name), None
        except OSError as exc:
            if not str(exc).startswith(name + ": cannot open shared object file"):
                failures.append(str(exc))  # found, but it failed to load
    reason = failures[0] if failures else "not found by the dynamic loader"
    return None, " / ".join(names) + " not loadable: " + reason
out = {}
lib, why = load(["libnccl.so.2"])
if lib is None:
    out["nccl_system"] = [None, why]
else:
    code = ctypes.c_int(0)
    status = lib.ncclGetVersion(ctypes.byref(code))
    failed = "ncclGetVersion failed with status %d" % status
    out["nccl_system"] = [code.value, None] if status == 0 else [None, failed]
lib, why = load(["libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"])
if lib is None:
    out["cudnn_system"] = [None, why]
else:
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    lib.cudnnGetVersion.argtypes = []
    out["cudnn_system"] = [int(lib.cudnnGetVersion()), None]
print(json.dumps(out))
"""
LIBRARY_DECODERS: dict[str, Callable[[int], str]] = {
    "nccl_system": lambda code: decode_nccl_version(code),
    "cudnn_system": lambda code: decode_cudnn_version(code),
}


def system_libraries(output: str) -> tuple[JsonDict, dict[str, str]]:
    """The child's answer: versions found, and why the others were not."""
    found: JsonDict = {}
    reasons: dict[str, str] = {}
    answer = json.loads(output)
    for name, decode in LIBRARY_DECODERS.items():
        code, reason = answer.get(name) or (None, "not reported")
        if isinstance(code, int) and code > 0:
            found[name] = decode(code)
        else:
            reasons[name] = str(reason or f"{name}: version {code!r}")
    return found, reasons


def gather_system_libraries(sink: Sink) -> None:
    output = run_command([sys.executable or "python3", "-c", LIBRARY_PROBE])
    found, reasons = system_libraries(output)
    sink.facts.update(found)
    sink.unavailable.update(reasons)


def gather_nvcc(sink: Sink) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise Unavailable("nvcc not found on PATH")
    version = parse_nvcc_version(run_command([nvcc, "--version"]))
    if version is None:
        raise Unavailable("nvcc --version printed no release")
    sink.facts["nvcc"] = version


def gather_packages(sink: Sink) -> None:
    from importlib import metadata

    packages: dict[str, str] = {}
    # distributions() walks sys.path in order: the first of a name is what import loads.
    for dist in metadata.distributions():
        try:
            name, version = _name_and_version(dist)
        except Exception:
            continue
        if not name or not version:
            continue
        packages.setdefault(normalize_package_name(name), version)
    sink.facts["packages"] = dict(sorted(packages.items()))


def _name_and_version(dist: Any) -> tuple[str | None, str | None]:
    """A distribution's Name and Version, read from the head of its metadata: both are single-line
    fields of the header, which ends at the first blank line (importlib's own reading parses the
    whole file, descriptions and all, as an e-mail: most of the time of listing the packages)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if text is None:
        return dist.metadata["Name"], dist.version
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        field, colon, value = line.partition(":")
        if colon and field in ("Name", "Version") and field not in found:
            found[field] = value.strip()
    return found.get("Name"), found.get("Version")


def gather_env(sink: Sink) -> None:
    selected = select_env(os.environ)
    sink.facts["env"] = mask_env(selected)
    salt = sink.options.get("salt")
    if isinstance(salt, str) and salt:
        # Masked values are still compared between nodes, by digest.
        sink.facts["env_secret_digests"] = {
            name: secret_digest(salt, value) for name, value in selected.items() if is_secret_name(name)
        }


def torch_facts(torch: Any) -> JsonDict:
    """Facts from an imported torch module; CUDA is queried only through is_available()."""
    cuda_build = getattr(torch.version, "cuda", None)
    hip_build = getattr(torch.version, "hip", None)
    cudnn = None
    try:
        code = torch.backends.cudnn.version()
        cudnn = decode_cudnn_version(int(code)) if code else None
    except Exception:
        cudnn = None
    nccl = None
    if cuda_build or hip_build:
        try:
            nccl = format_nccl_version(torch.cuda.nccl.version())
        except Exception:
            nccl = None
    cuda_available: bool | None
    device_count: int | None
    try:
        cuda_available = bool(torch.cuda.is_available())
        device_count = int(torch.cuda.device_count()) if cuda_available else 0
    except Exception:
        cuda_available = device_count = None  # torch could not tell: not the same as "no"
    dist_available = False
    nccl_available = False
    gloo_available = False
    try:
        dist = getattr(torch, "distributed", None) or importlib.import_module("torch.distributed")
        dist_available = bool(dist.is_available())
        if dist_available:
            nccl_available = bool(getattr(dist, "is_nccl_available", lambda: False)())
            gloo_available = bool(getattr(dist, "is_gloo_available", lambda: False)())
    except Exception:
        dist_available = False
    return {
        "version": str(torch.__version__),
        "cuda": str(cuda_build) if cuda_build else None,
        "cudnn": cudnn,
        "nccl": nccl,
        "cuda_available": cuda_available,
        "device_count": device_count,
        "distributed_available": dist_available,
        "nccl_available": nccl_available,
        "gloo_available": gloo_available,
    }


def gather_torch(sink: Sink) -> None:
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        raise Unavailable(f"torch not importable: {exc}") from None
    except Exception as exc:
        raise Unavailable(f"torch not importable: {error_text(exc)}") from None
    sink.facts["torch"] = torch_facts(torch)
