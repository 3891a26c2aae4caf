"""The checks preflight runs, in the order it runs them. ``CHECKS`` is the registry."""

from __future__ import annotations

from checks import baseline, connect, gpu_memory, ports, versions
from preflight.check import Check

__all__ = ["CHECKS"]

CHECKS: tuple[Check, ...] = (
    connect.CHECK,
    versions.CHECK,
    gpu_memory.CHECK,
    ports.CHECK,
    # Compares what the checks above found with a previous run: it comes last.
    baseline.CHECK,
)
