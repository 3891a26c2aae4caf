"""The ``gpu_memory`` judge (pure): GPU count, model and total memory against the other nodes,
free memory, and memory health (ECC, row remaps, retired pages), from the nodes' typed facts;
and the typed details a report charts from. A GPU whose memory readings a tool answered with an
error is the ``hardware`` check's to name (``gpu_unreadable``, ``gpu_reading_errors``): it is
counted on its node, compared in nothing it could not read, and never called free or healthy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from checks.gpu_memory.details import GpuDetails, GpuRow
from checks.gpu_memory.settings import GpuMemorySection
from preflight.config import Config
from preflight.facts import GpuFacts, NodeFacts
from preflight.findings import finding
from preflight.model import CheckResult
from preflight.nodeset import fold, group_by_value, minority
from preflight.status import Status
from preflight.units import gib

NAME = "gpu_memory"

# How many processes a summary names before "and N more" (details list them all).
_LISTED_PROCESSES = 3
# The readings this check judges a GPU on (``handle``: the GPU could not be opened at all).
MEMORY_READINGS = frozenset(
    (
        "handle",
        "name",
        "memory_total_bytes",
        "memory_used_bytes",
        "memory_free_bytes",
        "ecc_mode",
        "ecc_uncorrected_volatile",
        "ecc_uncorrected_aggregate",
        "remapped_rows",
        "retired_pages_pending",
        "mig_mode",
    )
)


def _int(value: Any) -> int | None:
    # A count inside remapped_rows, as NVML reported it (null where not supported).
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _count(value: int | None) -> str:
    return "n/a" if value is None else str(value)


@dataclass(frozen=True)
class _Gpu:
    host: str
    index: int
    name: str
    total: int | None
    used: int | None
    free: int | None
    facts: GpuFacts

    @classmethod
    def parse(cls, host: str, position: int, gpu: GpuFacts) -> _Gpu:
        total = gpu.memory_total_bytes
        used = gpu.memory_used_bytes
        free = gpu.memory_free_bytes
        if free is None and total is not None and used is not None:
            free = total - used
        if used is None and total is not None and free is not None:
            used = total - free
        index = gpu.index
        return cls(
            host=host,
            index=position if index is None else index,
            name=gpu.name or "unknown GPU",
            total=total,
            used=used,
            free=free,
            facts=gpu,
        )

    def row(self) -> GpuRow:
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.facts.uuid,
            "total_bytes": self.total,
            "used_bytes": self.used,
            "free_bytes": self.free,
        }


def _gpus_of(host: str, node: NodeFacts) -> tuple[list[_Gpu], str | None]:
    """The node's GPUs, and why there are none when there are none."""
    listed = node.gpus
    reason = node.unavailable.get("gpus")
    if listed is None:
        return [], str(reason or "GPUs not reported")
    gpus = [_Gpu.parse(host, i, g) for i, g in enumerate(listed)]
    return gpus, (None if gpus else str(reason or "no GPUs listed"))


