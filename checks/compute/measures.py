"""What ``compute`` measures, as the history store and the History section read it
(:mod:`preflight.measures`): each GPU's compute rate in the burn, and the GPUs a finding names
slow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preflight.facts_values import records
from preflight.measures import Measure, Sample
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
        found.append(Sample(flops / 1e12, node=host, part=str(rank.get("gpu_serial") or ""), slot=slot))
    return found


def slow_gpus(result: CheckResult) -> dict[str, set[str]] | None:
    """The serials of the GPUs a finding names slow (below the run's slow ratio), by node; None for
    a finding that judged no ranks."""
    ratio = number(result.details.get("slow_ratio"))
    if not isinstance(result.details.get("ranks"), list) or ratio is None:
        return None
    slow: dict[str, set[str]] = {}
    for rank in _ranks(result):
        host, serial, own = rank.get("host"), rank.get("gpu_serial"), number(rank.get("ratio"))
        if host in result.hosts and serial and own is not None and own < ratio:
            slow.setdefault(str(host), set()).add(str(serial))
    return slow


GPU_TFLOPS = Measure("tflops", "TFLOPS", "gpu", "compute rate", "GPU", gpu_tflops, own_past=True)
MEASURES = (GPU_TFLOPS,)
