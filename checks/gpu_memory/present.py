"""How ``gpu_memory`` presents itself: one memory meter per node and GPU (alike, idle nodes
folded into one row; GPUs a finding names marked), or a note on a CPU-only cluster; and what
to do about each kind of finding.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import cast

from checks.gpu_memory.details import GpuDetails
from checks.gpu_memory.judge import NAME
from preflight.facts import GpuFacts
from preflight.model import HostReport, RunReport
from preflight.nodeset import fold, natural_key
from preflight.status import LABELS
from preflight.units import gib
from preflight.view import (
    Block,
    Chart,
    Figure,
    Legend,
    Meter,
    MeterGrid,
    Note,
    Presentation,
    advice_by_item,
    plain,
)

# A GPU with more than this share of its memory in use keeps its node out of a folded row.
_BUSY_FRACTION = 0.05

Marks = dict[tuple[str, int], str]  # (host, GPU index, -1 for the whole node) -> status


def _cpu_only(hosts: Sequence[HostReport]) -> list[Block]:
    """No GPU anywhere: say so, with the torch the nodes have and the reason they give."""
    torch_versions = sorted(
        {plain(torch.version) for h in hosts if (torch := h.node.torch) and torch.version is not None}
    )
    reasons = Counter(plain(h.node.unavailable.get("gpus", "")) for h in hosts)
    why = reasons.most_common(1)[0][0] if reasons else ""
    text = f"No GPUs on any of the {len(hosts)} reachable nodes: a CPU-only cluster"
    if torch_versions:
        text += f" (torch {', '.join(torch_versions)})"
    text += ". The job runs on gloo; there is no GPU memory to chart."
    if why:
        text += f" The nodes say: {why}"
    return [Note(text, "cpu-only")]


def _marks(report: RunReport) -> Marks:
    """The GPUs that findings name, with the finding's status; a finding that names a node but
    no GPU marks all of the node's GPUs."""
    bad: Marks = {}
    for r in report.results_for(NAME):
        if r.status in ("pass", "skip"):
            continue
        gpus = cast(GpuDetails, r.details).get("gpus")
        if isinstance(gpus, Mapping):
            for host, gpu_rows in gpus.items():
                for row in gpu_rows if isinstance(gpu_rows, list) else []:
                    if isinstance(row, Mapping) and isinstance(row.get("index"), int):
                        bad[(str(host), row["index"])] = r.status
        elif r.hosts:
            for host in r.hosts:
                bad.setdefault((host, -1), r.status)
    return bad


def _used(gpu: GpuFacts) -> float | None:
    used = gpu.memory_used_bytes
    return None if used is None else float(used)


