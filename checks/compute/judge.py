"""The ``compute`` judge: each rank's matrix-multiplication throughput against the median rank of the
same run (and an optional floor). A rank slow in the burn and again in its re-test is named with its
node and GPU (index and serial when NVML gave them), both measurements, and the cause its GPU
reported during the burn; one slow once and normal on re-test is a note. Pure: a job's outcome in,
findings out.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from checks.compute.details import NAME, ComputeDetails, ComputeRank, ComputeRetest
from checks.compute.retest import Retest, read_retest
from checks.job.failures import rank_hosts
from checks.job.node.nvml import REASON_BITS
from checks.job.outcome import JobOutcome
from checks.job.phase import read_phase
from checks.job.settings import ComputeSection
from preflight.config import Config
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold
from preflight.status import by_severity

# Reasons that are a GPU's own trouble, strongest first, as a person reads them. A power cap
# (sw_power_cap) is how a healthy GPU under full load behaves: named only for a slow GPU.
CAUSES: tuple[tuple[str, str], ...] = (
    ("hw_power_brake", "power brake (the board's power-brake input is asserted: power supply or chassis)"),
    ("hw_thermal", "thermal slowdown (hardware)"),
    ("sw_thermal", "thermal slowdown (driver)"),
    ("hw_slowdown", "hardware slowdown (temperature or power beyond the board's limits)"),
)
POWER_CAP = ("sw_power_cap", "power cap")
IGNORED_REASONS = {"gpu_idle", "display_clocks", "sync_boost"}
assert {name for name, _ in CAUSES} <= set(REASON_BITS.values())


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _rate(flops_per_s: float, dtype: str | None) -> str:
    """``745 TFLOPS bf16`` / ``14.8 GFLOPS fp32``."""
    unit, scale = ("TFLOPS", 1e12) if flops_per_s >= 1e12 else ("GFLOPS", 1e9)
    return f"{flops_per_s / scale:.3g} {unit}" + (f" {dtype}" if dtype else "")


def _row(record: Mapping[str, Any], host: str | None, median: float, retest: Retest | None) -> ComputeRank:
    gpu = record.get("gpu") if isinstance(record.get("gpu"), Mapping) else {}
    assert isinstance(gpu, Mapping)
    share = gpu.get("reason_share") if isinstance(gpu.get("reason_share"), Mapping) else {}
    assert isinstance(share, Mapping)
    clocks = gpu.get("sm_clock_mhz") if isinstance(gpu.get("sm_clock_mhz"), Mapping) else {}
    assert isinstance(clocks, Mapping)
    flops = _number(record.get("flops_per_s"))
    index = gpu.get("index")
    rank = int(record["rank"])
    return {
        "rank": rank,
        "host": host,
        "local_rank": record.get("local_rank") if isinstance(record.get("local_rank"), int) else None,
        "dtype": str(record["dtype"]) if record.get("dtype") else None,
        "flops_per_s": flops,
        "ratio": flops / median if flops is not None and median > 0 else None,
        "gpu_index": index if isinstance(index, int) and not isinstance(index, bool) else None,
        "gpu_serial": str(gpu["serial"]) if gpu.get("serial") else None,
        "sm_clock_mhz": _number(clocks.get("median")),
        "max_sm_clock_mhz": _number(gpu.get("max_sm_clock_mhz")),
        "reasons": sorted(str(name) for name, part in share.items() if name not in IGNORED_REASONS and part),
        "temperature_c_max": _number(gpu.get("temperature_c_max")),
        "power_w_max": _number(gpu.get("power_w_max")),
        "nvml": str(gpu["unavailable"]) if gpu.get("unavailable") else None,
        "retest_flops_per_s": retest.flops.get(rank) if retest else None,
        "retest_ratio": retest.ratio(rank) if retest else None,
    }


def causes(row: ComputeRank, slow: bool) -> list[str]:
    """Why the GPU says it ran slower, from its reasons, with the numbers that go with them."""
    found = [text for name, text in CAUSES if name in row["reasons"]]
    if slow and POWER_CAP[0] in row["reasons"]:
        found.append(POWER_CAP[1])
    if found and row["temperature_c_max"] is not None:
        found[-1] += f", up to {row['temperature_c_max']:g} \u00b0C"
    if found and row["sm_clock_mhz"] is not None and row["max_sm_clock_mhz"]:
        found[-1] += f", SM clock {row['sm_clock_mhz']:g} of {row['max_sm_clock_mhz']:g} MHz"
    return found


def describe_device(row: ComputeRank) -> str:
    """``GPU 3 (serial 1654922001234)``, ``rank 5`` when NVML gave no index."""
    if row["gpu_index"] is None:
        return f"rank {row['rank']}"
    serial = f", serial {row['gpu_serial']}" if row["gpu_serial"] else ""
    return f"GPU {row['gpu_index']} (rank {row['rank']}{serial})"


def _node_finding(host: str, rows: Sequence[ComputeRank], median: float, floor: float) -> CheckResult:
    """One finding for a node's slow ranks: the slowest first, each with its cause."""
    rows = sorted(rows, key=lambda r: r["ratio"] if r["ratio"] is not None else 0.0)
    parts = []
    for row in rows[:4]:
        flops = row["flops_per_s"] or 0.0
        ratio = row["ratio"] or 0.0
        versus = f"{_rate(flops, row['dtype'])} vs {_rate(median, None)}"
        part = f"{describe_device(row)} at {ratio:.2g}x the median rank ({versus})"
        if floor > 0 and flops < floor:
            part += f", below the floor {_rate(floor, None)}"
        if row["retest_ratio"] is not None:
            part += f", {row['retest_ratio']:.2g}x the typical ranks on re-test"
        why = causes(row, slow=True)
        part += f": {'; '.join(why)}" if why else ""
        parts.append(part)
    more = f"; and {len(rows) - 4} more" if len(rows) > 4 else ""
    said = any(causes(r, slow=True) for r in rows)
    gpu = any(r["gpu_index"] is not None or r["nvml"] for r in rows)
    tail = (
        ""
        if said
        else (
            " (the GPU reported no throttle reason)"
            if gpu
            else " (a CPU rank: is the node's CPU limited, shared or throttled?)"
        )
    )
    summary = f"{host} is slow at compute: {'; '.join(parts)}{more}{tail}"
    details = {
        "item": "slow_compute",
        "node": host,
        "ratio": rows[0]["ratio"],
        "retest_ratio": rows[0]["retest_ratio"],
        "slow_ranks": [r["rank"] for r in rows],
        "gpus": [r["gpu_index"] for r in rows if r["gpu_index"] is not None],
        "serials": [r["gpu_serial"] for r in rows if r["gpu_serial"]],
        "causes": sorted({c.split(" (")[0].split(",")[0] for r in rows for c in causes(r, slow=True)}),
    }
    return CheckResult(NAME, "fail", summary, (host,), details)


