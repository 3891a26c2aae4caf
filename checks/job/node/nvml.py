"""What a GPU says through NVML while the compute burn runs: its identity, SM clock, clock-event
(throttle) reasons, temperature and power, sampled on a thread; pynvml where the node has it. The
judges read the reason bits' names from this table too.
"""

from __future__ import annotations

import os
import statistics
import threading
from typing import Any

from preflight.node.shared import text_of

# NVML's clock-event ("throttle") reason bits, nvml.h: nvmlClocksEventReason*.
REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}
# How often the sampler asks NVML while the burn runs.
SAMPLE_PERIOD_S = 0.1


def reason_names(mask: int) -> list[str]:
    """The names of the reason bits set in ``mask``, in bit order (unknown bits as hex)."""
    names = [name for bit, name in sorted(REASON_BITS.items()) if mask & bit]
    unknown = mask & ~sum(REASON_BITS)
    if unknown:
        names.append(f"0x{unknown:x}")
    return names


def summarise_samples(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """What NVML said during the burn, from its samples: SM clock (min/median/max), the share of
    samples in which each reason was active, the hottest temperature and the highest power."""
    summary: dict[str, Any] = {"samples": len(samples)}
    clocks = [s["sm_clock_mhz"] for s in samples if isinstance(s.get("sm_clock_mhz"), (int, float))]
    if clocks:
        summary["sm_clock_mhz"] = {
            "min": min(clocks),
            "median": float(statistics.median(clocks)),
            "max": max(clocks),
        }
    masks = [int(s["reasons"]) for s in samples if isinstance(s.get("reasons"), int)]
    if masks:
        counts: dict[str, int] = {}
        for mask in masks:
            for name in reason_names(mask):
                counts[name] = counts.get(name, 0) + 1
        summary["reason_share"] = {name: count / len(masks) for name, count in sorted(counts.items())}
    temperatures = [s["temperature_c"] for s in samples if isinstance(s.get("temperature_c"), (int, float))]
    if temperatures:
        summary["temperature_c_max"] = max(temperatures)
    powers = [s["power_w"] for s in samples if isinstance(s.get("power_w"), (int, float))]
    if powers:
        summary["power_w_max"] = max(powers)
    return summary


# --------------------------------------------------------------------------- NVML, best effort


def _call(function: Any, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception:
        return None


def _text(value: Any) -> str | None:
    return None if value is None else text_of(value)


class NvmlSampler:
    """Samples one GPU through NVML on a thread while the burn runs. Never raises: a node without
    pynvml or NVML says why in ``unavailable``."""

    def __init__(self, torch: Any, device_index: int) -> None:
        self.unavailable: str | None = None
        self.identity: dict[str, Any] = {}
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handle: Any = None
        try:
            import pynvml  # type: ignore[import-not-found,unused-ignore]

            pynvml.nvmlInit()
        except Exception as exc:
            self.unavailable = f"NVML not available: {type(exc).__name__}: {exc}".strip()
            return
        self._nvml = pynvml
        self._handle = self._find_handle(torch, device_index)
        if self._handle is None:
            self.unavailable = "NVML does not know this rank's GPU"
            return
        nv, handle = pynvml, self._handle
        power_limit = _call(nv.nvmlDeviceGetEnforcedPowerLimit, handle)
        self.identity = {
            "index": _call(nv.nvmlDeviceGetIndex, handle),
            "serial": _text(_call(nv.nvmlDeviceGetSerial, handle)),
            "uuid": _text(_call(nv.nvmlDeviceGetUUID, handle)),
            "pci_bus_id": _text(getattr(_call(nv.nvmlDeviceGetPciInfo, handle), "busId", None)),
            "max_sm_clock_mhz": _call(nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_SM),
            "power_limit_w": power_limit / 1000.0 if isinstance(power_limit, (int, float)) else None,
        }

    def _find_handle(self, torch: Any, device_index: int) -> Any:
        """The NVML handle of CUDA device ``device_index``: by UUID (CUDA and NVML number GPUs
        differently under CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER), else by index when no
        renumbering is in effect."""
        nv = self._nvml
        props = _call(torch.cuda.get_device_properties, device_index)
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            handle = _call(nv.nvmlDeviceGetHandleByUUID, text if text.startswith("GPU-") else f"GPU-{text}")
            if handle is not None:
                return handle
        renumbered = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("CUDA_DEVICE_ORDER")
        return None if renumbered else _call(nv.nvmlDeviceGetHandleByIndex, device_index)

    def _sample(self) -> dict[str, Any]:
        nv, handle = self._nvml, self._handle
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        power = _call(nv.nvmlDeviceGetPowerUsage, handle)
        return {
            "sm_clock_mhz": _call(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM),
            "reasons": _call(reasons, handle) if reasons is not None else None,
            "temperature_c": _call(nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU),
            "power_w": power / 1000.0 if isinstance(power, (int, float)) else None,
        }

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self._sample())
            self._stop.wait(SAMPLE_PERIOD_S)

    def start(self) -> None:
        if self._handle is not None:
            self._thread = threading.Thread(target=self._loop, name="preflight-nvml", daemon=True)
            self._thread.start()

    def stop(self) -> dict[str, Any]:
        """What the GPU said: its identity and the samples' summary, or why NVML could not say."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(2.0)
            self.samples.append(self._sample())
        if self._nvml is not None:
            _call(self._nvml.nvmlShutdown)
        if self.unavailable:
            return {"unavailable": self.unavailable}
        return {**self.identity, **summarise_samples(self.samples)}