def gpu_blocks(report: RunReport) -> list[Block]:
    """The section's evidence: a meter per node and GPU, or a note on a CPU-only cluster."""
    hosts = [h for h in report.hosts if h.reachable]
    per_host: dict[str, list[GpuFacts]] = {}
    for h in hosts:
        if (listed := h.node.gpus) is not None:
            per_host[h.name] = listed
    if not any(per_host.values()):
        return _cpu_only(hosts) if hosts else []
    bad = _marks(report)
    # Nodes with nothing to say fold into one row per GPU layout; the others are their own rows.
    rows: list[tuple[str, list[str], list[GpuFacts]]] = []
    folded: dict[str, list[str]] = {}
    layouts: dict[str, list[GpuFacts]] = {}
    for name, gpus in per_host.items():
        flagged = any(h == name for h, _ in bad)
        busy = any((g.memory_used_bytes or 0) > _BUSY_FRACTION * (g.memory_total_bytes or 1) for g in gpus)
        if flagged or busy:
            rows.append((name, [name], gpus))
            continue
        layout = json.dumps([(g.name, g.memory_total_bytes) for g in gpus])
        folded.setdefault(layout, []).append(name)
        layouts.setdefault(layout, gpus)
    for layout, names in folded.items():
        rows.append((fold(names), names, layouts[layout]))
    rows.sort(key=lambda row: (0 if any(h in row[1] for h, _ in bad) else 1, natural_key(row[0])))
    width = max(len(g) for _, _, g in rows)
    meters: dict[tuple[int, int], Meter] = {}
    labels: list[str] = []
    for i, (label, names, gpus) in enumerate(rows):
        labels.append(plain(label) + (f" \u00d7{len(names)}" if len(names) > 1 else ""))
        for j, gpu in enumerate(gpus):
            index = gpu.index if gpu.index is not None else j
            total = float(gpu.memory_total_bytes or 0)
            used = _used(gpu)
            if len(names) > 1:
                # A folded row shows the most used of its GPUs with that index.
                used_values = [_used(g) or 0.0 for n in names for g in per_host[n] if g.index == index]
                used = max(used_values) if used_values else used
            status = bad.get((names[0], index)) or bad.get((names[0], -1)) if len(names) == 1 else None
            css = f"st-{status}" if status else ""
            proc_text = ", ".join(
                f"pid {plain(p.get('pid'))} {plain(p.get('name') or '')}".strip()
                for p in (gpu.processes or [])[:4]
            )
            where = f"{plain(label)} GPU {index}" if len(names) == 1 else f"GPU {index} on {len(names)} nodes"
            used_text = "?" if used is None else gib(used)
            tip = f"{where}: {plain(gpu.name or 'GPU')}, {used_text} GiB used of {gib(total)} GiB"
            if len(names) > 1:
                tip += " (the most used of the group)"
            if proc_text:
                tip += f"; {proc_text}"
            if status:
                tip += f" — {LABELS[status]}"
            meters[(i, j)] = Meter(used or 0.0, total, css, used_text, tip)
    cols = [f"GPU {j}" for j in range(width)]
    figure: Figure = MeterGrid(labels, cols, meters, label="GPU memory in use per node and GPU")
    models = Counter(
        f"{plain(g.name or 'GPU')} {gib(g.memory_total_bytes or 0)} GiB"
        for gpus in per_host.values()
        for g in gpus
    )
    no_gpu = [h.name for h in hosts if not per_host.get(h.name)]
    caption = (
        "Each bar is one GPU: its length the GPU's memory, the filled part what is in use (GiB). "
        "Nodes whose GPUs are all free and alike share a row. "
        + "; ".join(f"{n}\u00d7 {m}" for m, n in models.most_common(3))
        + "."
    )
    if no_gpu:
        caption += f" No GPUs on {fold(no_gpu)}."
    legend = [
        Legend("in use", "meter-fill"),
        Legend("free", "meter-track"),
        Legend("named by a finding", "st-fail"),
    ]
    return [Chart("GPU memory", figure, caption=caption, legend=legend)]


PRESENTATION = Presentation(
    heading="GPU memory",
    about="every node has its GPUs, free and without memory faults",
    evidence=gpu_blocks,
    advice=advice_by_item(
        {
            "memory_free": "Stop the processes named (nvidia-smi on the node lists them) or wait "
            "for the other job before launching.",
            "ecc_errors": "Drain the node and reset the GPU; replace it if the errors return.",
            "remapped_rows": "Reset the GPU or reboot the node before the run; replace the GPU "
            "if row remapping failed.",
            "retired_pages": "Reboot the node before the run.",
            "gpu_count": "Check nvidia-smi and dmesg (Xid errors) on the node, and "
            "CUDA_VISIBLE_DEVICES; a lost GPU needs a reset or a reboot.",
            "memory_total": "A GPU in MIG mode, or another SKU: check nvidia-smi -q on the node.",
            "ecc_mode": "Enable ECC (nvidia-smi -e 1, then reboot) so that every GPU behaves alike.",
            "mig_mode": "Disable MIG on the nodes named (nvidia-smi -mig 0, then reset the GPUs), or run the "
            "job only where every GPU is alike.",
        }
    ),
)
