"""What a run leaves in the store: the run, every node with its versions, every part by its stable
identity, each finding under a stable key, each GPU's compute rate, each node's bus bandwidth and
each tested pair's bus bandwidth.

A node is kept under its identity (:mod:`preflight.identity`: what the node is, read on the node),
with the name that reached it in this run beside it; every row below names the node by its identity.
A finding's key is ``check/entity/cause``: the check, the node it names (or the whole run, ``*``,
for a finding that names none) and its ``details.item`` (``details.cause`` for ``connect``). The
part a finding is about is found where the finding names it: a slow GPU's serial in the compute
check's ranks, or a part's identity (serial, UUID, PCI address, GUID) anywhere in its details.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from preflight.identity import Clash, Identity, identities
from preflight.model import CheckResult, HostReport, RunReport

# The statuses kept as findings: the problems (a pass, and so a note, is not kept).
KEPT_STATUSES = ("fail", "error", "warn")
WHOLE_RUN = "*"


@dataclass(frozen=True)
class RunInfo:
    """What the report itself does not say: the inventory it checked, the profile, --local."""

    inventory: str
    profile: str
    local: bool
    report: str = ""  # where the run's JSON report was written (an absolute path), if it was


@dataclass(frozen=True)
class Part:
    node: str
    kind: str  # "gpu", "hca", "nic"
    part: str  # the stable identity: GPU serial (UUID), HCA node GUID:port (device:port), NIC MAC
    slot: str  # where it sits in the node: GPU index, HCA device/port, interface name
    uuid: str | None = None
    pci: str | None = None
    rate: str | None = None  # an HCA port's rate ("400 Gb/sec (4X NDR)")


@dataclass(frozen=True)
class Finding:
    key: str
    check: str
    entity: str
    cause: str
    status: str
    node: str
    part: str | None
    summary: str


def versions_of(host: HostReport) -> dict[str, str]:
    """The versions a node runs: driver, CUDA, cuDNN, NCCL, torch, Python (those it reported)."""
    facts = host.node
    found: dict[str, str | None] = {"driver": facts.driver_version, "python": facts.python_version}
    torch = facts.raw.get("torch")
    if isinstance(torch, Mapping):
        for name, key in (("torch", "version"), ("cuda", "cuda"), ("cudnn", "cudnn"), ("nccl", "nccl")):
            value = torch.get(key)
            found[name] = str(value) if value not in (None, "") else None
    return {k: v for k, v in found.items() if v}


def parts_of(host: HostReport, node: str | None = None) -> list[Part]:
    """The node's GPUs, HCA ports and NICs, each by its stable identity where the facts carry one:
    a GPU's serial (UUID), an HCA port's node GUID and port number, a NIC's MAC; else by the node
    (``node``: its identity, the host's name by default) and where the part sits."""
    node = node or host.name
    parts: list[Part] = []
    for gpu in host.node.gpus or []:
        pci = gpu.raw.get("pci_bus_id")
        identity = gpu.serial or gpu.uuid or (f"{node}:{pci}" if pci else None)
        if identity is None:
            continue
        slot = str(gpu.index) if gpu.index is not None else ""
        parts.append(Part(node, "gpu", identity, slot, gpu.uuid, str(pci) if pci else None))
    for port in host.node.ib_ports:
        slot = f"{port.device}/{port.port}"
        identity = f"{port.node_guid}/{port.port}" if port.node_guid else f"{node}:{slot}"
        parts.append(Part(node, "hca", identity, slot, rate=port.rate))
    for interface in host.node.interfaces:
        # A NIC is a PCI device with a hardware address; virtual interfaces (bridges, veth) are no part.
        if interface.pcie is not None and interface.mac and interface.mac.strip("0:"):
            parts.append(Part(node, "nic", interface.mac, interface.name))
    return parts


def _records(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def cause_of(result: CheckResult) -> str:
    for key in ("item", "cause"):
        value = result.details.get(key)
        if isinstance(value, str) and value:
            return value
    return result.status


def finding_key(check: str, entity: str, cause: str) -> str:
    return f"{check}/{entity}/{cause}"


def findings_of(
    result: CheckResult, parts: Mapping[str, Sequence[Part]], keys: Mapping[str, str] | None = None
) -> list[Finding]:
    """One row per node the finding names (one for the whole run when it names none), under the
    node's identity (``keys``: name that reached it -> identity); notes and passes are not kept."""
    if result.status not in KEPT_STATUSES:
        return []
    cause = cause_of(result)
    keys = keys or {}
    nodes = tuple(keys.get(host, host) for host in result.hosts) or (WHOLE_RUN,)
    named = _named_parts(result, parts, keys)
    return [
        Finding(
            key=finding_key(result.check, node, cause),
            check=result.check,
            entity=node,
            cause=cause,
            status=result.status,
            node=node,
            part=named.get(node),
            summary=result.summary,
        )
        for node in nodes
    ]


def _named_parts(
    result: CheckResult, parts: Mapping[str, Sequence[Part]], keys: Mapping[str, str]
) -> dict[str, str]:
    """Node (identity) -> the one part of that node the finding is about, where it names exactly one."""
    named: dict[str, str] = {}
    ranks = result.details.get("ranks")
    ratio = result.details.get("slow_ratio")
    if isinstance(ranks, list) and isinstance(ratio, int | float):  # a burn's ranks: the slow GPUs
        slow: dict[str, set[str]] = {}
        for rank in _records(ranks):
            host, serial, own = rank.get("host"), rank.get("gpu_serial"), rank.get("ratio")
            if host in result.hosts and serial and isinstance(own, int | float) and own < ratio:
                slow.setdefault(keys.get(str(host), str(host)), set()).add(str(serial))
        return {host: next(iter(s)) for host, s in slow.items() if len(s) == 1}
    text = json.dumps({k: v for k, v in result.details.items() if k != "ranks"}) + " " + result.summary
    for host in result.hosts:
        node = keys.get(host, host)
        found = {
            p.part
            for p in parts.get(node, ())
            if any(ident and _mentions(text, ident) for ident in (p.part, p.uuid, p.pci))
        }
        if len(found) == 1:
            named[node] = found.pop()
    return named


def _mentions(text: str, identity: str) -> bool:
    return re.search(rf"(?<![\w:]){re.escape(identity)}(?![\w])", text) is not None


# The metrics of the rates table.
TFLOPS = "tflops"  # one GPU's compute rate; part: the GPU's identity
BUSBW = "busbw"  # a node's bus bandwidth (GB/s); part: ""
PAIR_BUSBW = "pair_busbw"  # a pair's bus bandwidth (GB/s); node and part: the pair's names, sorted


@dataclass(frozen=True)
class Rate:
    metric: str  # TFLOPS, BUSBW or PAIR_BUSBW
    node: str
    part: str
    value: float


def rates_of(
    results: Iterable[CheckResult], parts: Mapping[str, Sequence[Part]], keys: Mapping[str, str] | None = None
) -> list[Rate]:
    """Each GPU's compute rate (TFLOPS) from a burn's ranks, each node's bus bandwidth (GB/s): the
    median of the first pair tests it took part in, and each tested pair's bus bandwidth; nodes by
    their identities (``keys``: name that reached it -> identity)."""
    keys = keys or {}
    rates: list[Rate] = []
    for result in results:
        # Read by the shape of the details: a burn's ranks with their rates, pair tests with busbw.
        rates.extend(_compute_rates(result, parts, keys))
        rates.extend(_busbw_rates(result, keys))
        rates.extend(_pair_rates(result, keys))
    return rates


def _compute_rates(
    result: CheckResult, parts: Mapping[str, Sequence[Part]], keys: Mapping[str, str]
) -> list[Rate]:
    rates = []
    for rank in _records(result.details.get("ranks")):
        host, flops = rank.get("host"), rank.get("flops_per_s")
        if not isinstance(host, str) or not isinstance(flops, int | float):
            continue
        node = keys.get(host, host)
        part = rank.get("gpu_serial") or _gpu_at(parts.get(node, ()), rank.get("gpu_index"))
        if part:
            rates.append(Rate(TFLOPS, node, str(part), float(flops) / 1e12))
    return rates


def _gpu_at(parts: Sequence[Part], index: Any) -> str | None:
    if index is None:
        return None
    return next((p.part for p in parts if p.kind == "gpu" and p.slot == str(index)), None)


def _busbw_rates(result: CheckResult, keys: Mapping[str, str]) -> list[Rate]:
    per_node: dict[str, list[float]] = {}
    for test in _records(result.details.get("pairs")):
        busbw = test.get("busbw_gbps")
        if test.get("retest") or not isinstance(busbw, int | float):
            continue
        for node in test.get("nodes") or []:
            per_node.setdefault(keys.get(str(node), str(node)), []).append(float(busbw))
    if not per_node:
        return [Rate(BUSBW, node, "", busbw) for node, busbw in _two_node_sweep(result, keys).items()]
    return [Rate(BUSBW, node, "", _median(values)) for node, values in per_node.items()]


def _two_node_sweep(result: CheckResult, keys: Mapping[str, str]) -> dict[str, float]:
    """Two nodes are one pair, which the sweep measures whole: its largest size, when it reached
    it, is each node's bus bandwidth (a pair test of theirs in a larger run is the same traffic)."""
    nodes, rows = result.details.get("nodes"), _records(result.details.get("sweep"))
    if not isinstance(nodes, list) or len(nodes) != 2 or not rows or not result.details.get("sweep_complete"):
        return {}
    busbw = rows[-1].get("busbw_gbps")
    if not isinstance(busbw, int | float) or busbw <= 0:
        return {}
    return {keys.get(str(node), str(node)): float(busbw) for node in nodes}


def _pair_rates(result: CheckResult, keys: Mapping[str, str]) -> list[Rate]:
    """Each pair's fastest test in the run, its first test or a re-test: a busy fabric or busy
    machines only ever slow a test down (the judge, too, takes a pair's best test for its floor
    and its nodes' ratios), so a control pair re-tested in a slowed wave, or a pair slow once by
    chance, keeps its own rate, and a pair slow in every test stays slow."""
    best: dict[tuple[str, str], float] = {}
    for test in _records(result.details.get("pairs")):
        busbw, nodes = test.get("busbw_gbps"), test.get("nodes")
        if not isinstance(busbw, int | float) or not isinstance(nodes, list) or len(nodes) != 2:
            continue
        first, second = sorted(keys.get(str(node), str(node)) for node in nodes)
        if first != second:
            best[(first, second)] = max(float(busbw), best.get((first, second), float(busbw)))
    return [Rate(PAIR_BUSBW, first, second, value) for (first, second), value in sorted(best.items())]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(frozen=True)
class RunRecord:
    """A run as rows, ready to be written."""

    started_at: str
    info: RunInfo
    verdict: str
    tool_version: str
    hosts: tuple[HostReport, ...]
    parts: dict[str, list[Part]]  # by node identity
    findings: list[Finding]
    rates: list[Rate]
    identities: dict[str, Identity]  # by the name that reached the node
    clashes: tuple[Clash, ...] = ()

    @property
    def keys(self) -> dict[str, str]:
        """Name that reached a node -> its identity."""
        return {name: identity.key for name, identity in self.identities.items()}

    @property
    def names(self) -> dict[str, str]:
        """Identity -> the name that reached the node in this run (what the report calls it)."""
        return {identity.key: name for name, identity in self.identities.items()}

    def key(self, host: str) -> str:
        identity = self.identities.get(host)
        return identity.key if identity else host


def record_of(report: RunReport, info: RunInfo, known: Mapping[str, Identity] | None = None) -> RunRecord:
    """The run as rows, each node under its identity: decided from its facts
    (:func:`preflight.identity.identities`), or ``known``'s where given (the store's, for a node
    not reached this time)."""
    found, clashes = identities({h.name: h.facts if h.reachable else None for h in report.hosts})
    found.update(known or {})
    keys = {name: identity.key for name, identity in found.items()}
    parts = {keys[h.name]: parts_of(h, keys[h.name]) for h in report.hosts if h.reachable}
    findings = [f for r in report.results for f in findings_of(r, parts, keys)]
    return RunRecord(
        started_at=report.started_at,
        info=info,
        verdict=report.verdict,
        tool_version=report.tool_version,
        hosts=report.hosts,
        parts=parts,
        findings=findings,
        rates=rates_of(report.results, parts, keys),
        identities=found,
        clashes=tuple(clashes),
    )