def _once_note(host: str, rows: Sequence[ComputeRank]) -> CheckResult:
    """A note for a node's ranks that were slow in the burn and normal on re-test."""
    parts = [
        f"{describe_device(row)} at {row['ratio'] or 0:.2g}x the median rank, "
        f"then {row['retest_ratio'] or 0:.2g}x the typical ranks on re-test"
        for row in rows
    ]
    summary = (
        f"{host} was slow once at compute and normal on re-test: {'; '.join(parts)} "
        "(a passing load, such as the scheduler or another process, not the node)"
    )
    details = {
        "item": "slow_once",
        "node": host,
        "ratio": rows[0]["ratio"],
        "retest_ratio": rows[0]["retest_ratio"],
        "ranks": [r["rank"] for r in rows],
    }
    return CheckResult.note(NAME, summary, (host,), details)


def _throttled(host: str, row: ComputeRank, once: bool) -> CheckResult:
    """A GPU that reported a cause of its own but was not found slow (or only once)."""
    pace = (
        f"when it ran at {row['ratio'] or 0:.2g}x the median rank, then {row['retest_ratio'] or 0:.2g}x "
        "the typical ranks on re-test"
        if once
        else f"though it kept {row['ratio'] or 0:.2g}x the median rank"
    )
    said = "; ".join(causes(row, slow=False))
    summary = f"{host}: {describe_device(row)} reported {said} during the burn, {pace}"
    return CheckResult(NAME, "warn", summary, (host,), {"item": "throttled", "node": host})


def _retest_details(retest: Retest | None) -> ComputeRetest | None:
    if retest is None:
        return None
    return {
        "burn_s": retest.burn_s,
        "suspects": list(retest.suspects),
        "controls": list(retest.controls),
        "reference_flops_per_s": retest.reference,
        "in_turn": retest.in_turn,
    }


@dataclasses.dataclass(frozen=True)
class _Pace:
    """What counts as slow in one run: below a share of the median rank (or of the re-test's
    typical ranks), or below the floor."""

    slow_ratio: float
    floor: float
    median: float
    retest: Retest | None

    def below(self, flops: float | None, reference: float) -> bool:
        """Whether ``flops`` is below the slow share of ``reference`` or below the floor."""
        if flops is None:
            return False
        return flops < self.slow_ratio * reference or (self.floor > 0 and flops < self.floor)

    def slow_once(self, row: ComputeRank) -> bool:
        """Slow in the burn, and normal in the re-test beside typical ranks."""
        reference = self.retest.reference if self.retest else None
        if (
            not self.below(row["flops_per_s"], self.median)
            or reference is None
            or row["retest_flops_per_s"] is None
        ):
            return False
        return not self.below(row["retest_flops_per_s"], reference)

    def slow(self, row: ComputeRank) -> bool:
        """Slow in the burn, and in the re-test where there was one for the rank."""
        return self.below(row["flops_per_s"], self.median) and not self.slow_once(row)


