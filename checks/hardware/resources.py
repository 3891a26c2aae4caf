"""Each node's memory, CPUs and local NVMe disks against the nodes of its kind: a node with less memory
than its peers (a DIMM the firmware mapped out, a channel down), fewer CPUs (cores offline, SMT off
in the BIOS, a socket that failed to come up) or fewer local NVMe disks of a model (one dead or
gone). NHC's and AzNHC's ``check_hw_physmem``, NHC's ``check_hw_cpuinfo`` and AzNHC's
``check_nvme_count`` check these against numbers a site writes down; here the other nodes are the
numbers.

Nodes are compared with nodes of their kind: the same CPU model and the same GPU model (or no GPU),
so that a login node or another server generation in the same run is not a peer. Memory, CPUs and
disks only go missing, so with two nodes the larger is the reference; with three or more, the kind's
median memory and its most common CPU and disk counts (the largest where two counts are as common).
Memory below the reference by more than :data:`MEMORY_TOLERANCE` is a warning (the job runs, with
less room for its data loaders and a slower node while it pages); the kernel's own reservations
(crash kernel, firmware ranges), which differ by a few hundred MiB between kernels and BIOS
versions, stay well inside it, and the smallest DIMM of a large node is outside it. A node with more
than its kind has is a note.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence

from checks.hardware.details import CpusDiffer, MemoryBelow, NvmeMissing
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.nodeset import fold
from preflight.units import capacity

NAME = "hardware"
# Memory below the kind's reference by more than this share is named: one DIMM of 32 is 3.1 %,
# and kernels and BIOS versions move MemTotal by well under 0.5 %.
MEMORY_TOLERANCE = 0.02
# NVMe models that are network volumes, not disks in the node: AWS's EBS volumes and Google's
# Persistent Disks on NVMe-attached machines.
NETWORK_VOLUMES = frozenset({"Amazon Elastic Block Store", "nvme_card-pd"})

Kind = tuple[str | None, str | None]  # CPU model, GPU model


def kind_of(node: NodeFacts) -> Kind:
    """What kind of node it is: its CPU model and its GPUs' model (None for none)."""
    names = Counter(g.name for g in node.gpus or [] if g.name)
    return (node.cpu_model, names.most_common(1)[0][0] if names else None)


def kinds_of(nodes: Mapping[str, NodeFacts]) -> dict[Kind, list[str]]:
    """The nodes by kind (:func:`kind_of`), in the order given."""
    kinds: dict[Kind, list[str]] = {}
    for host, node in nodes.items():
        kinds.setdefault(kind_of(node), []).append(host)
    return kinds


def _what(kind: Kind) -> str:
    cpu, gpu = kind
    return f"{cpu or 'same CPU'}" + (f", {gpu}" if gpu else "")


def _memory(hosts: Sequence[str], nodes: Mapping[str, NodeFacts], kind: Kind) -> list[CheckResult]:
    sizes = {h: size for h in hosts if (size := nodes[h].memory_total_bytes)}
    if len(sizes) < 2:
        return []
    reference = max(sizes.values()) if len(sizes) == 2 else statistics.median(sizes.values())
    results = []
    for host, size in sizes.items():
        peers = fold(h for h in sizes if h != host)
        if size < reference * (1 - MEMORY_TOLERANCE):
            details: MemoryBelow = {
                "item": "memory_below_peers",
                "node": host,
                "memory_bytes": int(size),
                "peers_bytes": int(reference),
            }
            summary = (
                f"{host}: {capacity(size)} of memory, {1 - size / reference:.0%} less than "
                f"{capacity(reference)} on {peers} ({_what(kind)})"
            )
            results.append(CheckResult(NAME, "warn", summary, (host,), details))
        elif size > reference * (1 + MEMORY_TOLERANCE):
            summary = f"{host}: {capacity(size)} of memory, more than {capacity(reference)} on {peers}"
            results.append(
                CheckResult.note(NAME, summary, (host,), {"item": "memory_above_peers", "node": host})
            )
    return results


def _cpus(hosts: Sequence[str], nodes: Mapping[str, NodeFacts], kind: Kind) -> list[CheckResult]:
    counts = {h: count for h in hosts if (count := nodes[h].cpu_count)}
    if len(counts) < 2:
        return []
    reference = _usual(counts)
    results = []
    for host, count in counts.items():
        if count == reference:
            continue
        peers = fold(h for h, c in counts.items() if c == reference)
        details: CpusDiffer = {
            "item": "cpus_below_peers",
            "node": host,
            "cpus": count,
            "peers_cpus": reference,
        }
        if count < reference:
            summary = (
                f"{host}: {count} CPUs online where {peers} have {reference} ({_what(kind)}): "
                "cores offline, SMT off, or a socket missing"
            )
            results.append(CheckResult(NAME, "warn", summary, (host,), details))
        else:
            summary = f"{host}: {count} CPUs online, more than the {reference} of {peers}"
            results.append(CheckResult.note(NAME, summary, (host,), {**details, "item": "cpus_above_peers"}))
    return results


def _usual(counts: Mapping[str, int]) -> int:
    """The count most nodes have; where none is the most common, the largest (parts only go
    missing)."""
    common = Counter(counts.values()).most_common(2)
    tied = len(common) > 1 and common[0][1] == common[1][1]
    return max(counts.values()) if tied else common[0][0]


def _nvme(hosts: Sequence[str], nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Local NVMe disks of each model: a node with fewer than its kind (a disk dead or gone) is named.
    Network volumes that show as NVMe (:data:`NETWORK_VOLUMES`) are left out: their count is
    what each node was given, not what it has."""
    models = {h: m for h in hosts if (m := nodes[h].nvme_models) is not None}
    if len(models) < 2:
        return []
    local = {h: Counter(m for m in found if m not in NETWORK_VOLUMES) for h, found in models.items()}
    missing: dict[str, list[tuple[str, int, int]]] = {}
    for model in sorted({m for found in local.values() for m in found}):
        counts = {h: found[model] for h, found in local.items()}
        reference = _usual(counts)
        for host, count in counts.items():
            if count < reference:
                missing.setdefault(host, []).append((model, count, reference))
    results = []
    for host, short in missing.items():
        peers = fold(h for h in local if h not in missing)
        shown = "; ".join(
            f"{count} {model or 'NVMe'} where {peers or 'its peers'} have {usual}"
            for model, count, usual in short
        )
        details: NvmeMissing = {
            "item": "nvme_missing",
            "node": host,
            "models": [{"model": m, "count": c, "peers_count": u} for m, c, u in short],
        }
        results.append(CheckResult(NAME, "warn", f"{host}: local NVMe disks {shown}", (host,), details))
    return results


def judge_resources(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Memory, CPUs and local NVMe disks of each node against the nodes of its kind (the same CPU
    and GPU models)."""
    results: list[CheckResult] = []
    for kind, hosts in kinds_of(nodes).items():
        results += _memory(hosts, nodes, kind) + _cpus(hosts, nodes, kind) + _nvme(hosts, nodes)
    return results