def fold_indices(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    ordered = sorted(set(indices))
    spans: list[str] = []
    start = previous = None
    for i in ordered:
        if previous is not None and i == previous + 1:
            previous = i
            continue
        if start is not None:
            spans.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = i
    if start is not None:
        spans.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(spans)


def _which(gpus: Sequence[_Gpu]) -> str:
    indices = [g.index for g in gpus]
    return f"GPU {indices[0]}" if len(indices) == 1 else f"GPUs {fold_indices(indices)}"


def _per_gpu(gpus: Sequence[_Gpu], describe: Callable[[_Gpu], str]) -> str:
    """One GPU's description as is; several, each prefixed with its index."""
    if len(gpus) == 1:
        return describe(gpus[0])
    return "; ".join(f"GPU {g.index}: {describe(g)}" for g in gpus)


def _rows(gpus: Iterable[_Gpu]) -> dict[str, list[GpuRow]]:
    rows: dict[str, list[GpuRow]] = {}
    for gpu in gpus:
        rows.setdefault(gpu.host, []).append(gpu.row())
    return rows


def _finding(status: Status, summary: str, hosts: Iterable[str], details: GpuDetails) -> CheckResult:
    return finding(NAME, status, summary, hosts, details)


def _has(count: int) -> str:
    return "has" if count == 1 else "have"


def _count_findings(
    counts: Mapping[str, int], reasons: Mapping[str, str], by_host: Mapping[str, list[_Gpu]], config: Config
) -> list[CheckResult]:
    """Nodes with fewer GPUs than ``gpus_per_node`` or, when it is not set, than the others."""
    stated = config.section(GpuMemorySection).gpus_per_node
    if stated:
        expected, why = stated, "per node (gpus_per_node)"
    elif len(counts) >= 2:
        majority, _ = minority(counts)
        # On a tie the node with fewer GPUs is still the one that cannot run the job's ranks.
        expected = majority if majority is not None else max(counts.values())
        why = "like the other nodes"
    else:
        return []
    short = {h: c for h, c in counts.items() if c < expected}
    results: list[CheckResult] = []
    for count, hosts in sorted(group_by_value(short), key=lambda item: item[0]):
        details: GpuDetails = {
            "item": "gpu_count",
            "expected": expected,
            "counts": {h: count for h in hosts},
        }
        if count == 0:
            why_none = "; ".join(f"{r}" for r, _ in group_by_value({h: reasons.get(h, "") for h in hosts}))
            details["reasons"] = {h: reasons.get(h) for h in hosts}
            summary = f"{fold(hosts)}: no GPUs, expected {expected} {why}: {why_none}"
        else:
            details["gpus"] = _rows(g for h in hosts for g in by_host[h])
            summary = f"{fold(hosts)} {_has(len(hosts))} {count} GPUs, expected {expected} {why}"
        results.append(_finding("fail", summary, hosts, details))
    return results


def unread(gpu: _Gpu) -> bool:
    """A tool answered one of the readings this check judges with an error."""
    return not MEMORY_READINGS.isdisjoint(gpu.facts.errors)


def _model_findings(by_host: Mapping[str, list[_Gpu]]) -> list[CheckResult]:
    """A node whose GPUs are another model: the job runs at the pace of the slowest (a GPU whose
    name is an error is no other model)."""
    named = {
        h: [g for g in gpus if not {"name", "handle"} & set(g.facts.errors)] for h, gpus in by_host.items()
    }
    models = {h: " + ".join(sorted({g.name for g in gpus})) for h, gpus in named.items() if gpus}
    if len(models) < 2:
        return []
    majority, culprits = minority(models)
    if not culprits:
        return []
    odd = group_by_value({h: models[h] for h in culprits})
    shown = "; ".join(f"{fold(hosts)}: {model}" for model, hosts in odd)
    if majority is not None:
        shown += f" (majority {majority})"
    details: GpuDetails = {"item": "gpu_model", "majority": majority, "values": dict(group_by_value(models))}
    return [_finding("warn", f"GPU models differ: {shown}", culprits, details)]


def _total_findings(gpus: Sequence[_Gpu], tolerance: float) -> list[CheckResult]:
    """GPUs whose total memory differs from the majority of the same model by more than ``tolerance``."""
    per_model: dict[str, Counter[int]] = {}
    for gpu in gpus:
        if gpu.total is not None:
            per_model.setdefault(gpu.name, Counter())[gpu.total] += 1
    reference: dict[str, int | None] = {}
    for model, totals in per_model.items():
        common = totals.most_common(2)
        tie = len(common) == 2 and common[0][1] == common[1][1]
        reference[model] = None if tie else common[0][0]
    odd: dict[tuple[str, int, int], list[_Gpu]] = {}  # (model, total, the majority's total)
    tied: dict[str, list[_Gpu]] = {}
    for gpu in gpus:
        if gpu.total is None:
            continue
        ref = reference[gpu.name]
        if ref is None:
            tied.setdefault(gpu.name, []).append(gpu)
        elif abs(gpu.total - ref) > tolerance * ref:
            odd.setdefault((gpu.name, gpu.total, ref), []).append(gpu)
    results: list[CheckResult] = []
    for (model, total, ref), group in odd.items():
        hosts = list(dict.fromkeys(g.host for g in group))
        where = f"{hosts[0]} {_which(group)}" if len(hosts) == 1 else f"{fold(hosts)} ({len(group)} GPUs)"
        summary = (
            f"{where}: {gib(total)} GiB total, the other {model} GPUs have {gib(ref)} GiB"
            f" (tolerance {tolerance:.0%})"
        )
        details: GpuDetails = {
            "item": "memory_total",
            "model": model,
            "expected_bytes": ref,
            "gpus": _rows(group),
        }
        results.append(_finding("fail", summary, hosts, details))
    for model, group in tied.items():
        smallest = min(g.total for g in group if g.total is not None)
        largest = max(g.total for g in group if g.total is not None)
        if largest - smallest <= tolerance * largest:
            continue
        per_host = {g.host: gib(g.total or 0) + " GiB" for g in group}
        shown = "; ".join(f"{fold(h)}: {v}" for v, h in group_by_value(per_host))
        tied_details: GpuDetails = {
            "item": "memory_total",
            "model": model,
            "expected_bytes": None,
            "gpus": _rows(group),
        }
        summary = f"{model} total memory differs, no majority: {shown}"
        results.append(_finding("fail", summary, per_host, tied_details))
    return results


def _processes(gpus: Sequence[_Gpu]) -> str:
    listed: dict[Any, str] = {}
    unknown = False
    for gpu in gpus:
        processes = gpu.facts.processes
        if processes is None:
            unknown = True
            continue
        for process in processes:
            pid = process.get("pid")
            name = process.get("name") or "?"
            listed.setdefault(pid, f"pid {pid} ({name})")
    if not listed:
        # Processes of another container or PID namespace hold memory but are not listed.
        return "processes not reported" if unknown else "no process listed (another container or user?)"
    shown = list(listed.values())
    more = f" and {len(shown) - _LISTED_PROCESSES} more" if len(shown) > _LISTED_PROCESSES else ""
    return "by " + ", ".join(shown[:_LISTED_PROCESSES]) + more


def _busy_findings(by_host: Mapping[str, list[_Gpu]], min_free_fraction: float) -> list[CheckResult]:
    results: list[CheckResult] = []
    for host, gpus in by_host.items():
        busy = [g for g in gpus if g.total and g.free is not None and g.free < min_free_fraction * g.total]
        if not busy:
            continue
        # parse() fills used from total and free, so every busy GPU has both.
        used = sorted({g.used or 0 for g in busy})
        totals = {gib(g.total or 0) for g in busy}
        of_total = f" of {totals.pop()} GiB" if len(totals) == 1 else ""
        if len(used) == 1:
            amount = f"{gib(used[0])} GiB{of_total} in use" + (" on each" if len(busy) > 1 else "")
        else:
            amount = f"{gib(used[0])}-{gib(used[-1])} GiB{of_total} in use"
        processes = _processes(busy)
        joiner = " " if processes.startswith("by ") else ", "
        summary = f"{host} {_which(busy)}: {amount}{joiner}{processes}"
        details: GpuDetails = {
            "item": "memory_free",
            "min_free_fraction": min_free_fraction,
            "gpus": _rows(busy),
            "processes": {str(g.index): g.facts.processes for g in busy},
        }
        results.append(_finding("fail", summary, [host], details))
    return results


def _health_findings(by_host: Mapping[str, list[_Gpu]]) -> list[CheckResult]:
    """Memory faults that matter for the run: uncorrected errors since the driver loaded, row
    remaps pending or failed, retired pages pending. Lifetime (aggregate) counts are history:
    on A100/H100 an error that row remapping handled leaves them above zero on a healthy GPU,
    and no reset clears them (see :func:`ecc_history`)."""
    results: list[CheckResult] = []
    for host, gpus in by_host.items():
        ecc = [g for g in gpus if (g.facts.ecc_uncorrected_volatile or 0) > 0]
        if ecc:
            counts = _per_gpu(
                ecc,
                lambda g: (
                    f"{_count(g.facts.ecc_uncorrected_volatile)} since the driver loaded, "
                    f"{_count(g.facts.ecc_uncorrected_aggregate)} lifetime"
                ),
            )
            summary = (
                f"{host} {_which(ecc)}: uncorrected ECC errors ({counts}): drain the node, reset the GPU"
            )
            details: GpuDetails = {
                "item": "ecc_errors",
                "gpus": _rows(ecc),
                "errors": {
                    str(g.index): {
                        "volatile": g.facts.ecc_uncorrected_volatile,
                        "aggregate": g.facts.ecc_uncorrected_aggregate,
                    }
                    for g in ecc
                },
            }
            results.append(_finding("fail", summary, [host], details))
        remap = [g for g in gpus if _remap_state(g) is not None]
        if remap:
            states = _per_gpu(remap, lambda g: _remap_state(g) or "")
            failed = any("failed" in (_remap_state(g) or "") for g in remap)
            action = "replace the GPU" if failed else "reset the GPU or reboot the node before the run"
            summary = f"{host} {_which(remap)}: {states}: {action}"
            remapped: GpuDetails = {
                "item": "remapped_rows",
                "gpus": _rows(remap),
                "remapped_rows": {str(g.index): g.facts.remapped_rows for g in remap},
            }
            results.append(_finding("fail", summary, [host], remapped))
        retired = [g for g in gpus if g.facts.retired_pages_pending is True]
        if retired:
            summary = f"{host} {_which(retired)}: retired memory pages pending: reboot before the run"
            pending: GpuDetails = {"item": "retired_pages", "gpus": _rows(retired)}
            results.append(_finding("fail", summary, [host], pending))
    return results


def ecc_history(by_host: Mapping[str, list[_Gpu]]) -> dict[str, dict[str, dict[str, int | None]]]:
    """Host -> GPU index -> lifetime uncorrected errors and rows remapped, for GPUs whose memory
    had faults in the past and has none now: information, not a finding."""
    history: dict[str, dict[str, dict[str, int | None]]] = {}
    for host, gpus in by_host.items():
        for g in gpus:
            rows = g.facts.remapped_rows
            remapped = (_int(rows.get("correctable")) or 0) + (_int(rows.get("uncorrectable")) or 0)
            lifetime = g.facts.ecc_uncorrected_aggregate or 0
            if (lifetime or remapped) and not (g.facts.ecc_uncorrected_volatile or _remap_state(g)):
                history.setdefault(host, {})[str(g.index)] = {
                    "lifetime_uncorrected": g.facts.ecc_uncorrected_aggregate,
                    "rows_remapped": remapped,
                }
    return history


def _history_note(history: Mapping[str, Mapping[str, Mapping[str, int | None]]]) -> str:
    if not history:
        return ""
    where = "; ".join(
        f"{h} GPU{'s' if len(g) > 1 else ''} {fold_indices(map(int, g))}" for h, g in history.items()
    )
    return f"; past memory faults handled by remapping or retirement on {where} (history, nothing pending)"


def _not_read_note(gpus: Sequence[_Gpu]) -> str:
    if not gpus:
        return ""
    where = "; ".join(f"{host} {_which(list(group))}" for host, group in groupby(gpus, key=lambda g: g.host))
    return f"; not judged: {where}, whose memory readings are errors (the hardware check names them)"


def _remap_state(gpu: _Gpu) -> str | None:
    rows = gpu.facts.remapped_rows
    uncorrectable = _int(rows.get("uncorrectable")) or 0
    if rows.get("failure"):
        return f"row remapping failed ({uncorrectable} rows remapped for uncorrectable errors)"
    if rows.get("pending"):
        return f"row remapping pending ({uncorrectable} rows remapped for uncorrectable errors)"
    return None


def _ecc_mode_findings(by_host: Mapping[str, list[_Gpu]]) -> list[CheckResult]:
    """ECC off on some GPUs while on elsewhere: the same model then has more memory and no error checks."""
    enabled = {h for h, gpus in by_host.items() for g in gpus if g.facts.ecc_mode == "enabled"}
    disabled = {h: [g for g in gpus if g.facts.ecc_mode == "disabled"] for h, gpus in by_host.items()}
    disabled = {h: gpus for h, gpus in disabled.items() if gpus}
    if not enabled or not disabled:
        return []
    where = "; ".join(f"{h} {_which(gpus)}" for h, gpus in list(disabled.items())[:4])
    if len(disabled) > 4:
        where += f" and {len(disabled) - 4} more nodes"
    summary = f"ECC disabled on {where}, enabled on {fold(sorted(enabled - set(disabled)) or enabled)}"
    details: GpuDetails = {"item": "ecc_mode", "gpus": _rows(g for gpus in disabled.values() for g in gpus)}
    return [_finding("warn", summary, disabled, details)]


def _mig_findings(by_host: Mapping[str, list[_Gpu]]) -> list[CheckResult]:
    """MIG on where the other GPUs have it off: the job would see MIG instances, not whole GPUs
    (a smaller GPU per rank, and NCCL does not run across instances)."""
    enabled = {h: [g for g in gpus if g.facts.mig_mode == "enabled"] for h, gpus in by_host.items()}
    enabled = {h: gpus for h, gpus in enabled.items() if gpus}
    disabled = {h for h, gpus in by_host.items() for g in gpus if g.facts.mig_mode == "disabled"}
    if not enabled or not disabled:
        return []
    where = "; ".join(f"{h} {_which(gpus)}" for h, gpus in list(enabled.items())[:4])
    if len(enabled) > 4:
        where += f" and {len(enabled) - 4} more nodes"
    summary = f"MIG enabled on {where}, disabled on the other GPUs: those ranks would get MIG instances"
    details: GpuDetails = {"item": "mig_mode", "gpus": _rows(g for gpus in enabled.values() for g in gpus)}
    return [_finding("warn", summary, enabled, details)]


def judge_gpu_memory(nodes: Mapping[str, NodeFacts], config: Config) -> list[CheckResult]:
    """Findings for GPU count, memory size, free memory and memory health across ``nodes``."""
    if not nodes:
        return [CheckResult(NAME, "skip", "no reachable hosts: no GPUs to check")]
    by_host: dict[str, list[_Gpu]] = {}
    reasons: dict[str, str] = {}
    for host, node in nodes.items():
        gpus, reason = _gpus_of(host, node)
        by_host[host] = gpus
        if reason is not None:
            reasons[host] = reason
    counts = {h: len(g) for h, g in by_host.items()}
    all_gpus = [g for gpus in by_host.values() for g in gpus]
    settings = config.section(GpuMemorySection)
    if not all_gpus and not settings.gpus_per_node:
        cpu_only: GpuDetails = {"item": "gpu_count", "reasons": dict(reasons)}
        return [CheckResult(NAME, "skip", "no GPUs on any node: CPU-only cluster", (), cpu_only)]
    results = _count_findings(counts, reasons, by_host, config)
    results += _model_findings(by_host)
    results += _total_findings(all_gpus, settings.total_tolerance)
    results += _busy_findings(by_host, settings.min_free_fraction)
    results += _health_findings(by_host)
    results += _ecc_mode_findings(by_host)
    results += _mig_findings(by_host)
    if results:
        return results
    models = Counter(f"{g.name} {gib(g.total)} GiB" for g in all_gpus if g.total is not None)
    fewest, most = min(counts.values()), max(counts.values())
    layout = f"{fewest} per node" if fewest == most else f"{fewest}-{most} per node"
    alone = "; nothing compared (only one node reachable)" if len(nodes) < 2 else ""
    history = ecc_history(by_host)
    not_read = [g for g in all_gpus if unread(g)]
    summary = (
        f"{len(all_gpus) - len(not_read)} GPUs on {len(nodes)} node{'s' if len(nodes) != 1 else ''} "
        f"({layout}, {', '.join(models)}): free and healthy{alone}{_history_note(history)}"
        f"{_not_read_note(not_read)}"
    )
    details: GpuDetails = {"item": "gpus", "gpus": _rows(all_gpus), "counts": counts}
    if history:
        details["ecc_history"] = history
    return [CheckResult(NAME, "pass", summary, (), details)]