def _slow_by_host(
    rows: Sequence[ComputeRank], pace: _Pace
) -> tuple[dict[str, list[ComputeRank]], dict[str, list[ComputeRank]]]:
    """The slow ranks by node, and by node the ranks slow once with no cause of their GPU's own."""
    by_host: dict[str, list[ComputeRank]] = {}
    once_by_host: dict[str, list[ComputeRank]] = {}
    for row in rows:
        host = row["host"] or f"rank {row['rank']}"
        if pace.slow(row):
            by_host.setdefault(host, []).append(row)
        elif pace.slow_once(row) and not causes(row, slow=False):
            once_by_host.setdefault(host, []).append(row)
    return by_host, once_by_host


def _burn_summary(rows: Sequence[ComputeRank], median: float, burn_s: float, dtype: str | None) -> str:
    """The pass's summary: the ranks and nodes, the median rate and the slowest rank."""
    slowest = min(rows, key=lambda r: r["ratio"] if r["ratio"] is not None else math.inf)
    nodes = fold(sorted({r["host"] for r in rows if r["host"]}))
    again = (
        f" (then {slowest['retest_ratio']:.2g}x on re-test)" if slowest["retest_ratio"] is not None else ""
    )
    return (
        f"{len(rows)} rank{'s' if len(rows) != 1 else ''} on {nodes} burned {burn_s:g} s of matrix "
        f"multiplications: median {_rate(median, dtype)}, slowest {describe_device(slowest)} on "
        f"{slowest['host']} at {slowest['ratio'] or 0:.2g}x{again}"
    )


def judge_compute(outcome: JobOutcome, config: Config) -> list[CheckResult]:
    """Findings for the compute phase of a job: slow ranks by node (slow in the burn and in its
    re-test), notes for ranks slow once, GPUs throttling for their own reasons though not found
    slow, and a pass with the median and the slowest."""
    phase = read_phase(NAME, outcome)
    if phase.section is None:
        return phase.findings
    results, section = phase.findings, phase.section
    settings = config.section(ComputeSection)
    cuda = phase.document.get("device") == "cuda"
    slow_ratio = settings.slow_ratio if cuda else settings.cpu_slow_ratio
    hosts = rank_hosts(outcome)
    records = [
        r for r in section.get("ranks") or [] if isinstance(r, Mapping) and isinstance(r.get("rank"), int)
    ]
    measured = [v for r in records if (v := _number(r.get("flops_per_s"))) is not None and v > 0]
    if not measured:
        return [*results, CheckResult(NAME, "error", "the compute burn measured no rank")]
    median = float(statistics.median(measured))
    retest = read_retest(section)
    rows = sorted(
        (_row(r, hosts.get(int(r["rank"])), median, retest) for r in records), key=lambda r: r["rank"]
    )
    floor = settings.min_tflops * 1e12
    pace = _Pace(slow_ratio, floor, median, retest)
    by_host, once_by_host = _slow_by_host(rows, pace)
    for host, slow_rows in by_host.items():
        results.append(_node_finding(host, slow_rows, median, floor))

    throttled = {
        row["host"] or f"rank {row['rank']}": row
        for row in rows
        if not pace.slow(row) and causes(row, slow=False)
    }
    for host, row in throttled.items():
        results.append(_throttled(host, row, pace.slow_once(row)))
    notes = [_once_note(host, once_rows) for host, once_rows in once_by_host.items()]

    dtype = next((r["dtype"] for r in rows if r["dtype"]), None)
    burn_s = _number(section.get("burn_s")) or 0.0
    details: ComputeDetails = {
        "burn_s": burn_s,
        "duration_s": _number(section.get("duration_s")),
        "dtype": dtype,
        "median_flops_per_s": median,
        "slow_ratio": slow_ratio,
        "slow_hosts": list(by_host),
        "ranks": rows,
        "retest": _retest_details(retest),
    }
    if not by_host and not throttled:
        summary = _burn_summary(rows, median, burn_s, dtype)
        results.append(CheckResult(NAME, "pass", summary, (), dict(details)))
        return [*results, *notes]
    return with_check_details(by_severity([*results, *notes]), details)
