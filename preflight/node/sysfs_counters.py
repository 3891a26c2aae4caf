"""The counters the kernel keeps in sysfs, read one way for the facts and for the job: an
InfiniBand port's (``/sys/class/infiniband/DEV/ports/N/counters``) and each network interface's
(``/sys/class/net/NAME/statistics``). A counter missing or unreadable ("N/A (no PMA)") is left out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

SYS_CLASS_INFINIBAND = "/sys/class/infiniband"
SYS_CLASS_NET = "/sys/class/net"


def read_number(path: str) -> int | None:
    """The integer a sysfs file holds; None where it is missing, unreadable or not a number."""
    try:
        with open(path, encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def listing(path: str) -> list[str]:
    """A directory's entries in order; none where it cannot be read."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def port_counters(port_dir: str, names: Iterable[str]) -> dict[str, int]:
    """The ``names`` counters of one InfiniBand port (its ``ports/N`` directory) that it has."""
    values = {name: read_number(os.path.join(port_dir, "counters", name)) for name in names}
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
