"""GPU firmware alike, part of the ``versions`` judge: the VBIOS and InfoROM image versions of like
GPUs compared between nodes, and every GPU's InfoROM validity.

Like is compared with like: GPUs are grouped by model (their name), and within a model each node's
firmware of a kind (VBIOS, InfoROM image) is the version all its GPUs of that model run. Nodes that
run another version than most nodes with that model are named, ``warn``; with no majority (two
nodes that differ, two against two) every node is named and the summary says no majority decides.
Nodes that reported no version (an old driver, no GPU) are left out of the comparison.

One root cause, one finding: a node is named once per model, with every kind it differs in. Nodes
that differ in the VBIOS only are ``gpu_vbios``, in the InfoROM image only ``gpu_inforom``, in both
``gpu_firmware`` (one finding each, per model, for the nodes of that kind). Where a kind has no
majority, the model's named nodes are one finding, each with all it runs.

A node whose GPUs of one model run different versions (a GPU swapped in from another batch) is
``gpu_firmware_mixed``, ``warn``, one finding per node and model naming the GPUs by index; it is not
compared with the other nodes for that kind.

A GPU whose InfoROM NVML found corrupted (``nvmlDeviceValidateInforom``; nvidia-smi exits 14,
"InfoROM is corrupted"; DCGM's Inforom test fails it) is ``gpu_inforom_corrupt``, ``fail``, one
finding per node naming the GPUs by index and serial; the node is drained.

Pure: typed facts in, findings out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from checks.versions.details import (
    CorruptGpu,
    FirmwareItem,
    FirmwareValues,
    GpuFirmwareDrift,
    GpuFirmwareMixed,
    InforomCorrupt,
)
from preflight.facts import GpuFacts, NodeFacts
from preflight.model import CheckResult
from preflight.nodeset import fold, group_by_value, minority

GpuVersions = dict[str, list[int]]  # version -> the indices of the GPUs that run it


@dataclass(frozen=True)
class Kind:
    """One kind of firmware: its key in the details, how a summary names it, how a GPU reports it."""

    key: str
    label: str
    read: Callable[[GpuFacts], str | None]


KINDS: tuple[Kind, ...] = (
    Kind("vbios", "VBIOS", lambda gpu: gpu.vbios_version),
    Kind("inforom", "InfoROM", lambda gpu: gpu.inforom_image),
)
# The item of a finding, by the kinds its nodes differ in.
_ITEMS: Mapping[tuple[str, ...], FirmwareItem] = {
    ("vbios",): "gpu_vbios",
    ("inforom",): "gpu_inforom",
    ("vbios", "inforom"): "gpu_firmware",
}


@dataclass(frozen=True)
class _Split:
    """One kind of firmware on one model's nodes: the version of each node whose GPUs agree, the
    majority among them and the nodes that differ from it, and the nodes whose GPUs disagree."""

    kind: Kind
    values: dict[str, str]
    majority: str | None
    odd: list[str]
    mixed: dict[str, GpuVersions]


def _gpu_index(gpu: GpuFacts, position: int) -> int:
    """The GPU's index, or its place in the node's list where the node did not say."""
    return gpu.index if gpu.index is not None else position


def _by_model(nodes: Mapping[str, NodeFacts]) -> dict[str, dict[str, list[tuple[int, GpuFacts]]]]:
    """model -> host -> that host's GPUs of the model, with their indices (GPUs without a name are
    left out: they cannot be compared with like GPUs)."""
    models: dict[str, dict[str, list[tuple[int, GpuFacts]]]] = {}
    for host, node in nodes.items():
        for position, gpu in enumerate(node.gpus or []):
            if gpu.name:
                models.setdefault(gpu.name, {}).setdefault(host, []).append((_gpu_index(gpu, position), gpu))
    return models


def _split(kind: Kind, gpus_by_host: Mapping[str, Sequence[tuple[int, GpuFacts]]]) -> _Split:
    values: dict[str, str] = {}
    mixed: dict[str, GpuVersions] = {}
    for host, gpus in gpus_by_host.items():
        versions: GpuVersions = {}
        for index, gpu in gpus:
            version = kind.read(gpu)
            if version is not None:
                versions.setdefault(version, []).append(index)
        if len(versions) == 1:
            values[host] = next(iter(versions))
        elif versions:
            mixed[host] = versions
    majority, odd = minority(values) if len(values) > 1 else (None, [])
    return _Split(kind, values, majority, odd, mixed)


def _gpus_text(indices: Sequence[int]) -> str:
    """``[3]`` -> "GPU 3"; ``[0, 1, 2, 4]`` -> "GPUs 0-2,4"."""
    ordered = sorted(set(indices))
    runs: list[str] = []
    start = previous = ordered[0]
    for index in [*ordered[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if index is not None:
            start = previous = index
    return f"GPU {runs[0]}" if len(ordered) == 1 else f"GPUs {','.join(runs)}"


def _side(splits: Sequence[_Split], host: str, labelled: bool) -> str:
    """What ``host`` runs of each kind it reported: "96.00.61.00.01", or "VBIOS 96.00.61.00.01 and
    InfoROM G520.0200.00.03"."""
    shown = [(s.kind.label, s.values[host]) for s in splits if host in s.values]
    return " and ".join(f"{label} {value}" if labelled else value for label, value in shown)


def _majority_side(splits: Sequence[_Split], labelled: bool) -> str:
    """The majority's versions and the nodes that run all of them: "96.00.A5.00.01 on node[1-2,4]"."""
    hosts = [h for h in splits[0].values if all(s.values.get(h) == s.majority for s in splits)]
    shown = " and ".join(f"{s.kind.label} {s.majority}" if labelled else str(s.majority) for s in splits)
    return f"{shown} on {fold(hosts)}"


