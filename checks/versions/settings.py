"""``[versions]``: which version differences fail a run and which only warn."""

from __future__ import annotations

from dataclasses import dataclass

from preflight.config import DriftPolicy
from preflight.settings import Settings


@dataclass(frozen=True)
class VersionsSection:
    """Which version differences fail a run and which only warn."""

    # Packages whose drift fails the run, on top of the built-in training stack
    # (torch and NVIDIA's CUDA, cuDNN and NCCL wheels).
    stack_packages: tuple[str, ...] = ()
    # What drift in any other package does.
    package_drift: DriftPolicy = "warn"
    ignore_packages: tuple[str, ...] = ()


SETTINGS = Settings(VersionsSection)
