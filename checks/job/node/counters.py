"""The fabric's error counters around the job: the node's host reads every InfiniBand/RoCE port's
counters and every interface's error and drop counters before it starts the ranks and after they
end, and writes both samples on one marked line of stderr; the controller reads them back from it.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

from checks.job.node.markers import log, marked_lines

if TYPE_CHECKING:
    JsonDict = dict[str, Any]

SYS_CLASS_INFINIBAND = "/sys/class/infiniband"
SYS_CLASS_NET = "/sys/class/net"
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


def _number(path: str) -> int | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None  # missing, unreadable, or "N/A (no PMA)"


def _text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _listing(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def ib_ports(ib_root: str = SYS_CLASS_INFINIBAND) -> JsonDict:
    """Each InfiniBand port's counters by ``DEV/PORT``, with the port's link layer."""
    ib: JsonDict = {}
    for device in _listing(ib_root):
        ports_dir = os.path.join(ib_root, device, "ports")
        for port in _listing(ports_dir):
            base = os.path.join(ports_dir, port)
            values = {name: _number(os.path.join(base, "counters", name)) for name in IB_COUNTERS}
            counters = {k: v for k, v in values.items() if v is not None}
            if counters:
                layer = _text(os.path.join(base, "link_layer"))
                ib[device + "/" + port] = {"link_layer": layer, "counters": counters}
    return ib


def sample(ib_root: str = SYS_CLASS_INFINIBAND, net_root: str = SYS_CLASS_NET) -> JsonDict:
    """The counters now: ``ib`` by ``DEV/PORT`` (with the port's link layer), ``net`` by interface
    (``lo`` left out), and ``t``, a monotonic clock in seconds."""
    ib = ib_ports(ib_root)
    net: JsonDict = {}
    for name in _listing(net_root):
        if name == "lo":
            continue
        stats = os.path.join(net_root, name, "statistics")
        values = {counter: _number(os.path.join(stats, counter)) for counter in NET_COUNTERS}
        counters = {k: v for k, v in values.items() if v is not None}
        if counters:
            net[name] = counters
    return {"t": time.monotonic(), "ib": ib, "net": net}


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
