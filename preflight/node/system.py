"""The node's system facts: host name, what identifies the machine and what its firmware says it is,
OS, CPU and its frequency governors, memory, swap and transparent huge pages, kernel settings,
resource limits, shared memory, and whether a time service keeps the clock synchronised.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import re
import resource
import socket
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Sink, Unavailable, read_text

if TYPE_CHECKING:
    from collections.abc import Iterable

    JsonDict = dict[str, Any]


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


def gather_hostname(sink: Sink) -> None:
    sink.facts["hostname"] = socket.gethostname()


MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
DMI = "/sys/class/dmi/id/"


def machine_id_digest(text: str | None) -> str | None:
    """The machine ID as a digest: the ID itself is meant to stay on the machine (machine-id(5)),
    and a digest under preflight's own name identifies the machine as well."""
    value = (text or "").strip().lower()
    if not value or value == "uninitialized":
        return None
    return hashlib.sha256(("preflight:" + value).encode()).hexdigest()[:32]


def gather_identity(sink: Sink) -> None:
    """What identifies the machine, where this user may read it: the machine ID (as a digest) and
    the DMI product and board serials (readable by root only on most systems). The controller
    decides the node's identity from these and the host name (:mod:`preflight.identity`)."""
    found: JsonDict = {"machine_id": None}
    for path in MACHINE_ID_FILES:
        found["machine_id"] = machine_id_digest(read_text(path))
        if found["machine_id"]:
            break
    for name in ("product_serial", "board_serial"):
        text = read_text(DMI + name)
        found[name] = (text or "").strip() or None
    sink.facts["identity"] = found


# What the firmware says the machine is, readable without root (never the serials).
DMI_FIELDS = (
    "bios_vendor",
    "bios_version",
    "bios_date",
    "board_vendor",
    "board_name",
    "sys_vendor",
    "product_name",
)


def dmi_facts(root: str = DMI) -> dict[str, str | None]:
    """The fields of ``/sys/class/dmi/id`` that can be read (an empty one as None)."""
    found: dict[str, str | None] = {}
    for name in DMI_FIELDS:
        text = read_text(os.path.join(root, name))
        if text is not None:
            found[name] = text.strip() or None
    return found


def gather_dmi(sink: Sink) -> None:
    found = dmi_facts(DMI)
    if not found:
        raise Unavailable(f"{DMI} not readable")
    sink.facts["dmi"] = found


def gather_os(sink: Sink) -> None:
    uname = os.uname()  # not platform.uname(): on 3.8 that runs `uname -p` in a subprocess
    text = read_text("/etc/os-release") or read_text("/usr/lib/os-release")
    release = parse_os_release(text) if text else {}
    sink.facts["os"] = {
        "name": release.get("PRETTY_NAME") or release.get("NAME") or None,
        "kernel": uname.release or None,
        "machine": uname.machine or None,
    }


SYS_CPU = "/sys/devices/system/cpu"


def cpu_governors(texts: Iterable[str]) -> str | None:
    """The CPUs' governors: the one they agree on, else each once ("performance,powersave")."""
    return ",".join(sorted({t.strip() for t in texts if t.strip()})) or None


def cpufreq_facts(root: str = SYS_CPU) -> JsonDict:
    """The governors in use and cpu0's cpufreq driver; none without cpufreq (most VMs)."""
    paths = glob.glob(os.path.join(root, "cpu[0-9]*", "cpufreq", "scaling_governor"))
    governor = cpu_governors(text for text in map(read_text, paths) if text is not None)
    driver = (read_text(os.path.join(root, "cpu0", "cpufreq", "scaling_driver")) or "").strip()
    found: JsonDict = {}
    if governor:
        found["governor"] = governor
    if driver:
        found["cpufreq_driver"] = driver
    return found


def gather_cpu(sink: Sink) -> None:
    text = read_text("/proc/cpuinfo")
    sink.facts["cpu"] = {
        "count": os.cpu_count(),
        "model": parse_cpuinfo_model(text) if text else None,
        **cpufreq_facts(),
    }


THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


def bracketed_choice(text: str | None) -> str | None:
    """``always [madvise] never`` -> "madvise"."""
    found = re.search(r"\[([^\]\s]+)\]", text or "")
    return found.group(1) if found else None


