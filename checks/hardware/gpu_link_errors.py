"""Each GPU's PCIe replays and NVLink errors since the driver loaded (NVML's field values,
:data:`preflight.node.nvml.LINK_ERROR_FIELDS`, or nvidia-smi's reports where the node has no pynvml,
:mod:`preflight.node.smi_counters`), against the GPUs of the same model across the run:
DCGM's ``pcie`` plugin (replays, NVLink recovery errors), AzNHC's and gpud's NVLink checks and
NVSentinel's DCGM NVLink and PCIe watches read these counters.

Like the kernel's AER counts (:mod:`checks.hardware.pcie_errors`), a count since the driver loaded
is what happened, not what happens: a GPU is named in a note where a count stands out from its like
GPUs' (:func:`checks.hardware.pcie_errors.stands_out`), and for an NVLink recovery (a link that
went down and retrained) where its like GPUs had none. Slow traffic inside the node is the
``intranode`` check's to judge.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from checks.hardware.details import GpuLinkErrors
from checks.hardware.pcie_errors import stands_out
from preflight.facts import GpuFacts, NodeFacts
from preflight.model import CheckResult

NAME = "hardware"
COUNTER_TEXT = {
    "pcie_replays": "PCIe replays",
    "nvlink_crc_flit": "NVLink CRC flit errors",
    "nvlink_crc_data": "NVLink CRC data errors",
    "nvlink_replay": "NVLink replays",
    "nvlink_recovery": "NVLink recoveries",
}


def _medians(nodes: Mapping[str, NodeFacts]) -> dict[tuple[str | None, str], float]:
    """(GPU model, counter) -> the median count over the run's GPUs of that model that gave it."""
    counts: dict[tuple[str | None, str], list[int]] = {}
    for node in nodes.values():
        for gpu in node.gpus or []:
            for counter, count in gpu.link_errors.items():
                counts.setdefault((gpu.name, counter), []).append(count)
    return {key: statistics.median(values) for key, values in counts.items()}


def _odd(gpu: GpuFacts, medians: Mapping[tuple[str | None, str], float]) -> list[str]:
    found = []
    for counter, count in gpu.link_errors.items():
        typical = medians[(gpu.name, counter)]
        recovered = counter == "nvlink_recovery" and count > 0 and typical == 0
        if counter in COUNTER_TEXT and (recovered or stands_out(count, typical)):
            found.append(f"{COUNTER_TEXT[counter]} {count} (like GPUs' median {typical:g})")
    return found


def judge_gpu_link_errors(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """A note per node whose GPUs counted PCIe replays or NVLink errors their like GPUs did not."""
    medians = _medians(nodes)
    results = []
    for host, node in nodes.items():
        rows = [(gpu, odd) for gpu in node.gpus or [] if (odd := _odd(gpu, medians))]
        if not rows:
            continue
        shown = "; ".join(f"GPU {gpu.index}: {', '.join(odd)}" for gpu, odd in rows)
        details: GpuLinkErrors = {
            "item": "gpu_link_errors",
            "node": host,
            "gpus": [gpu.index for gpu, _ in rows],
            "counts": {str(gpu.index): gpu.link_errors for gpu, _ in rows},
        }
        summary = f"{host}: since the driver loaded, {shown}"
        results.append(CheckResult.note(NAME, summary, (host,), dict(details)))
    return results
