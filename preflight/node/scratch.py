"""The job's scratch space: the temporary directory and the caches of torch, TorchInductor, Triton
and Hugging Face as the job finds them, the room on the filesystem under each, and whether the user
may write there.
"""

from __future__ import annotations

import getpass
import os
import re
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Sink

if TYPE_CHECKING:
    from collections.abc import Mapping

    JsonDict = dict[str, Any]

# The variables that move a place; the job's own values (``--env``) win over the node's.
SCRATCH_ENV = (
    "TMPDIR",
    "XDG_CACHE_HOME",
    "TORCH_HOME",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "TRITON_HOME",
    "HF_HOME",
    "HF_DATASETS_CACHE",
)
DEFAULT = "default"


def _expand(path: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        return home + path[1:]
    return path


def scratch_places(environ: Mapping[str, str], home: str, user: str) -> list[tuple[str, str, str]]:
    """(place, path, source) of each place, found as its library finds it (an empty variable is
    unset); ``source``: the variable the path comes from, or "default"."""

    def variable(name: str) -> str | None:
        value = environ.get(name)
        return _expand(value, home) if value else None

    def place(name: str, variable_name: str, default: str, default_source: str) -> tuple[str, str, str]:
        value = variable(variable_name)
        return (name, value, variable_name) if value else (name, default, default_source)

    tmp = variable("TMPDIR")
    tmp_source = "TMPDIR" if tmp else DEFAULT
    tmp = tmp or "/tmp"
    cache = variable("XDG_CACHE_HOME")
    cache_source = "XDG_CACHE_HOME" if cache else DEFAULT
    cache = cache or os.path.join(home, ".cache")
    triton_home = variable("TRITON_HOME")
    inductor = os.path.join(tmp, "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))
    places = [
        ("tmp", tmp, tmp_source),
        place("torch", "TORCH_HOME", os.path.join(cache, "torch"), cache_source),
        place("inductor", "TORCHINDUCTOR_CACHE_DIR", inductor, tmp_source),
        place(
            "triton",
            "TRITON_CACHE_DIR",
            os.path.join(triton_home or home, ".triton", "cache"),
            "TRITON_HOME" if triton_home else DEFAULT,
        ),
        place("huggingface", "HF_HOME", os.path.join(cache, "huggingface"), cache_source),
    ]
    datasets = variable("HF_DATASETS_CACHE")
    if datasets:
        places.append(("hf_datasets", datasets, "HF_DATASETS_CACHE"))
    return places


def nearest_existing(path: str) -> str:
    """``path``, or the nearest directory above it that exists."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def mount_point(path: str) -> str:
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def filesystem_room(stat: os.statvfs_result) -> JsonDict:
    """Total and free bytes and inodes for a user; None where the filesystem sets no limit (a tmpfs
    without a size, btrfs's 0 inodes of 0)."""
    sized = stat.f_blocks > 0
    counted = stat.f_files > 0
    return {
        "total_bytes": stat.f_blocks * stat.f_frsize if sized else None,
        "free_bytes": stat.f_bavail * stat.f_frsize if sized else None,
        "total_inodes": stat.f_files if counted else None,
        "free_inodes": stat.f_favail if counted else None,
    }


def measure(path: str, source: str, seen: dict[int, JsonDict]) -> JsonDict:
    """A place measured where it is or would be made; each filesystem read once (``seen``)."""
    found: JsonDict = {"path": path, "source": source}
    measured = nearest_existing(path)
    found["measured"] = measured
    try:
        device = os.stat(measured).st_dev
        if device not in seen:
            seen[device] = {"device": f"{os.major(device)}:{os.minor(device)}"}
            seen[device].update(filesystem_room(os.statvfs(measured)))
        found["mount"] = mount_point(measured)
    except OSError as exc:
        found["error"] = exc.strerror or str(exc)
        return found
    found.update(seen[device])
    found["writable"] = os.access(measured, os.W_OK | os.X_OK)
    return found


def gather_scratch(sink: Sink) -> None:
    environ = dict(os.environ)
    job_env = sink.options.get("job_env")
    if isinstance(job_env, dict):
        environ.update({k: str(v) for k, v in job_env.items() if k in SCRATCH_ENV})
    home = os.path.expanduser("~")
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"  # as TorchInductor does
    seen: dict[int, JsonDict] = {}
    sink.facts["scratch"] = {
        place: measure(path, source, seen) for place, path, source in scratch_places(environ, home, user)
    }
