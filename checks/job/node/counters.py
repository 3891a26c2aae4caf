"""The fabric's error counters around the job: the node's host reads every InfiniBand/RoCE/EFA
port's counters and every interface's error and drop counters before it starts the ranks and after they
end, and writes both samples on one marked line of stderr; the controller reads them back from it.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

from checks.job.node.markers import log, marked_lines
from preflight.node.sysfs_counters import (
    SYS_CLASS_INFINIBAND,
    SYS_CLASS_NET,
    efa_counters,
    interface_counters,
    is_efa,
    listing,
    port_counters,
)

if TYPE_CHECKING:
    JsonDict = dict[str, Any]

# Port counters under /sys/class/infiniband/DEV/ports/N/counters, read where present.
IB_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "port_rcv_errors",
    "port_xmit_discards",
    "port_xmit_wait",
    "link_downed",
    "port_rcv_remote_physical_errors",
)
# Interface counters under /sys/class/net/NAME/statistics.
NET_COUNTERS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped")
# The line the node's host writes when its ranks have ended: {"before": ..., "after": ...}.
COUNTERS_MARKER = "PREFLIGHT-JOB-COUNTERS "
_COUNTERS_LINE_RE = re.compile(rb"^[^\n]*" + re.escape(COUNTERS_MARKER.encode()) + rb"[^\n]*\n", re.MULTILINE)


def _text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def ib_ports(ib_root: str = SYS_CLASS_INFINIBAND) -> JsonDict:
    """Each InfiniBand port's counters by ``DEV/PORT`` (an EFA port's error ``hw_counters``), with
    the port's link layer."""
    ib: JsonDict = {}
    for device in listing(ib_root):
        device_dir = os.path.join(ib_root, device)
        efa = is_efa(device_dir)
        ports_dir = os.path.join(device_dir, "ports")
        for port in listing(ports_dir):
            base = os.path.join(ports_dir, port)
            counters = efa_counters(device_dir, base) if efa else port_counters(base, IB_COUNTERS)
            if counters:
                ib[device + "/" + port] = {
                    "link_layer": _text(os.path.join(base, "link_layer")),
                    "counters": counters,
                }
    return ib


def sample(ib_root: str = SYS_CLASS_INFINIBAND, net_root: str = SYS_CLASS_NET) -> JsonDict:
    """The counters now: ``ib`` by ``DEV/PORT`` (with the port's link layer), ``net`` by interface
    (``lo`` left out), and ``t``, a monotonic clock in seconds."""
    return {"t": time.monotonic(), "ib": ib_ports(ib_root), "net": interface_counters(NET_COUNTERS, net_root)}


def report(before: JsonDict, after: JsonDict) -> None:
    """The two samples on one marked line of stderr."""
    log(COUNTERS_MARKER, {"before": before, "after": after})


def read_samples(stderr: str) -> JsonDict | None:
    """The samples a node's host wrote (``before`` and ``after``), None where it wrote none (it was
    killed, or an older host ran the job)."""
    found = [s for s in marked_lines(stderr, COUNTERS_MARKER) if isinstance(s.get("before"), dict)]
    return found[-1] if found and isinstance(found[-1].get("after"), dict) else None


def without_samples(stderr: bytes) -> bytes:
    """``stderr`` without the samples' line (the report keeps the samples, parsed)."""
    return _COUNTERS_LINE_RE.sub(b"", stderr)
