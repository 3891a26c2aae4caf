"""Node facts probe: what this node has, as one JSON document on stdout.

The controller sends this file over SSH as the standard input of ``python3 -`` and runs it
with the node's own interpreter (the training environment), so it must stay
self-contained: standard library only at import time, Python 3.8 or newer, never
importing ``preflight``. torch and pynvml are used when the node has them.

Every fact is optional. A fact that cannot be read is left out of ``facts`` and its name
goes into ``facts["unavailable"]`` with a short reason; one failing gatherer never stops
the others. Nothing but the JSON document is written to stdout.

The parsers are pure top-level functions (text in, data out) so the controller's tests
can run them on recorded outputs; the I/O lives in the small ``_gather_*`` functions.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import glob
import hashlib
import hmac
import importlib
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    JsonDict = dict[str, Any]

PROBE_VERSION = 1

# Subprocesses get a few seconds each; nvidia-smi can be slow to start on nodes
# without the persistence daemon, so it gets a little more.
SUBPROCESS_TIMEOUT_S = 5.0
NVIDIA_SMI_TIMEOUT_S = 10.0

PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"
SYS_CLASS_NET = "/sys/class/net"
SYS_CLASS_INFINIBAND = "/sys/class/infiniband"
# Port counters read from /sys/class/infiniband/DEV/ports/N/counters.
IB_COUNTERS = ("link_downed", "symbol_error", "link_error_recovery", "port_rcv_errors")
PCIE_LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
PCIE_RATES_GT = ((1, 2.5), (2, 5.0), (3, 8.0), (4, 16.0), (5, 32.0), (6, 64.0), (7, 128.0))
PROC_NVSWITCH = "/proc/driver/nvidia-nvswitch/devices"
# The fabric manager's process name as /proc/PID/comm shows it (15 characters at most).
FABRIC_MANAGER_COMM = "nv-fabricmanage"
# Where ip lives when the SSH session's PATH has no sbin directory in it.
IP_FALLBACK_PATHS = ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip")

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
# Variables of the job's own environment that change what this probe finds (where NCCL's
# configuration file and network plugin are): the controller passes them when the user sets them.
JOB_ENV_USED = ("LD_LIBRARY_PATH", "NCCL_CONF_FILE", "NCCL_NET_PLUGIN")
# A variable whose name has one of these words (case-insensitive, words split at "_", "-"
# and ".") has its value masked: HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, DB_PASSWORD.
# Whole words, so that NCCL_IB_PKEY or TORCH_PASSTHROUGH keep their values.
SECRET_NAME_WORDS = frozenset(
    {
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "KEY",
        "KEYS",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "PRIVATE",
        "COOKIE",
        "SESSION",
    }
)
MASK = "***"

# nvidia-smi fallback queries (used when pynvml is missing or NVML cannot start).
SMI_GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "memory.free",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "temperature.gpu",
    "power.draw",
)
# Asked in a second, best-effort query: one field a driver does not know makes nvidia-smi refuse
# the whole query ("Field ... is not a valid field to query", exit 2), and these are newer than
# the fields above (row remapping came with Ampere-era drivers). Refused together, each group
# is asked on its own. Merged into the GPUs by uuid.
SMI_HEALTH_GROUPS = (
    (
        "remapped_rows.correctable",
        "remapped_rows.uncorrectable",
        "remapped_rows.pending",
        "remapped_rows.failure",
    ),
    ("retired_pages.pending",),
    ("mig.mode.current",),
    ("pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max"),
    ("persistence_mode", "serial"),
    # Renamed from clocks_throttle_reasons in driver 535; older drivers know only the old name.
    ("clocks_event_reasons.active",),
    ("clocks_throttle_reasons.active",),
    # The GPU's registration with the NVSwitch fabric (Hopper-era drivers; "N/A" where the GPU has
    # no such fabric or the driver does not probe it, as on A100 systems).
    ("fabric.state", "fabric.status"),
)
# nvmlGpuFabricState_t (nvml.h): NOT_SUPPORTED is left out, as nvidia-smi's "Not Supported" is.
NVML_FABRIC_STATES = {1: "not_started", 2: "in_progress", 3: "completed"}
SMI_APP_FIELDS = ("gpu_uuid", "pid", "used_memory", "process_name")
# Free-text columns: a value with commas in it is folded back into these.
_SMI_TEXT_FIELDS = ("process_name", "name", "gpu_name")

MIB = 1024 * 1024


class Unavailable(Exception):
    """A fact cannot be read on this node; the message is the short human reason."""


# --------------------------------------------------------------------------- masking


_URL_RE = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)"
    r"(?P<authority>(?:(?![A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#])*)"
)


def _mask_authority(match: re.Match[str]) -> str:
    scheme, authority = match.group("scheme"), match.group("authority")
    if "@" not in authority:
        return match.group(0)
    userinfo, host = authority.rsplit("@", 1)
    if ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        return f"{scheme}{user}:{MASK}@{host}"
    # A lone userinfo is usually a token (https://<token>@host): mask it whole.
    return f"{scheme}{MASK}@{host}"


def mask_url_credentials(text: str) -> str:
    """Replace the password (or a lone token) in every ``scheme://user:pass@host`` of text."""
    if "://" not in text:
        return text
    return _URL_RE.sub(_mask_authority, text)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name looks like it holds a secret."""
    return any(word in SECRET_NAME_WORDS for word in re.split(r"[_\-.]+", name.upper()))


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """Mask secrets: values of secret-looking names become ``***``; URL passwords are masked."""
    masked: dict[str, str] = {}
    for name, value in env.items():
        masked[name] = MASK if is_secret_name(name) else mask_url_credentials(value)
    return masked


def scrub(value: Any) -> Any:
    """Mask URL credentials in every string of a JSON-like value (dicts, lists, scalars)."""
    if isinstance(value, str):
        return mask_url_credentials(value)
    if isinstance(value, dict):
        return {key: scrub(item) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value


def select_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that matter to a distributed run, sorted by name (not yet masked)."""
    return {
        name: environ[name] for name in sorted(environ) if name.startswith(ENV_PREFIXES) or name in ENV_NAMES
    }


# --------------------------------------------------------------------------- parsers


