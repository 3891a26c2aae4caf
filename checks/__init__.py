"""The checks preflight runs, in the order it runs them. ``CHECKS`` is the registry."""

from __future__ import annotations

from checks import connect, gpu_memory, ports, versions
from preflight.check import Check

__all__ = ["CHECKS"]

CHECKS: tuple[Check, ...] = (connect.CHECK, versions.CHECK, gpu_memory.CHECK, ports.CHECK)
