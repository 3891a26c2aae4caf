"""Reading a node's values without trusting them: a missing or ill-typed field reads as ``None``
(or empty), never as an exception. Shared by the typed views of :mod:`preflight.facts`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    # NVML answers "not supported" for some fields on some GPUs; the probe writes null.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def records(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
