"""``[hardware]``: what the hardware audit leaves out."""

from __future__ import annotations

from dataclasses import dataclass

from preflight.settings import Settings


@dataclass(frozen=True)
class HardwareSection:
    """The hardware audit from the facts (PCIe links, InfiniBand ports, XID errors)."""

    # XID numbers never reported (known noise on this cluster).
    ignore_xids: tuple[int, ...] = ()


SETTINGS = Settings(HardwareSection)
