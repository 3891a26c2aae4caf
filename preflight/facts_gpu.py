"""The typed view of one GPU as a node reported it (nvidia-smi or NVML through the facts probe), of a
PCIe link, and of the readings a tool answered with an error on a GPU, a port or a PCI device: part
of :mod:`preflight.facts`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from preflight.facts_values import _float, _int, _map, _str, records

# What a GPU record holds that names the GPU rather than reads it (a driver may still know these of
# a GPU that answers nothing else), its processes (nvidia-smi lists them in a query of their own),
# and the errors themselves.
GPU_IDENTITY = frozenset(("index", "name", "uuid", "serial", "pci_bus_id", "processes", "errors"))


def reading_errors(raw: Mapping[str, Any]) -> dict[str, str]:
    """What a tool answered with an error instead of a reading, by the record's key, in the tool's
    words (``{"temperature_c": "GPU is lost"}``, ``{"counters/symbol_error": "Input/output
    error"}``): the ``errors`` the probe wrote on a GPU, an InfiniBand port or a PCI device; empty
    where none. "Not Supported" and "N/A" are no error: the probe leaves them out. ``handle``: the
    GPU could not be opened at all."""
    found = raw.get("errors")
    if not isinstance(found, Mapping):
        return {}
    return {str(key): words for key, words in found.items() if isinstance(words, str) and words}


@dataclass(frozen=True)
class PcieLink:
    """A PCIe link as the device trained it (current) and as it could (max): generation and lanes."""

    gen_current: int | None
    gen_max: int | None
    width_current: int | None
    width_max: int | None

    @staticmethod
    def read(value: Any) -> PcieLink | None:
        found = _map(value)
        if not found:
            return None
        return PcieLink(
            _int(found.get("gen_current")),
            _int(found.get("gen_max")),
            _int(found.get("width_current")),
            _int(found.get("width_max")),
        )

    @property
    def narrow(self) -> bool:
        """Fewer lanes than the device can use: a reseat, a riser or a slot problem."""
        current, top = self.width_current, self.width_max
        return current is not None and top is not None and current < top

    def text(self) -> str:
        def part(current: int | None, top: int | None, prefix: str) -> str:
            shown = ["?" if v is None else str(v) for v in (current, top)]
            return f"{prefix}{shown[0]} of {prefix}{shown[1]}"

        return (
            f"{part(self.width_current, self.width_max, 'x')}, {part(self.gen_current, self.gen_max, 'Gen')}"
        )


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as NVML or nvidia-smi described it."""

    raw: Mapping[str, Any]

    @property
    def index(self) -> int | None:
        return _int(self.raw.get("index"))

    @property
    def name(self) -> str | None:
        return _str(self.raw.get("name"))

    @property
    def uuid(self) -> str | None:
        return _str(self.raw.get("uuid"))

    @property
    def memory_total_bytes(self) -> int | None:
        return _int(self.raw.get("memory_total_bytes"))

    @property
    def memory_used_bytes(self) -> int | None:
        return _int(self.raw.get("memory_used_bytes"))

    @property
    def memory_free_bytes(self) -> int | None:
        return _int(self.raw.get("memory_free_bytes"))

    @property
    def fabric_state(self) -> str | None:
        """Registration with the NVSwitch fabric: not_started, in_progress, completed; None where the
        GPU has no such fabric or its driver does not say."""
        return _str(_map(self.raw.get("fabric")).get("state"))

    @property
    def fabric_status(self) -> str | None:
        """The error of a completed fabric registration, or "Success"."""
        return _str(_map(self.raw.get("fabric")).get("status"))

    @property
    def nvlinks_up(self) -> int | None:
        """How many of its NVLinks are up; None where it has none or the node did not say."""
        return _int(_map(self.raw.get("nvlink")).get("active"))

    @property
    def nvlinks_all_inactive(self) -> bool:
        """Its driver says every NVLink is inactive, without listing them."""
        return _map(self.raw.get("nvlink")).get("all_inactive") is True

    @property
    def nvlinks_inactive(self) -> list[int]:
        """The NVLinks (by number) that its driver lists as inactive."""
        found = _map(self.raw.get("nvlink")).get("inactive")
        return (
            [n for n in found if isinstance(n, int) and not isinstance(n, bool)]
            if isinstance(found, list)
            else []
        )

    @property
    def unregistered(self) -> bool:
        """Not (yet) registered with its NVSwitch fabric: CUDA cannot start on this GPU
        (cudaErrorSystemNotReady) until the fabric manager has registered it."""
        return self.fabric_state in ("not_started", "in_progress")

    @property
    def ecc_mode(self) -> str | None:
        return _str(self.raw.get("ecc_mode"))

    @property
    def ecc_uncorrected_volatile(self) -> int | None:
        return _int(self.raw.get("ecc_uncorrected_volatile"))

    @property
    def ecc_uncorrected_aggregate(self) -> int | None:
        return _int(self.raw.get("ecc_uncorrected_aggregate"))

    @property
    def remapped_rows(self) -> Mapping[str, Any]:
        return _map(self.raw.get("remapped_rows"))

    @property
    def mig_mode(self) -> str | None:
        """ "enabled" | "disabled"; None where MIG is not supported (before Ampere) or not reported."""
        return _str(self.raw.get("mig_mode"))

    @property
    def retired_pages_pending(self) -> bool | None:
        value = self.raw.get("retired_pages_pending")
        return value if isinstance(value, bool) else None

    @property
    def processes(self) -> list[Mapping[str, Any]] | None:
        """Processes on the GPU; None where the node could not say (not the same as none)."""
        value = self.raw.get("processes")
        return records(value) if isinstance(value, list) else None

    @property
    def temperature_c(self) -> float | None:
        return _float(self.raw.get("temperature_c"))

    @property
    def power_w(self) -> float | None:
        return _float(self.raw.get("power_w"))

    @property
    def serial(self) -> str | None:
        return _str(self.raw.get("serial"))

    @property
    def pcie_link(self) -> PcieLink | None:
        return PcieLink.read(self.raw.get("pcie_link"))

    @property
    def persistence_mode(self) -> str | None:
        """ "enabled" | "disabled"; None where not reported."""
        return _str(self.raw.get("persistence_mode"))

    @property
    def clock_event_reasons(self) -> int | None:
        """NVML's clock-event (throttle) reason bits at the time of the probe."""
        return _int(self.raw.get("clock_event_reasons"))

    @property
    def power_limit_w(self) -> float | None:
        """The power limit the GPU enforces now (watts)."""
        return _float(self.raw.get("power_limit_w"))

    @property
    def power_default_limit_w(self) -> float | None:
        """The power limit the GPU enforces by default (watts)."""
        return _float(self.raw.get("power_default_limit_w"))

    @property
    def applications_clocks(self) -> Mapping[str, int]:
        """Applications clocks (MHz) by domain ("graphics", "memory"); empty where not reported."""
        return {k: v for k, v in _map(self.raw.get("clocks_applications_mhz")).items() if _int(v) is not None}

    @property
    def default_applications_clocks(self) -> Mapping[str, int]:
        """The GPU's default applications clocks (MHz) by domain; empty where not reported."""
        found = _map(self.raw.get("clocks_default_applications_mhz"))
        return {k: v for k, v in found.items() if _int(v) is not None}

    @property
    def ecc_mode_pending(self) -> str | None:
        """The ECC mode the GPU takes at its next reboot: "enabled" | "disabled"."""
        return _str(self.raw.get("ecc_mode_pending"))

    @property
    def mig_mode_pending(self) -> str | None:
        """The MIG mode the GPU takes at its next reset: "enabled" | "disabled"."""
        return _str(self.raw.get("mig_mode_pending"))

    @property
    def compute_mode(self) -> str | None:
        """ "default", "exclusive_process", "exclusive_thread" or "prohibited"."""
        return _str(self.raw.get("compute_mode"))

    @property
    def link_errors(self) -> dict[str, int]:
        """Its PCIe replays and NVLink error counts since the driver loaded, those NVML or
        nvidia-smi gave (``pcie_replays``, ``nvlink_crc_flit``, ``nvlink_crc_data``,
        ``nvlink_replay``, ``nvlink_recovery``)."""
        counts = self.raw.get("link_errors")
        if not isinstance(counts, dict):
            return {}
        return {str(k): v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)}

    @property
    def vbios_version(self) -> str | None:
        """The VBIOS version it runs ("96.00.A5.00.01"); None where the node did not say."""
        return _str(self.raw.get("vbios_version"))

    @property
    def inforom_image(self) -> str | None:
        """Its InfoROM image version ("G520.0200.00.05"); None where the node did not say."""
        return _str(self.raw.get("inforom_image"))

    @property
    def errors(self) -> dict[str, str]:
        """Its readings that the tool answered with an error, by fact (:func:`reading_errors`)."""
        return reading_errors(self.raw)

    @property
    def unreadable(self) -> bool:
        """Nothing of it could be read: it could not be opened (``handle``), or it answered errors
        and no reading at all (but what names it, :data:`GPU_IDENTITY`): a GPU that fell off the
        bus, or one that waits for a reset."""
        errors = self.errors
        if not errors:
            return False
        return "handle" in errors or all(
            value is None or value in ([], {}) for key, value in self.raw.items() if key not in GPU_IDENTITY
        )

    @property
    def inforom_valid(self) -> bool | None:
        """False where NVML found its InfoROM corrupted, True where valid; None where not checked
        (nvidia-smi's path, a GPU or driver that cannot say)."""
        value = self.raw.get("inforom_valid")
        return value if isinstance(value, bool) else None
