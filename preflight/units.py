"""Numbers as reports write them: sizes in binary units, rates, ratios, durations."""

from __future__ import annotations

import math
import re

GIB = 1 << 30


def binary_size(size_bytes: float) -> str:
    """Binary units, as message and memory sizes are powers of two: ``512 B``, ``1.5 KiB``,
    ``64 MiB``, ``80 GiB``."""
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def capacity(size_bytes: float) -> str:
    """A capacity (free space, a filesystem's or a limit's size) to three significant digits in
    binary units: ``512 B``, ``23.5 GiB``, ``1.2 TiB``."""
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{significant(value)} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def gib(size_bytes: float) -> str:
    """A memory amount in GiB with one decimal, without the unit: ``79.6``."""
    return f"{size_bytes / GIB:.1f}"


def significant(value: float) -> str:
    """Up to three significant figures, no exponent: ``0.0123``, ``4.5``, ``1230``."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    digits = max(2, 2 - math.floor(math.log10(magnitude)))
    return f"{value:.{digits}f}".rstrip("0").rstrip(".")


def gbps(value: float) -> str:
    """A bandwidth in GB/s to three significant digits: ``1.92``, ``0.0213``, ``372``."""
    return f"{value:.3g}"


def ratio(value: float) -> str:
    """``0.1x``, ``0.0067x``."""
    return f"{value:.2g}x"


def duration(seconds: float) -> str:
    """``4.2 s``, ``3 min 5 s``, ``2 h 10 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-z]*)\s*$")
# Binary where the unit says so (KiB) or is a bare letter (G, as df, ulimit and docker --shm-size
# read it); decimal where the unit says B after a prefix (GB, as disk vendors write it).
_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    **{p: 1 << (10 * i) for i, p in enumerate("kmgtp", start=1)},
    **{f"{p}ib": 1 << (10 * i) for i, p in enumerate("kmgtp", start=1)},
    **{f"{p}i": 1 << (10 * i) for i, p in enumerate("kmgtp", start=1)},
    **{f"{p}b": 1000**i for i, p in enumerate("kmgtp", start=1)},
}


def parse_size(text: str) -> int:
    """``"140 GiB"``, ``"1.5T"``, ``"500GB"``, ``"4096"`` -> bytes. Raises ValueError with a
    message a person can act on."""
    found = _SIZE_RE.match(text)
    unit = found.group(2).lower() if found else ""
    if found is None or unit not in _SIZE_UNITS:
        raise ValueError(f"{text!r} is not a size (examples: 140GiB, 1.5T, 500GB, 4096)")
    return int(float(found.group(1)) * _SIZE_UNITS[unit])
