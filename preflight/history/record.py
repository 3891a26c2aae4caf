"""What a run leaves in the store: the run, every node with its versions, every part by its stable
identity, each finding under a stable key, and the rates the checks declare (:mod:`preflight.measures`:
each GPU's compute rate, each node's and each tested pair's bus bandwidth).

A node is kept under its identity (:mod:`preflight.identity`: what the node is, read on the node),
with the name that reached it in this run beside it; every row below names the node by its identity.
A finding's key is ``check/entity/cause``: the check, the node it names (or the whole run, ``*``,
for a finding that names none) and its ``details.item`` (``details.cause`` for ``connect``). The
part a finding is about is the one its check declares it names (``Check.parts_named``), in the
facts' own terms (:class:`preflight.measures.PartRef`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from preflight.identity import Clash, Identity, identities
from preflight.measures import Measure, PartRef, Sample
from preflight.model import CheckResult, HostReport, RunReport
from preflight.node.hardware import pci_key
from preflight.registry import measures_of, parts_named_by

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
        # An all-zero GUID (an AWS EFA device's) identifies nothing: the port is known by its node.
        guid = port.node_guid if port.node_guid and port.node_guid.strip("0:") else None
        identity = f"{guid}/{port.port}" if guid else f"{node}:{slot}"
        parts.append(Part(node, "hca", identity, slot, rate=port.rate))
    for interface in host.node.interfaces:
        # A NIC is a PCI device with a hardware address; virtual interfaces (bridges, veth) are no part.
        if interface.pcie is not None and interface.mac and interface.mac.strip("0:"):
            parts.append(Part(node, "nic", interface.mac, interface.name))
    return parts


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
    """Node (identity) -> the one part of that node the finding is about, where it names exactly
    one, as its check declares (``Check.parts_named``: a burn's slow GPUs, a GPU's XIDs, a port's
    readings)."""
    declared = parts_named_by(result.check)
    if declared is None:
        return {}
    found: dict[str, set[str]] = {}
    for host, refs in declared(result).items():
        node = keys.get(host, host)
        found.setdefault(node, set()).update(
            identity for ref in refs if (identity := part_named(parts.get(node, ()), ref))
        )
    return {node: next(iter(named)) for node, named in found.items() if len(named) == 1}


def part_named(parts: Sequence[Part], ref: PartRef) -> str:
    """The identity the store keeps the node's part ``ref`` under; "" where none of ``parts`` is
    that one."""
    pci = pci_key(ref.pci) if ref.pci else ""
    for part in parts:
        if part.kind != ref.kind:
            continue
        if (
            (ref.identity and ref.identity in (part.part, part.uuid))
            or (ref.slot and ref.slot == part.slot)
            or (pci and part.pci and pci_key(part.pci) == pci)
        ):
            return part.part
    return ""


@dataclass(frozen=True)
class Rate:
    """One value of a rate a check declares it keeps (:mod:`preflight.measures`), in the store's
    terms: a node's by its identity (part ""), a GPU's by its node and its own identity, a pair's
    by its two nodes' identities, sorted (node, part)."""

    metric: str
    node: str
    part: str
    value: float


def rates_of(
    results: Iterable[CheckResult], parts: Mapping[str, Sequence[Part]], keys: Mapping[str, str] | None = None
) -> list[Rate]:
    """The rates the checks declare kept (``Check.measures``), read from their findings by their
    own readers; nodes by their identities (``keys``: name that reached it -> identity)."""
    keys = keys or {}
    rates: list[Rate] = []
    for result in results:
        for measure in measures_of(result.check):
            if measure.kept:
                rates.extend(_rates(measure, measure.read(result), parts, keys))
    return rates


def _rates(
    measure: Measure, samples: Sequence[Sample], parts: Mapping[str, Sequence[Part]], keys: Mapping[str, str]
) -> list[Rate]:
    if measure.entity == "pair":  # a pair's best, should two of its names be one node's
        best: dict[tuple[str, str], float] = {}
        for sample in samples:
            first, second = sorted(keys.get(name, name) for name in (sample.node, sample.part))
            if first != second:
                best[(first, second)] = max(sample.value, best.get((first, second), sample.value))
        return [Rate(measure.metric, first, second, value) for (first, second), value in sorted(best.items())]
    rates = []
    for sample in samples:
        node = keys.get(sample.node, sample.node)
        part = ""
        if measure.entity in ("gpu", "rail"):
            part = _part_of(sample.ref, parts.get(node, ()), measure.entity)
            if not part:
                continue
        rates.append(Rate(measure.metric, node, part, sample.value))
    return rates


def _part_of(ref: PartRef | None, parts: Sequence[Part], entity: str) -> str:
    """The identity a GPU's or a rail's value is kept under: its part's, as the node's facts know
    it; else a GPU's serial, and a rail's interface name or PCI address (a rail on an interface
    that is no network card, a veth or a bridge, is known by its name); "" for none."""
    if ref is None:
        return ""
    found = part_named(parts, ref) or ref.identity
    return found if entity == "gpu" else found or ref.slot or ref.pci


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
