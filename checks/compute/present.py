"""How ``compute`` presents itself: every rank's throughput in the burn with its ratio to the median
rank and, for the ranks re-tested, to the typical ranks beside them, its GPU and what the GPU said
(SM clock, reasons, temperature, power), the ranks a finding names first; and what to do about a
slow or throttling GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checks.compute.details import NAME
from checks.job.evidence import merged_details
from preflight.model import RunReport
from preflight.view import (
    MAX_TABLE_ROWS,
    Block,
    Note,
    Presentation,
    Table,
    TCell,
    advice_by_item,
    listed,
    number,
    plain,
    scalar,
)


def _rate(value: float | None) -> str:
    if value is None:
        return "\u2014"
    return f"{value / 1e12:.3g} TFLOPS" if value >= 1e12 else f"{value / 1e9:.3g} GFLOPS"


def _row(record: Mapping[str, Any], slow_ratio: float) -> list[TCell]:
    ratio = number(record.get("ratio"))
    odd = "num odd odd-fail" if ratio is not None and ratio < slow_ratio else "num"
    again = number(record.get("retest_ratio"))
    again_odd = "num odd odd-fail" if again is not None and again < slow_ratio else "num"
    clock = number(record.get("sm_clock_mhz"))
    top = number(record.get("max_sm_clock_mhz"))
    clock_text = "\u2014" if clock is None else f"{clock:g}" + (f" / {top:g}" if top else "")
    reasons = ", ".join(plain(r) for r in listed(record.get("reasons"))) or (
        plain(record["nvml"]) if record.get("nvml") else "\u2014"
    )
    return [
        TCell(scalar(record.get("host")), "mono"),
        TCell(scalar(record.get("rank")), "num"),
        TCell(scalar(record.get("gpu_index")), "num"),
        TCell(scalar(record.get("gpu_serial")), "mono"),
        TCell(_rate(number(record.get("flops_per_s"))), "num"),
        TCell("\u2014" if ratio is None else f"{ratio:.2f}\u00d7", odd),
        TCell("\u2014" if again is None else f"{again:.2f}\u00d7", again_odd),
        TCell(clock_text, "num"),
        TCell(reasons),
        TCell(scalar(record.get("temperature_c_max")), "num"),
        TCell(scalar(record.get("power_w_max")), "num"),
    ]


def evidence(report: RunReport) -> Sequence[Block]:
    details = merged_details(report.results_for(NAME))
    records = [r for r in listed(details.get("ranks")) if isinstance(r, Mapping)]
    if not records:
        return []
    slow_ratio = number(details.get("slow_ratio")) or 0.0
    records.sort(key=lambda r: number(r.get("ratio")) or 0.0)
    shown = records[:MAX_TABLE_ROWS]
    burn = number(details.get("burn_s"))
    dtype = plain(details.get("dtype") or "")
    note = f"{len(records) - len(shown)} more ranks in the JSON report" if len(records) > len(shown) else ""
    table = Table(
        ["node", "rank", "GPU", "serial", "throughput", "vs median", "re-test", "SM clock MHz", "reasons",
         "max \u00b0C", "max W"],
        [_row(r, slow_ratio) for r in shown],
        title=f"Matrix-multiplication burn, {scalar(burn)} s of {dtype or 'GEMM'} per rank, slowest first",
        note=note,
    )  # fmt: skip
    blocks: list[Block] = [table]
    if all(r.get("gpu_index") is None for r in records):
        blocks.append(Note("No GPU identity or clock samples: CPU ranks, or NVML was not available."))
    return blocks


PRESENTATION = Presentation(
    heading="Compute",
    about="every rank's matrix-multiplication throughput, against the other ranks of the run",
    evidence=evidence,
    advice=advice_by_item(
        {
            "slow_compute": "Look at the named GPU on that node: nvidia-smi -q -d "
            "PERFORMANCE,TEMPERATURE,POWER (clock event reasons), its cooling and power supply; on a CPU "
            "node, its CPU quota, governor or other load. Drain the node if it stays slow.",
            "throttled": "Check the GPU's cooling and power (nvidia-smi -q -d PERFORMANCE); it may slow down "
            "in a longer run.",
            "*": "See the job's failure table above.",
        }
    ),
)
