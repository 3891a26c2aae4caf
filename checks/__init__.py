"""The checks preflight runs, in the order it runs them. ``CHECKS`` is the registry."""

from __future__ import annotations

from checks import connect, gpu_memory, versions

__all__ = ["CHECKS", "connect", "gpu_memory", "versions"]
from preflight.check import Check

CHECKS: tuple[Check, ...] = (connect.CHECK, versions.CHECK, gpu_memory.CHECK)
