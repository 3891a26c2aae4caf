"""The NCCL this process runs, which can differ from the one torch was built with: found among the
libraries mapped into the process and asked its version. Each rank reports it in the job's
document, and the judge compares them across nodes.
"""

from __future__ import annotations

import ctypes
from typing import Any

from preflight.node.shared import decode_nccl_version, error_text, format_nccl_version


def nccl_libraries(maps: str) -> list[str]:
    """The NCCL shared libraries mapped into a process, from its /proc/<pid>/maps text."""
    found: list[str] = []
    for line in maps.splitlines():
        path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ""
        name = path.rsplit("/", 1)[-1]
        if name.startswith("libnccl.so") and path not in found:
            found.append(path)
    return found


def loaded_nccl(torch: Any) -> dict[str, Any]:
    """The NCCL this process runs: the library mapped into the process asked through
    ncclGetVersion (dlopen of a loaded library returns it); torch's build version when NCCL is
    linked into torch itself."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            libraries = nccl_libraries(handle.read())
    except OSError:
        libraries = []
    for path in libraries:
        try:
            code = ctypes.c_int(0)
            if ctypes.CDLL(path).ncclGetVersion(ctypes.byref(code)) == 0 and code.value > 0:
                return {
                    "version": decode_nccl_version(code.value),
                    "library": path,
                    "source": "ncclGetVersion",
                }
        except (OSError, AttributeError):
            continue
    try:
        text = format_nccl_version(torch.cuda.nccl.version())
    except Exception as exc:
        return {"version": None, "library": None, "source": f"unknown: {error_text(exc, first_line=True)}"}
    if text is None:
        return {"version": None, "library": None, "source": "unknown: torch has no NCCL version"}
    return {"version": text, "library": None, "source": "torch build (NCCL linked into torch)"}