def parse_os_release(text: str) -> dict[str, str]:
    """``/etc/os-release`` as a dict (shell-style quoting removed)."""
    result: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            quote = value[0]
            value = value[1:-1]
            if quote == '"':
                value = re.sub(r"\\([\\$\"`])", r"\1", value)
        result[key.strip()] = value
    return result


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` as bytes per field (``kB`` values are multiplied by 1024)."""
    result: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"^([^:\s]+):\s+(\d+)(?:\s+(\w+))?", line)
        if not match:
            continue
        number = int(match.group(2))
        unit = (match.group(3) or "").lower()
        result[match.group(1)] = number * 1024 if unit == "kb" else number
    return result


def parse_cpuinfo_model(text: str) -> str | None:
    """The first CPU model name in ``/proc/cpuinfo`` (None where the kernel gives none)."""
    for key in ("model name", "Model", "cpu model", "Processor"):
        for line in text.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return value.strip()
    return None


def parse_nvidia_driver_version(text: str) -> str | None:
    """The driver version in ``/proc/driver/nvidia/version`` (proprietary or open module)."""
    match = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def parse_nvcc_version(text: str) -> str | None:
    """``nvcc --version`` -> "12.4.131" (or the release, "12.4", where there is no V part)."""
    match = re.search(r"release\s+[\d.]+,\s*V(\d+(?:\.\d+)+)", text)
    if match:
        return match.group(1)
    match = re.search(r"release\s+(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def _decode_version(code: int, wide_from: int) -> str:
    """A library's integer version -> "X.Y.Z": X*10000+Y*100+Z from ``wide_from`` on (when the
    minor number outgrew one digit), X*1000+Y*100+Z before."""
    major, rest = divmod(code, 10000 if code >= wide_from else 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def decode_nccl_version(code: int) -> str:
    """``ncclGetVersion`` code -> "X.Y.Z" (X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before)."""
    return _decode_version(code, 20900)


def format_nccl_version(value: Any) -> str | None:
    """torch.cuda.nccl.version(): a tuple (2, 21, 5) or, on older torch, an int code."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return ".".join(str(part) for part in value)
    if isinstance(value, int):
        return decode_nccl_version(value)
    return str(value)


def decode_cudnn_version(code: int) -> str:
    """``cudnnGetVersion`` code -> "X.Y.Z" (X*1000+Y*100+Z up to 8.x, X*10000+Y*100+Z from 9)."""
    return _decode_version(code, 90000)


def decode_cuda_version(code: int) -> str:
    """CUDA driver version code -> "X.Y" (12040 -> "12.4")."""
    major, rest = divmod(code, 1000)
    return f"{major}.{rest // 10}"


def _header_name(column: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", column.strip())


def parse_smi_csv(text: str, fields: Sequence[str] | None = None) -> list[dict[str, str]]:
    """nvidia-smi ``--format=csv`` output as one dict per row, keyed by field name.

    With ``fields`` the text has no header (``noheader``); without, the first line is the
    header and its unit suffixes (``memory.total [MiB]``) are dropped. Values are the raw
    stripped strings. A free-text column (a process or GPU name) that itself contains
    commas is put back together.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            return []
        names = [_header_name(column) for column in lines[0].split(",")]
        lines = lines[1:]
    else:
        names = list(fields)
    rows: list[dict[str, str]] = []
    for line in lines:
        values = [value.strip() for value in line.split(",")]
        if len(values) > len(names):
            text_at = next((names.index(n) for n in _SMI_TEXT_FIELDS if n in names), None)
            if text_at is None:
                continue
            after = len(names) - text_at - 1
            end = len(values) - after
            values = [*values[:text_at], ", ".join(values[text_at:end]), *values[end:]]
        if len(values) != len(names):
            continue
        rows.append(dict(zip(names, values)))  # noqa: B905 - lengths checked above
    return rows


def smi_value(raw: str | None) -> str | None:
    """A raw nvidia-smi value, or None for "N/A", "[Not Supported]" and other [markers]."""
    if raw is None:
        return None
    value = raw.strip()
    if not value or value in ("N/A", "Not Supported") or (value[0] == "[" and value[-1] == "]"):
        return None
    return value


def smi_number(raw: str | None) -> float | None:
    """A numeric nvidia-smi value with any unit suffix ("81559 MiB", "69.85 W") dropped."""
    value = smi_value(raw)
    if value is None:
        return None
    match = re.match(r"^(-?\d+(?:\.\d+)?)(?:\s*[A-Za-z%]+)?$", value)
    return float(match.group(1)) if match else None


def _smi_int(raw: str | None) -> int | None:
    number = smi_number(raw)
    return None if number is None else int(number)


def _smi_mib(raw: str | None) -> int | None:
    number = smi_number(raw)
    return None if number is None else int(number * MIB)


def _smi_bool(raw: str | None) -> bool | None:
    value = smi_value(raw)
    if value is None:
        return None
    return value.lower() in ("yes", "true", "enabled", "1")


def _smi_hex(raw: str | None) -> int | None:
    """``0x0000000000000008`` -> 8; None for N/A or anything else."""
    value = smi_value(raw)
    try:
        return int(value, 16) if value else None
    except ValueError:
        return None


def gpu_fabric(state: str | None, status: str | None) -> JsonDict | None:
    """A GPU's registration with the NVSwitch fabric: ``state`` (not_started, in_progress or
    completed) and ``status`` ("Success" or the error; it means something only once completed).
    None where the GPU does not report one."""
    if not state:
        return None
    return {"state": state.strip().lower().replace(" ", "_"), "status": status}


def gpu_from_smi_row(row: Mapping[str, str]) -> JsonDict:
    """One ``--query-gpu`` row as a GPU fact (the same keys as the NVML path)."""
    ecc_mode = smi_value(row.get("ecc.mode.current"))
    remapped: JsonDict | None = None
    if any(key.startswith("remapped_rows.") for key in row):
        remapped = {
            "correctable": _smi_int(row.get("remapped_rows.correctable")),
            "uncorrectable": _smi_int(row.get("remapped_rows.uncorrectable")),
            "pending": _smi_bool(row.get("remapped_rows.pending")),
            "failure": _smi_bool(row.get("remapped_rows.failure")),
        }
        if all(value is None for value in remapped.values()):
            remapped = None
    power = smi_number(row.get("power.draw"))
    mig = smi_value(row.get("mig.mode.current"))
    persistence = smi_value(row.get("persistence_mode"))
    reasons = smi_value(row.get("clocks_event_reasons.active") or row.get("clocks_throttle_reasons.active"))
    link = {
        "gen_current": _smi_int(row.get("pcie.link.gen.current")),
        "gen_max": _smi_int(row.get("pcie.link.gen.max")),
        "width_current": _smi_int(row.get("pcie.link.width.current")),
        "width_max": _smi_int(row.get("pcie.link.width.max")),
    }
    return {
        "index": _smi_int(row.get("index")),
        "name": smi_value(row.get("name")),
        "uuid": smi_value(row.get("uuid")),
        "pci_bus_id": smi_value(row.get("pci.bus_id")),
        "memory_total_bytes": _smi_mib(row.get("memory.total")),
        "memory_used_bytes": _smi_mib(row.get("memory.used")),
        "memory_free_bytes": _smi_mib(row.get("memory.free")),
        "ecc_mode": ecc_mode.lower() if ecc_mode else None,
        "ecc_uncorrected_volatile": _smi_int(row.get("ecc.errors.uncorrected.volatile.total")),
        "ecc_uncorrected_aggregate": _smi_int(row.get("ecc.errors.uncorrected.aggregate.total")),
        "remapped_rows": remapped,
        "retired_pages_pending": _smi_bool(row.get("retired_pages.pending")),
        "mig_mode": mig.lower() if mig else None,
        "processes": [],
        "temperature_c": _smi_int(row.get("temperature.gpu")),
        "power_w": None if power is None else round(power, 2),
        "serial": smi_value(row.get("serial")),
        "pcie_link": link if any(v is not None for v in link.values()) else None,
        "fabric": gpu_fabric(smi_value(row.get("fabric.state")), smi_value(row.get("fabric.status"))),
        "nvlink": None,  # from nvidia-smi nvlink --status (nvlinks_from_smi)
        "persistence_mode": persistence.lower() if persistence else None,
        "clock_event_reasons": _smi_hex(reasons),
    }


def processes_from_smi_rows(rows: Iterable[Mapping[str, str]]) -> dict[str, list[JsonDict]]:
    """``--query-compute-apps`` rows grouped by GPU UUID."""
    by_gpu: dict[str, list[JsonDict]] = {}
    for row in rows:
        uuid = smi_value(row.get("gpu_uuid"))
        pid = _smi_int(row.get("pid"))
        if uuid is None or pid is None:
            continue
        used = row.get("used_memory", row.get("used_gpu_memory"))
        by_gpu.setdefault(uuid, []).append(
            {
                "pid": pid,
                "used_memory_bytes": _smi_mib(used),
                "name": smi_value(row.get("process_name")),
            }
        )
    return by_gpu


def gpus_from_smi(
    gpu_text: str,
    apps_text: str | None,
    header: bool = False,
    health: Sequence[tuple[Sequence[str], str]] = (),
) -> list[JsonDict]:
    """GPU facts from the nvidia-smi queries (``noheader`` with our fields by default): the GPUs,
    their processes (None: the query failed, which is not "no process"), and the health
    queries that answered, each a (fields after ``uuid``, output) pair, merged by uuid."""
    gpu_rows = parse_smi_csv(gpu_text, None if header else SMI_GPU_FIELDS)
    for fields, text in health:
        by_uuid = {row.get("uuid"): row for row in parse_smi_csv(text, None if header else ["uuid", *fields])}
        for row in gpu_rows:
            extra = by_uuid.get(row.get("uuid"))
            if extra is not None:
                row.update({k: v for k, v in extra.items() if k != "uuid"})
    gpus = [gpu_from_smi_row(row) for row in gpu_rows]
    if apps_text is not None:
        by_gpu = processes_from_smi_rows(parse_smi_csv(apps_text, None if header else SMI_APP_FIELDS))
        for gpu in gpus:
            gpu["processes"] = by_gpu.get(gpu["uuid"], [])
    return gpus


_NVLINK_GPU_RE = re.compile(r"^GPU (\d+): ")
_NVLINK_LINK_RE = re.compile(r"^\s+Link (\d+): (.+?)\s*$")
_NVLINK_SPEED_RE = re.compile(r"^\d+(?:\.\d+)? GB/s$")
# What nvidia-smi prints under a GPU instead of its links when none is up ("... as all links are
# inActive"): NVLinks down, or an NVLink card without its bridge.
_NVLINK_ALL_DOWN_RE = re.compile(r"all links are inactive", re.IGNORECASE)


def nvlinks_from_smi(text: str) -> dict[int, JsonDict]:
    """``nvidia-smi nvlink -s`` by GPU index: how many links are up (a speed) and which are
    ``<inactive>``; ``all_inactive`` where the driver says all are, without listing them. A GPU
    that lists no link (no NVLink) has no entry."""
    found: dict[int, JsonDict] = {}
    current: JsonDict | None = None
    for line in text.splitlines():
        if gpu := _NVLINK_GPU_RE.match(line):
            current = found.setdefault(int(gpu.group(1)), {"active": 0, "inactive": []})
        elif current is not None and (link := _NVLINK_LINK_RE.match(line)):
            value = link.group(2)
            if value == "<inactive>":
                current["inactive"].append(int(link.group(1)))
            elif _NVLINK_SPEED_RE.match(value):
                current["active"] += 1
        elif current is not None and _NVLINK_ALL_DOWN_RE.search(line):
            current["all_inactive"] = True
    return {
        index: links
        for index, links in found.items()
        if links["active"] or links["inactive"] or links.get("all_inactive")
    }


def parse_ip_addr_json(text: str) -> list[JsonDict]:
    """``ip -j addr show`` -> interfaces (name, "addr/prefix" list, mtu, state); ``lo`` left out."""
    interfaces: list[JsonDict] = []
    for link in json.loads(text or "[]"):
        if not isinstance(link, dict):
            continue
        name = link.get("ifname")
        if not name or name == "lo" or link.get("link_type") == "loopback":
            continue
        addresses = [
            f"{info['local']}/{info['prefixlen']}" if "prefixlen" in info else str(info["local"])
            for info in link.get("addr_info") or []
            if isinstance(info, dict) and info.get("local")
        ]
        mtu = link.get("mtu")
        state = link.get("operstate")
        interfaces.append(
            {
                "name": str(name),
                "addresses": addresses,
                "mtu": int(mtu) if isinstance(mtu, int) else None,
                "state": str(state).lower() if state else None,
            }
        )
    return interfaces


def parse_link_speed(text: str | None) -> int | None:
    """``/sys/class/net/NAME/speed`` in Mb/s; None when missing, invalid or unknown (-1)."""
    if text is None:
        return None
    try:
        speed = int(text.strip())
    except ValueError:
        return None
    # -1 (or -1 read as unsigned) means unknown: no link, or a virtual device.
    return speed if 0 < speed < 0xFFFFFFFF else None


def parse_ib_state(text: str) -> str:
    """``/sys/class/infiniband/DEV/ports/N/state`` -> "ACTIVE" (from "4: ACTIVE")."""
    value = text.strip()
    return value.split(":", 1)[1].strip() if ":" in value else value


def normalize_package_name(name: str) -> str:
    """PEP 503 normalisation: lowercase, runs of ``-``, ``_`` and ``.`` become ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_nccl_conf(text: str) -> tuple[dict[str, str], list[str]]:
    """An NCCL configuration file as NCCL itself reads it: a line is split at its first ``=``,
    nothing is trimmed, ``#`` lines and lines without ``=`` are skipped, and the first setting of
    a name wins (NCCL sets each with ``setenv(..., 0)``). Returns the settings and the names NCCL
    sets but never reads (a space in the name: ``NCCL_DEBUG = INFO``)."""
    entries: dict[str, str] = {}
    unread: list[str] = []
    for line in text.split("\n"):
        if line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        if not name:
            continue
        if name != name.strip() or any(c.isspace() for c in name):
            unread.append(name)
            continue
        entries.setdefault(name, value)
    return entries, unread


_LDCONFIG_RE = re.compile(r"^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*)$")


def parse_ldconfig_cache(text: str) -> list[tuple[str, str, str]]:
    """``ldconfig -p`` -> (library name, flags, path) for every cached library."""
    found: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        match = _LDCONFIG_RE.match(line)
        if match:
            found.append((match.group(1), match.group(2), match.group(3).strip()))
    return found


def nccl_plugin_names(plugin: str | None) -> list[str]:
    """The libraries NCCL tries for its network plugin: ``NCCL_NET_PLUGIN`` as a library name or
    as the suffix of ``libnccl-net-<suffix>.so``; ``none`` loads none; unset, ``libnccl-net.so``."""
    if plugin is None or plugin == "":
        return ["libnccl-net.so"]
    if plugin.lower() == "none":
        return []
    return [plugin, f"libnccl-net-{plugin}.so"]


# Kernel clock states (adjtimex): TIME_ERROR is a clock no time service keeps synchronised.
CLOCK_STATES = {0: "ok", 1: "insert leap second", 2: "delete leap second", 3: "leap second", 4: "wait"}
TIME_ERROR = 5
# Processes that keep a clock synchronised (as /proc/PID/comm shows them, 15 characters at most).
TIME_SERVICES = {
    "chronyd": "chronyd",
    "ntpd": "ntpd",
    "openntpd": "openntpd",
    "systemd-timesyn": "systemd-timesyncd",
    "ptp4l": "ptp4l",
    "phc2sys": "phc2sys",
    "timemaster": "timemaster",
    "vmtoolsd": "vmtoolsd",
}


def time_services(comms: Iterable[str]) -> list[str]:
    """The time services among process names, each once, sorted."""
    return sorted({TIME_SERVICES[c.strip()] for c in comms if c.strip() in TIME_SERVICES})


def limit_value(value: int) -> int | str:
    """A resource limit as reported: a number, or "unlimited"."""
    return "unlimited" if value == resource.RLIM_INFINITY or value < 0 else int(value)


def secret_digest(salt: str, value: str) -> str:
    """A value the report must not show, as a keyed digest: equal values give equal digests
    within one run (the key never leaves the run), and nothing can be read back from it."""
    return hmac.new(salt.encode(), value.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()[:16]


# --------------------------------------------------------------------------- I/O helpers


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _run(argv: Sequence[str], timeout: float = SUBPROCESS_TIMEOUT_S) -> str:
    """Run a command (stdin closed, C locale) and return its stdout, or raise Unavailable."""
    env = dict(os.environ, LC_ALL="C")
    try:
        proc = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        raise Unavailable(f"{argv[0]} not found on PATH") from None
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{argv[0]} timed out after {timeout:g} s") from None
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip() or out.strip()
        first = err.splitlines()[0] if err else "no output"
        raise Unavailable(f"{argv[0]} exited with status {proc.returncode}: {first}")
    return out


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _text(value: Any) -> str:
    """pynvml returns bytes or str depending on its version."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


# --------------------------------------------------------------------------- gatherers


class Sink:
    """Where the gatherers put what they found and what they could not read; ``options`` is what
    the controller asked for (``job_env``: the job's own variables that change what is found,
    ``salt``: the key of this run's secret digests)."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.facts: JsonDict = {}
        self.unavailable: dict[str, str] = {}
        self.options: Mapping[str, Any] = options or {}


def _gather_hostname(sink: Sink) -> None:
    sink.facts["hostname"] = socket.gethostname()


def _gather_os(sink: Sink) -> None:
    uname = os.uname()  # not platform.uname(): on 3.8 that runs `uname -p` in a subprocess
    text = _read_text("/etc/os-release") or _read_text("/usr/lib/os-release")
    release = parse_os_release(text) if text else {}
    sink.facts["os"] = {
        "name": release.get("PRETTY_NAME") or release.get("NAME") or None,
        "kernel": uname.release or None,
        "machine": uname.machine or None,
    }


def _gather_cpu(sink: Sink) -> None:
    text = _read_text("/proc/cpuinfo")
    sink.facts["cpu"] = {
        "count": os.cpu_count(),
        "model": parse_cpuinfo_model(text) if text else None,
    }


def _gather_memory(sink: Sink) -> None:
    text = _read_text("/proc/meminfo")
    if text is None:
        raise Unavailable("/proc/meminfo not readable")
    info = parse_meminfo(text)
    if "MemTotal" not in info:
        raise Unavailable("/proc/meminfo has no MemTotal")
    sink.facts["memory"] = {
        "total_bytes": info["MemTotal"],
        "available_bytes": info.get("MemAvailable"),
    }


# Kernel settings a multi-node job depends on. gc_thresh3 caps the neighbour (ARP) table:
# a node that talks to more peers on its own subnet than this has some of them refused.
SYSCTLS = (
    "net.ipv4.neigh.default.gc_thresh3",
    "net.core.somaxconn",
    "net.ipv4.ip_local_port_range",
)


def _gather_sysctl(sink: Sink) -> None:
    found: dict[str, Any] = {}
    for name in SYSCTLS:
        text = _read_text("/proc/sys/" + name.replace(".", "/"))
        if text is not None:
            words = text.split()
            found[name] = int(words[0]) if len(words) == 1 and words[0].isdigit() else " ".join(words)
    if not found:
        raise Unavailable("/proc/sys not readable")
    sink.facts["sysctl"] = found


def _gather_python(sink: Sink) -> None:
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


def _gather_system_libraries(sink: Sink) -> None:
    output = _run([sys.executable or "python3", "-c", LIBRARY_PROBE])
    found, reasons = system_libraries(output)
    sink.facts.update(found)
    sink.unavailable.update(reasons)


def _gather_nvcc(sink: Sink) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise Unavailable("nvcc not found on PATH")
    version = parse_nvcc_version(_run([nvcc, "--version"]))
    if version is None:
        raise Unavailable("nvcc --version printed no release")
    sink.facts["nvcc"] = version


def _gather_packages(sink: Sink) -> None:
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


def _gather_env(sink: Sink) -> None:
    selected = select_env(os.environ)
    sink.facts["env"] = mask_env(selected)
    salt = sink.options.get("salt")
    if isinstance(salt, str) and salt:
        # Masked values are still compared between nodes, by digest.
        sink.facts["env_secret_digests"] = {
            name: secret_digest(salt, value) for name, value in selected.items() if is_secret_name(name)
        }


def _gather_limits(sink: Sink) -> None:
    limits: JsonDict = {}
    for name, which in (
        ("memlock", "RLIMIT_MEMLOCK"),
        ("nofile", "RLIMIT_NOFILE"),
        ("nproc", "RLIMIT_NPROC"),
        ("stack", "RLIMIT_STACK"),
    ):
        number = getattr(resource, which, None)
        if number is None:
            continue
        soft, hard = resource.getrlimit(number)
        limits[name] = {"soft": limit_value(soft), "hard": limit_value(hard)}
    sink.facts["limits"] = limits


SHM_PATH = "/dev/shm"


def _gather_shm(sink: Sink) -> None:
    try:
        stat = os.statvfs(SHM_PATH)
    except OSError as exc:
        raise Unavailable(f"{SHM_PATH}: {exc.strerror}") from None
    sink.facts["shm"] = {
        "path": SHM_PATH,
        "size_bytes": stat.f_blocks * stat.f_frsize,
        "free_bytes": stat.f_bavail * stat.f_frsize,
    }


def _home_directory() -> str | None:
    """The home directory NCCL reads ``.nccl.conf`` from: the user's entry, not ``$HOME``."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        return None


def _ldconfig_cache() -> list[tuple[str, str, str]]:
    tool = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.access(p, os.X_OK)), None
    )
    if tool is None:
        return []
    try:
        return parse_ldconfig_cache(_run([tool, "-p"]))
    except Unavailable:
        return []


# Where the dynamic loader looks after LD_LIBRARY_PATH and its cache.
LOADER_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")


def nccl_facts(environ: Mapping[str, str], home: str | None) -> JsonDict:
    """The configuration NCCL reads besides the environment, and its network plugins."""
    conf_files: list[JsonDict] = []
    user_file = environ.get("NCCL_CONF_FILE") or (os.path.join(home, ".nccl.conf") if home else None)
    for role, path in (("user", user_file), ("system", "/etc/nccl.conf")):
        if path is None:
            continue
        text = _read_text(path)
        entry: JsonDict = {"role": role, "path": path, "present": text is not None}
        if text is not None:
            settings, unread = parse_nccl_conf(text)
            entry["settings"] = mask_env(settings)
            entry["unread"] = unread
        conf_files.append(entry)
    library_dirs = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    cache = _ldconfig_cache()
    found: dict[str, str] = {}  # path -> name
    for directory in [*library_dirs, *LOADER_DEFAULT_DIRS]:
        for path in sorted(glob.glob(os.path.join(glob.escape(directory), "libnccl-net*.so*"))):
            found.setdefault(path, os.path.basename(path))
    for name, _, path in cache:
        if name.startswith("libnccl-net"):
            found.setdefault(path, name)
    wanted = nccl_plugin_names(environ.get("NCCL_NET_PLUGIN"))
    loaded = None
    for name in wanted:
        if "/" in name:
            loaded = name if os.path.exists(name) else None
        else:
            places = [os.path.join(d, name) for d in library_dirs]
            places += [path for cached, _, path in cache if cached == name]
            places += [os.path.join(d, name) for d in LOADER_DEFAULT_DIRS]
            loaded = next((p for p in places if os.path.exists(p)), None)
        if loaded is not None:
            break
    return {
        "conf_files": conf_files,
        "net_plugins": [{"name": name, "path": path} for path, name in sorted(found.items())],
        "net_plugin_wanted": wanted,
        "net_plugin": loaded,
    }


def _gather_nccl(sink: Sink) -> None:
    environ = dict(os.environ)
    job_env = sink.options.get("job_env")
    if isinstance(job_env, dict):
        environ.update({k: str(v) for k, v in job_env.items() if k in JOB_ENV_USED})
    sink.facts["nccl"] = nccl_facts(environ, _home_directory())


def _kernel_clock_state() -> int | None:
    """adjtimex(2) with nothing to change: the kernel's clock state, None where it cannot say."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        timex = ctypes.create_string_buffer(512)  # larger than struct timex on every ABI; zeroed
        state = int(libc.adjtimex(timex))
    except (OSError, AttributeError):
        return None
    return None if state < 0 else state


def _process_names() -> list[str]:
    names = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            text = _read_text(f"/proc/{entry}/comm")
            if text:
                names.append(text.strip())
    return names


def _gather_time(sink: Sink) -> None:
    state = _kernel_clock_state()
    sink.facts["time"] = {
        "synchronised": None if state is None else state != TIME_ERROR,
        "state": None if state is None else CLOCK_STATES.get(state, "unsynchronised"),
        "services": time_services(_process_names()),
    }


NAME_LOOKUP_TIMEOUT_S = 5.0


def resolve_name(name: str, timeout_s: float = NAME_LOOKUP_TIMEOUT_S) -> JsonDict:
    """How this node resolves ``name``: its addresses in the resolver's order (the first is what
    gloo and most tools use), its canonical name, or why it does not resolve."""
    answer: JsonDict = {"name": name}

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(name, None, 0, socket.SOCK_STREAM, 0, socket.AI_CANONNAME)
        except (OSError, UnicodeError) as exc:
            answer["error"] = getattr(exc, "strerror", None) or str(exc)
            return
        answer["addresses"] = list(dict.fromkeys(str(info[4][0]) for info in infos))
        answer["canonical"] = next((info[3] for info in infos if info[3]), None)

    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        return {"name": name, "error": f"no answer within {timeout_s:g} s"}
    return answer


def _gather_name_resolution(sink: Sink) -> None:
    sink.facts["name_resolution"] = resolve_name(socket.gethostname())


def _sysfs_interfaces(net_root: str) -> list[JsonDict]:
    interfaces: list[JsonDict] = []
    for name in sorted(os.listdir(net_root)):
        if name == "lo":
            continue
        mtu = (_read_text(os.path.join(net_root, name, "mtu")) or "").strip()
        state = (_read_text(os.path.join(net_root, name, "operstate")) or "").strip()
        interfaces.append(
            {
                "name": name,
                "addresses": [],
                "mtu": int(mtu) if mtu.isdigit() else None,
                "state": state.lower() or None,
            }
        )
    return interfaces


def _counter(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def parse_pcie_speed(text: str | None) -> float | None:
    """``/sys/bus/pci/devices/*/current_link_speed`` -> GT/s: ``16.0 GT/s PCIe`` -> 16.0, ``2.5 GT/s`` -> 2.5;
    None for ``Unknown`` or an unreadable file."""
    found = re.match(r"\s*([\d.]+)\s*GT/s", text or "")
    return float(found.group(1)) if found else None


def pcie_generation(gt_per_s: float | None) -> int | None:
    """The PCIe generation of a per-lane rate: 2.5 -> 1, 5 -> 2, 8 -> 3, 16 -> 4, 32 -> 5, 64 -> 6."""
    if gt_per_s is None:
        return None
    return next((gen for gen, rate in PCIE_RATES_GT if abs(gt_per_s - rate) < 0.5), None)


def pcie_link(device_dir: str) -> JsonDict | None:
    """A PCI device's link from sysfs (``current_link_speed/width``, ``max_link_speed/width``), as
    generations and lane counts; None where the device has no such files (virtual devices)."""
    values = {name: _read_text(os.path.join(device_dir, name)) for name in PCIE_LINK_FILES}
    if all(value is None for value in values.values()):
        return None

    def width(name: str) -> int | None:
        value = (values[name] or "").strip()
        return int(value) if value.isdigit() and int(value) > 0 else None

    return {
        "gen_current": pcie_generation(parse_pcie_speed(values["current_link_speed"])),
        "gen_max": pcie_generation(parse_pcie_speed(values["max_link_speed"])),
        "width_current": width("current_link_width"),
        "width_max": width("max_link_width"),
    }


def ib_devices(ib_root: str = SYS_CLASS_INFINIBAND) -> list[JsonDict]:
    """InfiniBand/RoCE ports from sysfs (an empty list where there are none)."""
    devices: list[JsonDict] = []
    if not os.path.isdir(ib_root):
        return devices
    for device in sorted(os.listdir(ib_root)):
        ports_dir = os.path.join(ib_root, device, "ports")
        if not os.path.isdir(ports_dir):
            continue
        ports = sorted(
            os.listdir(ports_dir), key=lambda p: (not p.isdigit(), int(p) if p.isdigit() else 0, p)
        )
        for port in ports:
            base = os.path.join(ports_dir, port)
            state = _read_text(os.path.join(base, "state"))
            rate = _read_text(os.path.join(base, "rate"))
            link_layer = _read_text(os.path.join(base, "link_layer"))
            phys_state = _read_text(os.path.join(base, "phys_state"))
            counters = {
                name: _counter(_read_text(os.path.join(base, "counters", name))) for name in IB_COUNTERS
            }
            devices.append(
                {
                    "name": device,
                    "port": int(port) if port.isdigit() else port,
                    "state": parse_ib_state(state) if state is not None else None,
                    "rate": rate.strip() if rate is not None else None,
                    "link_layer": link_layer.strip() if link_layer is not None else None,
                    "phys_state": parse_ib_state(phys_state) if phys_state is not None else None,
                    "counters": {k: v for k, v in counters.items() if v is not None},
                    "pcie": pcie_link(os.path.join(ib_root, device, "device")),
                }
            )
    return devices


def net_facts(net_root: str = SYS_CLASS_NET, ib_root: str = SYS_CLASS_INFINIBAND) -> JsonDict:
    """Interfaces from ``ip -j addr show`` (or sysfs without ``ip``) and IB ports."""
    interfaces: list[JsonDict] | None = None
    ip = shutil.which("ip") or next((p for p in IP_FALLBACK_PATHS if os.access(p, os.X_OK)), None)
    if ip is not None:
        try:
            interfaces = parse_ip_addr_json(_run([ip, "-j", "addr", "show"]))
        except (Unavailable, ValueError):
            interfaces = None  # e.g. an old iproute2 without -j: fall back to sysfs
    if interfaces is None:
        if not os.path.isdir(net_root):
            raise Unavailable(f"ip not usable and {net_root} missing")
        interfaces = _sysfs_interfaces(net_root)
    for interface in interfaces:
        speed_path = os.path.join(net_root, interface["name"], "speed")
        interface["speed_mbps"] = parse_link_speed(_read_text(speed_path))
        interface["pcie"] = pcie_link(os.path.join(net_root, interface["name"], "device"))
    return {"interfaces": interfaces, "ib_devices": ib_devices(ib_root)}


def _gather_net(sink: Sink) -> None:
    sink.facts["net"] = net_facts()


# ---- hardware health: NVSwitches and the fabric manager, XID errors in the kernel log

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
# (older drivers: "NVRM: Xid (0000:03:00): 13, ...").
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+), ?(?P<detail>.*)$")


def parse_xid_lines(text: str) -> list[JsonDict]:
    """Every XID line of a kernel log: the GPU's PCI address, the XID number and the rest."""
    events: list[JsonDict] = []
    for line in text.splitlines():
        found = _XID_RE.search(line)
        if found:
            events.append(
                {"pci": found.group("pci").lower(), "xid": int(found.group("xid")),
                 "detail": found.group("detail").strip()[:200]}
            )  # fmt: skip
    return events


def _running_comm(name: str) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit() and (_read_text(os.path.join("/proc", pid, "comm")) or "").strip() == name:
            return True
    return False


def hardware_facts() -> JsonDict:
    """NVSwitches and whether the fabric manager runs; XID lines from the kernel log, or why it
    could not be read (which is not the same as none)."""
    facts: JsonDict = {}
    nvswitches = sorted(os.listdir(PROC_NVSWITCH)) if os.path.isdir(PROC_NVSWITCH) else []
    facts["nvswitches"] = len(nvswitches)
    facts["fabric_manager_running"] = _running_comm(FABRIC_MANAGER_COMM)
    dmesg = shutil.which("dmesg") or next(
        (p for p in ("/usr/bin/dmesg", "/bin/dmesg") if os.access(p, os.X_OK)), None
    )
    if dmesg is None:
        facts["xid"] = {"readable": False, "reason": "dmesg not found"}
        return facts
    try:
        text = _run([dmesg, "--kernel"])
    except Unavailable as exc:
        facts["xid"] = {"readable": False, "reason": str(exc)[:200]}
        return facts
    facts["xid"] = {"readable": True, "events": parse_xid_lines(text)[-200:]}
    return facts


def _gather_hardware(sink: Sink) -> None:
    sink.facts["hardware"] = hardware_facts()


# ---- NVIDIA driver and GPUs


def _nvml_error_types(nv: Any) -> tuple[type[BaseException], type[BaseException] | None]:
    base = getattr(nv, "NVMLError", Exception)
    not_supported = getattr(nv, "NVMLError_NotSupported", None)
    return base, not_supported


def _nvml_call(nv: Any, problems: dict[str, str], label: str, fname: str, *args: Any) -> Any:
    """Call ``nv.<fname>(*args)``: NotSupported gives None; other errors are noted in problems."""
    base, not_supported = _nvml_error_types(nv)
    func = getattr(nv, fname, None)
    if func is None:
        problems[label] = f"NVML: {fname} not in this pynvml"
        return None
    try:
        return func(*args)
    except base as exc:
        if not_supported is not None and isinstance(exc, not_supported):
            return None
        problems[label] = f"NVML: {exc}"
        return None


def _process_name(nv: Any, pid: int) -> str | None:
    try:
        name = _text(nv.nvmlSystemGetProcessName(pid)).strip()
    except Exception:
        name = ""
    if not name:
        name = (_read_text(f"/proc/{pid}/comm") or "").strip()
    return name or None


def _nvml_process(nv: Any, proc: Any) -> JsonDict:
    pid = int(proc.pid)
    used = getattr(proc, "usedGpuMemory", None)
    return {
        "pid": pid,
        "used_memory_bytes": int(used) if used is not None else None,
        "name": _process_name(nv, pid),
    }


def _nvml_gpu(nv: Any, index: int, problems: dict[str, str]) -> JsonDict:
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    prefix = f"gpus[{index}]."

    def call(field: str, fname: str, *args: Any) -> Any:
        return _nvml_call(nv, problems, prefix + field, fname, handle, *args)

    memory = call("memory", "nvmlDeviceGetMemoryInfo")
    pci = call("pci_bus_id", "nvmlDeviceGetPciInfo")
    ecc = call("ecc_mode", "nvmlDeviceGetEccMode")
    uncorrected = getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    volatile = call(
        "ecc_uncorrected_volatile",
        "nvmlDeviceGetTotalEccErrors",
        uncorrected,
        getattr(nv, "NVML_VOLATILE_ECC", 0),
    )
    aggregate = call(
        "ecc_uncorrected_aggregate",
        "nvmlDeviceGetTotalEccErrors",
        uncorrected,
        getattr(nv, "NVML_AGGREGATE_ECC", 1),
    )
    remapped = call("remapped_rows", "nvmlDeviceGetRemappedRows")
    # Page retirement is the pre-Ampere mechanism; Ampere and later remap rows instead.
    arch = _nvml_call(nv, {}, "", "nvmlDeviceGetArchitecture", handle)
    ampere = getattr(nv, "NVML_DEVICE_ARCH_AMPERE", 7)
    retired_pending = None
    if not (isinstance(arch, int) and ampere <= arch < 0xFFFFFFFF):
        retired_pending = call("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus")
    temperature = call("temperature_c", "nvmlDeviceGetTemperature", getattr(nv, "NVML_TEMPERATURE_GPU", 0))
    power_mw = call("power_w", "nvmlDeviceGetPowerUsage")
    procs = call("processes", "nvmlDeviceGetComputeRunningProcesses")

    mig = call("mig_mode", "nvmlDeviceGetMigMode")
    # None: the query failed or is not supported here, which is not the same as "no process".
    processes = None if procs is None else [_nvml_process(nv, proc) for proc in procs]
    name = call("name", "nvmlDeviceGetName")
    uuid = call("uuid", "nvmlDeviceGetUUID")
    # Best effort, without a problem noted: these say more about health than identity.
    quiet: dict[str, str] = {}
    serial = _nvml_call(nv, quiet, "", "nvmlDeviceGetSerial", handle)
    persistence = _nvml_call(nv, quiet, "", "nvmlDeviceGetPersistenceMode", handle)
    reasons_function = (
        "nvmlDeviceGetCurrentClocksEventReasons"
        if hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons")
        else "nvmlDeviceGetCurrentClocksThrottleReasons"
    )
    reasons = _nvml_call(nv, quiet, "", reasons_function, handle)
    link = {
        key: _nvml_call(nv, quiet, "", function, handle)
        for key, function in (
            ("gen_current", "nvmlDeviceGetCurrPcieLinkGeneration"),
            ("gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
            ("width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
            ("width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
        )
    }
    return {
        "serial": _text(serial) if serial is not None else None,
        "pcie_link": {k: int(v) for k, v in link.items() if v is not None} or None,
        "fabric": _nvml_fabric(nv, handle),
        "nvlink": _nvml_nvlinks(nv, handle),
        # NVML_FEATURE_ENABLED = 1
        "persistence_mode": None
        if persistence is None
        else ("enabled" if int(persistence) == 1 else "disabled"),
        "clock_event_reasons": int(reasons) if reasons is not None else None,
        "index": index,
        "name": _text(name) if name is not None else None,
        "uuid": _text(uuid) if uuid is not None else None,
        "pci_bus_id": _text(pci.busId) if pci is not None else None,
        "memory_total_bytes": int(memory.total) if memory is not None else None,
        "memory_used_bytes": int(memory.used) if memory is not None else None,
        "memory_free_bytes": int(memory.free) if memory is not None else None,
        "ecc_mode": None if ecc is None else ("enabled" if int(ecc[0]) else "disabled"),
        "ecc_uncorrected_volatile": int(volatile) if volatile is not None else None,
        "ecc_uncorrected_aggregate": int(aggregate) if aggregate is not None else None,
        "remapped_rows": None
        if remapped is None
        else {
            "correctable": int(remapped[0]),
            "uncorrectable": int(remapped[1]),
            "pending": bool(remapped[2]),
            "failure": bool(remapped[3]),
        },
        "retired_pages_pending": None if retired_pending is None else bool(retired_pending),
        # nvmlDeviceGetMigMode: (current, pending), NVML_DEVICE_MIG_ENABLE = 1.
        "mig_mode": None if mig is None else ("enabled" if int(mig[0]) == 1 else "disabled"),
        "processes": processes,
        "temperature_c": int(temperature) if temperature is not None else None,
        "power_w": round(power_mw / 1000.0, 2) if power_mw is not None else None,
    }


def _nvml_nvlinks(nv: Any, handle: Any) -> JsonDict | None:
    """nvmlDeviceGetNvLinkState over every link NVML can name, as :func:`nvlinks_from_smi` gives
    them; a link the GPU does not have answers an error and is left out. None: no NVLink."""
    if not hasattr(nv, "nvmlDeviceGetNvLinkState"):
        return None
    active, inactive = 0, []
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        state = _nvml_call(nv, {}, "", "nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            continue
        if int(state) == getattr(nv, "NVML_FEATURE_ENABLED", 1):
            active += 1
        else:
            inactive.append(link)
    return {"active": active, "inactive": inactive} if active or inactive else None


def _nvml_fabric(nv: Any, handle: Any) -> JsonDict | None:
    """nvmlDeviceGetGpuFabricInfo, as :func:`gpu_fabric` gives it; None where the GPU or this NVML
    has no fabric probe (not a problem: most GPUs have no NVSwitch)."""
    info_type = getattr(nv, "c_nvmlGpuFabricInfo_t", None)
    if info_type is None or not hasattr(nv, "nvmlDeviceGetGpuFabricInfo"):
        return None
    info = info_type()
    try:
        if _nvml_call(nv, {}, "", "nvmlDeviceGetGpuFabricInfo", handle, ctypes.byref(info)) is None:
            return None
    except (TypeError, ValueError, ctypes.ArgumentError):  # a pynvml whose struct does not fit
        return None
    state = NVML_FABRIC_STATES.get(int(info.state))
    if state is None:
        return None
    code = int(info.status)
    status = "Success" if code == 0 else _nvml_call(nv, {}, "", "nvmlErrorString", code)
    return gpu_fabric(state, _text(status) if status is not None else f"NVML error {code}")


def nvml_snapshot(nv: Any) -> tuple[JsonDict, list[JsonDict], dict[str, str]]:
    """Driver, GPUs and per-field problems read through pynvml module ``nv``.

    Raises Unavailable when NVML cannot start. nvmlShutdown is always called after a
    successful nvmlInit.
    """
    base, _ = _nvml_error_types(nv)
    try:
        nv.nvmlInit()
    except base as exc:
        raise Unavailable(f"NVML: {exc}") from None
    try:
        problems: dict[str, str] = {}
        driver_version = _nvml_call(nv, problems, "driver", "nvmlSystemGetDriverVersion")
        cuda_code = _nvml_call(nv, problems, "driver.cuda", "nvmlSystemGetCudaDriverVersion_v2")
        driver: JsonDict = {
            "version": _text(driver_version) if driver_version is not None else None,
            "cuda": decode_cuda_version(int(cuda_code)) if cuda_code else None,
            "source": "nvml",
        }
        count = int(nv.nvmlDeviceGetCount())
        gpus = []
        for index in range(count):
            try:
                gpus.append(_nvml_gpu(nv, index, problems))
            except base as exc:
                problems[f"gpus[{index}]"] = f"NVML: {exc}"
        return driver, gpus, problems
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


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


def _smi_gpus(smi: str) -> list[JsonDict]:
    gpu_text = _run(
        [smi, "--query-gpu=" + ",".join(SMI_GPU_FIELDS), "--format=csv,noheader,nounits"],
        NVIDIA_SMI_TIMEOUT_S,
    )
    try:
        apps_text: str | None = _run(
            [
                smi,
                "--query-compute-apps=" + ",".join(SMI_APP_FIELDS),
                "--format=csv,noheader,nounits",
            ],
            NVIDIA_SMI_TIMEOUT_S,
        )
    except Unavailable:
        apps_text = None
    gpus = gpus_from_smi(gpu_text, apps_text, health=_smi_health(smi))
    if apps_text is None:
        for gpu in gpus:
            gpu["processes"] = None
    if gpus:
        try:
            links = nvlinks_from_smi(_run([smi, "nvlink", "--status"], NVIDIA_SMI_TIMEOUT_S))
        except Unavailable:
            links = {}
        for gpu in gpus:
            gpu["nvlink"] = links.get(gpu["index"]) if isinstance(gpu["index"], int) else None
    return gpus


def _smi_health(smi: str) -> list[tuple[Sequence[str], str]]:
    """The health fields this nvidia-smi knows: all groups in one query, else group by group."""

    def ask(fields: Sequence[str]) -> str:
        query = "--query-gpu=uuid," + ",".join(fields)
        return _run([smi, query, "--format=csv,noheader,nounits"], NVIDIA_SMI_TIMEOUT_S)

    every = [field for group in SMI_HEALTH_GROUPS for field in group]
    try:
        return [(every, ask(every))]
    except Unavailable:
        pass
    answered: list[tuple[Sequence[str], str]] = []
    for group in SMI_HEALTH_GROUPS:
        with contextlib.suppress(Unavailable):
            answered.append((group, ask(group)))
    return answered


def _gather_nvidia(sink: Sink) -> None:
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
            sink.facts["gpus"] = _smi_gpus(smi)
        except Unavailable as exc:
            gpu_reason = f"{exc} ({nvml_reason})"
    proc_text = _read_text(PROC_DRIVER_VERSION)
    version = parse_nvidia_driver_version(proc_text) if proc_text else None
    source = "proc"
    if version is None and smi is not None:
        try:
            out = _run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], NVIDIA_SMI_TIMEOUT_S)
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


# ---- torch


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


def _gather_torch(sink: Sink) -> None:
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        raise Unavailable(f"torch not importable: {exc}") from None
    except Exception as exc:
        raise Unavailable(f"torch not importable: {_error_text(exc)}") from None
    sink.facts["torch"] = torch_facts(torch)


# --------------------------------------------------------------------------- collect


def _gatherers() -> list[tuple[tuple[str, ...], Callable[[Sink], None]]]:
    return [
        (("hostname",), _gather_hostname),
        (("os",), _gather_os),
        (("cpu",), _gather_cpu),
        (("memory",), _gather_memory),
        (("python",), _gather_python),
        (("nccl_system", "cudnn_system"), _gather_system_libraries),
        (("driver", "gpus"), _gather_nvidia),
        (("nvcc",), _gather_nvcc),
        (("packages",), _gather_packages),
        (("env",), _gather_env),
        (("limits",), _gather_limits),
        (("shm",), _gather_shm),
        (("nccl",), _gather_nccl),
        (("time",), _gather_time),
        (("name_resolution",), _gather_name_resolution),
        (("net",), _gather_net),
        (("hardware",), _gather_hardware),
        (("sysctl",), _gather_sysctl),
        (("torch",), _gather_torch),
    ]


def collect(options: Mapping[str, Any] | None = None, skip: Iterable[str] = ()) -> JsonDict:
    """Gather every fact this node can give (but the gatherers of ``skip``); the probe's whole
    JSON document."""
    sink = Sink(options)
    for names, gather in _gatherers():
        if names[0] in skip:
            continue
        try:
            gather(sink)
        except Unavailable as exc:
            reason = str(exc)
        except (Exception, SystemExit) as exc:
            reason = f"{names[0]} gatherer failed: {_error_text(exc)}"
        else:
            continue
        for name in names:
            if name not in sink.facts and name not in sink.unavailable:
                sink.unavailable[name] = reason
    facts = scrub(sink.facts)
    facts["unavailable"] = scrub(sink.unavailable)
    return {"probe_version": PROBE_VERSION, "facts": facts}


class _StdoutToStderr:
    """Send anything written to fd 1 (Python or C code) to stderr; keep the real stdout."""

    def __enter__(self) -> int:
        if sys.stdout is not None:
            sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)
        self.python_stdout = sys.stdout
        sys.stdout = sys.stderr
        return self.saved

    def __exit__(self, *exc_info: object) -> None:
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
        finally:
            sys.stdout = self.python_stdout
            os.dup2(self.saved, 1)
            os.close(self.saved)


def _write_line(document: Any) -> None:
    # ASCII JSON (non-ASCII escaped) reads the same whatever the node's locale is.
    pending = memoryview((json.dumps(document, default=str) + "\n").encode("ascii"))
    while pending:
        pending = pending[os.write(1, pending) :]


# --------------------------------------------------------------------------- staying as a host
#
# With the option ``stay``, the probe stays after its document as a clean host for the next
# script the controller sends (the training job, which forks its ranks from here): torch is
# imported once, by this process, and what the job needs next is imported while the controller
# runs its other checks. Clean means one thread, and CUDA and NVML never touched here, so that
# a fork of this process can use them: the gatherers that start threads, NVML or CUDA run in
# forked children (the other facts beside the import of torch, then torch's own facts).


def _in_child(work: Callable[[], Any]) -> tuple[int, int]:
    """Fork a child that runs ``work`` with its stdout sent to stderr and writes the JSON of its
    result to a pipe; the child's pid and the pipe's read end."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        return pid, read_end
    try:
        os.close(read_end)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        try:
            payload = {"value": work()}
        except BaseException as exc:
            payload = {"error": _error_text(exc)}
        pending = memoryview(json.dumps(payload, default=str).encode("ascii"))
        while pending:
            pending = pending[os.write(write_end, pending) :]
        sys.stderr.flush()
    finally:
        os._exit(0)


def _from_child(child: tuple[int, int]) -> Any:
    """What a child of :func:`_in_child` returned; raises RuntimeError with its error."""
    pid, read_end = child
    chunks = []
    while True:
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    try:
        payload = json.loads(b"".join(chunks))
    except ValueError:
        raise RuntimeError(f"the probe's child ended without a result (wait status {status})") from None
    if "error" in payload:
        raise RuntimeError(payload["error"])
    return payload.get("value")


def _import_quietly(name: str) -> Any:
    """``name`` imported with what it prints sent to stderr, and out of the cyclic collector's way.

    An import as large as torch's makes objects by the hundred thousand and keeps them all; the
    collector, woken every few hundred allocations, would walk them again and again (about a
    fifth of the CPU time of importing torch and DDP's modules, torch 2.13), and every full
    collection after, here or in a child forked from here, would walk them once more. Paused
    meanwhile, then frozen: what was imported is never walked (Python's advice for a process
    that forks without exec). ``benchmarks/import_collector.py`` measures it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _StdoutToStderr():
            return importlib.import_module(name)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


# Why this host has no TMPDIR of its own, for the scripts it runs.
TMPDIR_ERROR = "PREFLIGHT_TMPDIR_ERROR"


def _private_tmpdir() -> str | None:
    """A directory of this run's own for TMPDIR (torch's caches land there), announced on stderr so
    that the controller can remove it even when this process is killed; None if none can be made."""
    # Where the job's own temporary files would go (Python would fall back to another directory
    # without saying so; a training job's other tools would not).
    where = os.environ.get("TMPDIR") or "/tmp"
    try:
        path = tempfile.mkdtemp(prefix="preflight.", dir=where)
    except OSError as exc:
        # The job cannot run without one (torch writes its caches there): its host says so.
        os.environ[TMPDIR_ERROR] = f"cannot create a temporary directory in {where}: {exc.strerror}"
        return None
    os.environ["TMPDIR"] = path
    tempfile.tempdir = None  # read TMPDIR again
    sys.stderr.write(f"preflight-tmpdir={path}\n")
    sys.stderr.flush()
    return path


def _raise_exit(number: int, frame: Any) -> None:
    raise SystemExit(128 + number)


def stay(options: Mapping[str, Any]) -> int:
    """The facts document (none with the option ``serve``), then host the scripts the controller
    sends on stdin, in this process, in a TMPDIR of its own that is removed however it ends (TERM,
    HUP, the end of stdin)."""
    others = None if options.get("serve") else _in_child(lambda: collect(options, skip=("torch",)))
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _raise_exit)
    tmpdir = _private_tmpdir()
    try:
        return _stay(options, others, lambda: _remove(tmpdir))
    finally:
        _remove(tmpdir)


def _remove(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


def _beside_torch(others: tuple[int, int]) -> tuple[JsonDict, bool]:
    """The whole document: the other facts from the child ``others`` (started before this), torch's
    own from a child forked once torch is imported here; and whether torch imported and answered."""
    torch_reason = None
    torch_child = None
    try:
        torch = _import_quietly("torch")
        torch_child = _in_child(lambda: torch_facts(torch))
    except ImportError as exc:
        torch_reason = f"torch not importable: {exc}"
    except Exception as exc:
        torch_reason = f"torch not importable: {_error_text(exc)}"
    document = _from_child(others)
    facts = document["facts"]
    if torch_child is not None:
        try:
            facts["torch"] = scrub(_from_child(torch_child))
        except RuntimeError as exc:
            torch_reason = f"torch gatherer failed: {exc}"
    if torch_reason:
        facts["unavailable"]["torch"] = scrub(torch_reason)
    return document, torch_reason is None


def _stay(options: Mapping[str, Any], others: tuple[int, int] | None, cleanup: Callable[[], None]) -> int:
    if others is None:
        return serve(cleanup)  # a bare script host: no facts
    try:
        document, torch_answered = _beside_torch(others)
    except RuntimeError as exc:
        sys.stderr.write(f"the facts gatherer failed: {exc}\n")
        return 1
    _write_line(document)
    if torch_answered:
        for name in options.get("stay", {}).get("imports", ()):
            with contextlib.suppress(Exception):
                _import_quietly(str(name))
    return serve(cleanup)


def once(options: Mapping[str, Any]) -> int:
    """The facts document, the other facts gathered while torch imports; then the process ends
    without the interpreter's teardown, which with torch loaded costs about half a second of CPU
    and delays the exit status the controller waits for."""
    try:
        document, _ = _beside_torch(_in_child(lambda: collect(options, skip=("torch",))))
    except RuntimeError as exc:
        sys.stderr.write(f"the facts gatherer failed: {exc}\n")
        return 1
    _write_line(document)
    sys.stderr.flush()
    os._exit(0)


def serve(cleanup: Callable[[], None] | None = None) -> int:
    """Run the scripts the controller sends, one after another, until stdin ends: each is a line of
    JSON (``length``: the script's bytes, ``name``, ``args``: its argv), then the script."""
    stdin = sys.stdin.buffer
    while True:
        header = stdin.readline()
        if not header.strip():
            return 0
        request = json.loads(header)
        source = stdin.read(int(request["length"]))
        sys.argv = [str(request.get("name", "preflight-script")), *map(str, request.get("args", ()))]
        # A script that ends this process itself calls __preflight_cleanup__ first.
        namespace = {"__name__": "__main__", "__preflight_source__": source, "__preflight_cleanup__": cleanup}
        exec(compile(source, sys.argv[0], "exec"), namespace)


def main(argv: Sequence[str] = ()) -> int:
    """Print the facts document as one line of JSON on stdout. ``argv`` may hold one JSON
    document of options (:class:`Sink`; ``stay``: see :func:`stay`)."""
    try:
        options = json.loads(argv[0]) if argv else {}
    except ValueError:
        options = {}
    if isinstance(options, dict) and options.get("serve"):
        return stay(options)
    if isinstance(options, dict) and options.get("stay") and hasattr(os, "fork"):
        return stay(options)
    if isinstance(options, dict) and hasattr(os, "fork"):
        return once(options)
    redirect = _StdoutToStderr()
    try:
        redirect.__enter__()
        redirected = True
    except OSError:
        redirected = False  # no usable fd 1 to swap: gather without the redirect
    try:
        document = collect(options if isinstance(options, dict) else {})
    finally:
        if redirected:
            redirect.__exit__(None, None, None)
    _write_line(document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[3:] if sys.argv[0] == "-c" else sys.argv[1:]))
