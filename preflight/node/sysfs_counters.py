"""The counters the kernel keeps in sysfs, read one way for the facts and for the job: an
InfiniBand port's (``/sys/class/infiniband/DEV/ports/N/counters``), an AWS EFA port's error
counters (its ``hw_counters``) and each network interface's (``/sys/class/net/NAME/statistics``).
A counter missing or unreadable ("N/A (no PMA)") is left out; an I/O error is noted.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable

SYS_CLASS_INFINIBAND = "/sys/class/infiniband"
SYS_CLASS_NET = "/sys/class/net"

# An AWS EFA device's error counters (the efa driver's efa_verbs.c, EFA_DEFINE_PORT_STATS and
# EFA_DEFINE_DEVICE_STATS): an EFA port has no InfiniBand ``counters`` directory, but
# ``ports/N/hw_counters/`` (read from the device with admin commands) and the device's own
# ``hw_counters/`` (the driver's counts of admin commands). Only the error counters are read: the
# byte, packet and work-request counts, the keep-alives and the verbs' own errors (a process's
# failed create_qp or reg_mr, its own resource limits) are left out.
EFA_PORT_COUNTERS = ("rx_drops", "rdma_read_wr_err", "rdma_write_wr_err", "retrans_pkts",
                     "retrans_timeout_events", "unresponsive_remote_events",
                     "impaired_remote_conn_events")  # fmt: skip
# Device-level since the driver split its statistics (older drivers list them under the port).
EFA_DEVICE_COUNTERS = ("cmds_err", "no_completion_cmds")


def read_sysfs(path: str, errors: dict[str, str] | None = None, field: str = "") -> str | None:
    """A sysfs file's text; None where it cannot be read. An I/O error (EIO: the device did not
    answer) is noted in ``errors`` under ``field`` ("Input/output error")."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError as exc:
        if errors is not None and exc.errno == errno.EIO:
            errors[field] = exc.strerror or os.strerror(errno.EIO)
        return None


def read_number(path: str, errors: dict[str, str] | None = None, field: str = "") -> int | None:
    """The integer a sysfs file holds; None where it is missing, unreadable or not a number."""
    text = read_sysfs(path, errors, field)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def listing(path: str) -> list[str]:
    """A directory's entries in order; none where it cannot be read."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def port_counters(
    port_dir: str, names: Iterable[str], errors: dict[str, str] | None = None
) -> dict[str, int]:
    """The ``names`` counters of one InfiniBand port (its ``ports/N`` directory) that it has; I/O
    errors in ``errors`` by file (``counters/symbol_error``)."""
    values = {
        name: read_number(os.path.join(port_dir, "counters", name), errors, "counters/" + name)
        for name in names
    }
    return {name: value for name, value in values.items() if value is not None}


def interface_counters(names: Iterable[str], net_root: str = SYS_CLASS_NET) -> dict[str, dict[str, int]]:
    """The ``names`` statistics of each network interface but the loopback, by interface; an
    interface with none of them is left out."""
    wanted = tuple(names)
    found: dict[str, dict[str, int]] = {}
    for interface in listing(net_root):
        if interface == "lo":
            continue
        stats = os.path.join(net_root, interface, "statistics")
        values = {name: read_number(os.path.join(stats, name)) for name in wanted}
        counters = {name: value for name, value in values.items() if value is not None}
        if counters:
            found[interface] = counters
    return found


def is_efa(device_dir: str) -> bool:
    """Whether an RDMA device is an AWS EFA device: its driver (the ``device/driver`` link) is
    ``efa``, or, where the link cannot be read, its kernel name is ``efa_N``."""
    driver = os.path.join(device_dir, "device", "driver")
    if os.path.islink(driver):
        return os.path.basename(os.readlink(driver)) == "efa"
    return re.fullmatch(r"efa_\d+", os.path.basename(device_dir)) is not None


def efa_counters(device_dir: str, port_dir: str, errors: dict[str, str] | None = None) -> dict[str, int]:
    """An EFA port's error counters of :data:`EFA_PORT_COUNTERS` from its ``hw_counters``, with the
    device's :data:`EFA_DEVICE_COUNTERS` from the device's (or, on older drivers, the port's)
    ``hw_counters``; a counter the driver does not have is left out, an I/O error in ``errors``."""
    found: dict[str, int] = {}
    port_stats = os.path.join(port_dir, "hw_counters")
    for name in EFA_PORT_COUNTERS:
        value = read_number(os.path.join(port_stats, name), errors, "hw_counters/" + name)
        if value is not None:
            found[name] = value
    for name in EFA_DEVICE_COUNTERS:
        value = read_number(os.path.join(device_dir, "hw_counters", name), errors, "hw_counters/" + name)
        value = read_number(os.path.join(port_stats, name)) if value is None else value
        if value is not None:
            found[name] = value
    return found
