"""What ``compute`` measures, as the history store and the History section read it
(:mod:`preflight.measures`): each GPU's compute rate in the burn, and the GPUs a finding names
slow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preflight.facts_values import records
from preflight.measures import Measure, PartRef, Sample
from preflight.model import CheckResult
from preflight.view import number


def _ranks(result: CheckResult) -> list[Mapping[str, Any]]:
    return records(result.details.get("ranks"))


def gpu_tflops(result: CheckResult) -> list[Sample]:
    """Each rank's compute rate in the burn (TFLOPS), on its GPU: by the GPU's serial where NVML
    gave it, else by its index in the node."""
    found = []
    for rank in _ranks(result):
        host, flops = rank.get("host"), number(rank.get("flops_per_s"))
        if not isinstance(host, str) or flops is None:
            continue
        index = rank.get("gpu_index")
        slot = str(index) if index is not None else ""
        gpu = PartRef("gpu", identity=str(rank.get("gpu_serial") or ""), slot=slot)
        found.append(Sample(flops / 1e12, node=host, ref=gpu))
    return found


def slow_gpus(result: CheckResult) -> dict[str, list[PartRef]]:
    """The GPUs a finding names slow (below the run's slow ratio), by node: by serial where NVML
    gave it, else by index; none for a finding that judged no ranks, or CPU ranks."""
    ratio = number(result.details.get("slow_ratio"))
    if ratio is None:
        return {}
    slow: dict[str, list[PartRef]] = {}
    for rank in _ranks(result):
        host, serial, index, own = (rank.get(k) for k in ("host", "gpu_serial", "gpu_index", "ratio"))
        own = number(own)
        if host not in result.hosts or own is None or own >= ratio or (not serial and index is None):
            continue
        ref = PartRef("gpu", identity=str(serial or ""), slot="" if index is None else str(index))
        slow.setdefault(str(host), []).append(ref)
    return slow


GPU_TFLOPS = Measure("tflops", "TFLOPS", "gpu", "compute rate", "GPU", gpu_tflops, own_past=True)
MEASURES = (GPU_TFLOPS,)