def gather_memory(sink: Sink) -> None:
    text = read_text("/proc/meminfo")
    if text is None:
        raise Unavailable("/proc/meminfo not readable")
    info = parse_meminfo(text)
    if "MemTotal" not in info:
        raise Unavailable("/proc/meminfo has no MemTotal")
    sink.facts["memory"] = {
        "total_bytes": info["MemTotal"],
        "available_bytes": info.get("MemAvailable"),
        "swap_total_bytes": info.get("SwapTotal"),
        "swap_free_bytes": info.get("SwapFree"),
        "transparent_hugepage": bracketed_choice(read_text(THP_ENABLED)),
    }


SYS_CLASS_NVME = "/sys/class/nvme"


def nvme_controllers(root: str = SYS_CLASS_NVME) -> list[JsonDict]:
    """The node's NVMe controllers (``/sys/class/nvme/nvmeN``): name, model, state ("live") and
    transport ("pcie"; "tcp", "rdma" or "fc" for a remote one), in name order."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []

    def field(name: str, key: str) -> str | None:
        text = read_text(os.path.join(root, name, key))
        return (text.strip() or None) if text is not None else None

    return [
        {
            "name": name,
            "model": field(name, "model"),
            "state": field(name, "state"),
            "transport": field(name, "transport"),
        }
        for name in names
        if re.fullmatch(r"nvme\d+", name)
    ]


def gather_nvme(sink: Sink) -> None:
    sink.facts["nvme"] = nvme_controllers()


# Kernel settings a multi-node job depends on. gc_thresh3 caps the neighbour (ARP) table:
# a node that talks to more peers on its own subnet than this has some of them refused.
SYSCTLS = (
    "net.ipv4.neigh.default.gc_thresh3",
    "net.core.somaxconn",
    "net.ipv4.ip_local_port_range",
    # Compared between like nodes: automatic NUMA balancing and zone reclaim move a job's pages
    # under it; the socket buffers bound what TCP (gloo, NCCL's sockets) can keep in flight.
    "kernel.numa_balancing",
    "vm.zone_reclaim_mode",
    "net.core.rmem_max",
    "net.core.wmem_max",
)
# Kernel modules a GPU job's paths need that a node loads as it boots (the driver, GPUDirect RDMA and
# Storage, the RDMA stack), and nouveau, which keeps the NVIDIA driver off the GPUs: each "loaded"
# or "not loaded". Modules loaded on first use (nvidia_uvm by the first CUDA program, rdma_ucm by
# the first RDMA CM user) say how long since boot, not how a node is set up: not read.
KERNEL_MODULES = (
    "nvidia",
    "nvidia_peermem",
    "nv_peer_mem",
    "nvidia_fs",
    "gdrdrv",
    "ib_core",
    "ib_uverbs",
    "mlx5_ib",
    "efa",
    "nouveau",
)


def parse_modules(text: str) -> set[str]:
    """The names of the modules ``/proc/modules`` lists as loaded."""
    return {line.split()[0] for line in text.splitlines() if line.strip()}


def gather_kernel_modules(sink: Sink) -> None:
    text = read_text("/proc/modules")
    if text is None:
        raise Unavailable("/proc/modules not readable")
    loaded = parse_modules(text)
    sink.facts["kernel_modules"] = {m: "loaded" if m in loaded else "not loaded" for m in KERNEL_MODULES}


def gather_sysctl(sink: Sink) -> None:
    found: dict[str, Any] = {}
    for name in SYSCTLS:
        text = read_text("/proc/sys/" + name.replace(".", "/"))
        if text is not None:
            words = text.split()
            found[name] = int(words[0]) if len(words) == 1 and words[0].isdigit() else " ".join(words)
    if not found:
        raise Unavailable("/proc/sys not readable")
    sink.facts["sysctl"] = found


def limit_value(value: int) -> int | str:
    """A resource limit as reported: a number, or "unlimited"."""
    return "unlimited" if value == resource.RLIM_INFINITY or value < 0 else int(value)


def gather_limits(sink: Sink) -> None:
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


def gather_shm(sink: Sink) -> None:
    try:
        stat = os.statvfs(SHM_PATH)
    except OSError as exc:
        raise Unavailable(f"{SHM_PATH}: {exc.strerror}") from None
    sink.facts["shm"] = {
        "path": SHM_PATH,
        "size_bytes": stat.f_blocks * stat.f_frsize,
        "free_bytes": stat.f_bavail * stat.f_frsize,
    }


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
            text = read_text(f"/proc/{entry}/comm")
            if text:
                names.append(text.strip())
    return names


def gather_time(sink: Sink) -> None:
    state = _kernel_clock_state()
    sink.facts["time"] = {
        "synchronised": None if state is None else state != TIME_ERROR,
        "state": None if state is None else CLOCK_STATES.get(state, "unsynchronised"),
        "services": time_services(_process_names()),
    }