def _drift_summary(model: str, splits: Sequence[_Split], hosts: Sequence[str]) -> str:
    lacking = [s for s in splits if s.majority is None]
    if not lacking:
        groups = group_by_value({h: _side(splits, h, labelled=True) for h in hosts})
        sides = "; ".join(f"{fold(group)}: {side}" for side, group in groups)
        whose = "its" if len(hosts) == 1 else "their"
        return f"{sides} on {whose} {model} GPUs, {_majority_side(splits, labelled=len(splits) > 1)}"
    groups = group_by_value({h: _side(splits, h, labelled=len(splits) > 1) for h in hosts})
    sides = "; ".join(f"{fold(group)}: {side}" for side, group in groups)
    labels = " and ".join(s.kind.label for s in splits)
    verb = "differs" if len(splits) == 1 else "differ"
    no_majority = "no majority" if len(lacking) == len(splits) else f"no majority for {lacking[0].kind.label}"
    kept = [s for s in splits if s.majority is not None]
    beside = f" ({_majority_side(kept, labelled=True)})" if kept else ""
    return f"{labels} {verb} on the {model} GPUs, {no_majority}: {sides}{beside}"


def _groups(splits: Sequence[_Split]) -> list[tuple[tuple[str, ...], list[str]]]:
    """The named nodes grouped by the kinds they differ in (VBIOS, InfoROM, both). Where a kind has
    no majority, every named node is in one group: no side is the odd one, so the nodes are shown
    together."""
    kinds_of: dict[str, tuple[str, ...]] = {}
    for split in splits:
        for host in split.odd:
            kinds_of[host] = (*kinds_of.get(host, ()), split.kind.key)
    if any(s.odd and s.majority is None for s in splits):
        return [(tuple(s.kind.key for s in splits if s.odd), list(kinds_of))]
    return group_by_value(kinds_of)


def _drift_findings(check: str, model: str, splits: Sequence[_Split]) -> list[CheckResult]:
    """One finding per set of kinds the named nodes differ in."""
    results: list[CheckResult] = []
    for kinds, hosts in _groups(splits):
        differing = [s for s in splits if s.kind.key in kinds]
        details: GpuFirmwareDrift = {
            "item": _ITEMS[kinds],
            "model": model,
            "firmware": {s.kind.key: _values(s) for s in differing},
        }
        summary = _drift_summary(model, differing, hosts)
        results.append(CheckResult(check, "warn", summary, tuple(hosts), details))
    return results


def _values(split: _Split) -> FirmwareValues:
    return {
        "majority": split.majority,
        "values": {version: hosts for version, hosts in group_by_value(split.values)},
    }


def _mixed_findings(check: str, model: str, splits: Sequence[_Split]) -> list[CheckResult]:
    """One finding per node whose GPUs of ``model`` run different versions, naming the GPUs."""
    results: list[CheckResult] = []
    hosts = list(dict.fromkeys(h for s in splits for h in s.mixed))
    for host in hosts:
        parts: list[str] = []
        gpus: dict[str, GpuVersions] = {}
        for split in splits:
            versions = split.mixed.get(host)
            if versions is None:
                continue
            gpus[split.kind.key] = versions
            # The fewest GPUs first: the odd one out leads.
            ordered = sorted(versions.items(), key=lambda item: (len(item[1]), item[0]))
            shown = ", ".join(f"{version} on {_gpus_text(indices)}" for version, indices in ordered)
            parts.append(f"{split.kind.label} {shown}")
        details: GpuFirmwareMixed = {"item": "gpu_firmware_mixed", "model": model, "node": host, "gpus": gpus}
        summary = f"{host}: its {model} GPUs run different firmware: {'; '.join(parts)}"
        results.append(CheckResult(check, "warn", summary, (host,), details))
    return results


def _corrupt_findings(check: str, nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """One failure per node with a GPU whose InfoROM NVML found corrupted."""
    results: list[CheckResult] = []
    for host, node in nodes.items():
        corrupt = [
            (_gpu_index(gpu, position), gpu.serial)
            for position, gpu in enumerate(node.gpus or [])
            if gpu.inforom_valid is False
        ]
        if not corrupt:
            continue
        named = [f"GPU {index}" + (f" (serial {serial})" if serial else "") for index, serial in corrupt]
        gpus: list[CorruptGpu] = [{"index": index, "serial": serial} for index, serial in corrupt]
        details: InforomCorrupt = {
            "item": "gpu_inforom_corrupt",
            "node": host,
            "gpus": gpus,
            "action": "drain",
        }
        subject = "the InfoROM of" if len(corrupt) == 1 else "the InfoROMs of"
        verb = "is" if len(corrupt) == 1 else "are"
        summary = f"{host}: {subject} {', '.join(named)} {verb} corrupted (NVML's InfoROM validation fails)"
        results.append(CheckResult(check, "fail", summary, (host,), details))
    return results


def judge_gpu_firmware(nodes: Mapping[str, NodeFacts], check: str) -> list[CheckResult]:
    """The ``check``'s findings on the GPUs' firmware: corrupted InfoROMs first, then, per model,
    the nodes whose firmware differs from the others' and the nodes whose GPUs disagree."""
    results = _corrupt_findings(check, nodes)
    for model, gpus_by_host in _by_model(nodes).items():
        splits = [_split(kind, gpus_by_host) for kind in KINDS]
        results.extend(_drift_findings(check, model, splits))
        results.extend(_mixed_findings(check, model, splits))
    return results
