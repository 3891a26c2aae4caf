"""Blocked ports, named by who failed to reach them and who reached them (pure).

Each ``node:port`` is judged on its sources' results. A port that every source failed, or that
two or more failed and no more reached, is named on its node (``probe``): its port is closed
there. A port that one source failed while another reached it, or that fewer sources failed
than reached it, is named on the sources that failed (``cannot_reach``): the path out of them
(their outbound firewall, their route, or a rule on the target against their address alone) is
what drops them. A source is named once for every port it failed so: one root cause, one
finding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from checks.ports.details import NAME, CannotReachDetails, ProbeRecord, UnreachedPort
from preflight.findings import finding
from preflight.model import CheckResult
from preflight.nodeset import fold, natural_key
from preflight.status import Status

_HOW = {
    "dropped": "dropped (no answer: a firewall DROP rule, or a wrong route?)",
    "refused": "refused (nothing listens there, or a firewall REJECT rule)",
    "unreachable": "unreachable (no route to the node)",
    "error": "failed",
}
# How a connection failed, in a word, where a finding lists several ports.
_SHORT = {"unreachable": "no route", "error": "failed"}


@dataclass(frozen=True)
class ProbedPort:
    """One target's port and every source's result on it."""

    to: str
    port: int
    kind: str
    failed: dict[str, str]  # source -> how its connections failed
    reached: tuple[str, ...]

    @property
    def sources_at_fault(self) -> bool:
        """Whether the sources that failed are to blame rather than the target: some source
        reached the port, and one source failed, or fewer failed than reached it (with three
        nodes a port is probed from two: one failing and one reaching names the one failing)."""
        failed, reached = len(self.failed), len(self.reached)
        return reached > 0 and (failed == 1 or failed < reached)

    def entry(self) -> UnreachedPort:
        return {
            "to": self.to,
            "port": self.port,
            "kind": self.kind,
            "failed": dict(self.failed),
            "reached": list(self.reached),
        }


def probed_ports(probes: Iterable[ProbeRecord]) -> list[ProbedPort]:
    """Every probed ``node:port`` with a failure, its sources split into failed and reached."""
    kinds: dict[tuple[str, int], str] = {}
    failed: dict[tuple[str, int], dict[str, str]] = {}
    reached: dict[tuple[str, int], list[str]] = {}
    for p in probes:
        key = (p["to"], p["port"])
        kinds[key] = p["kind"]
        if p["status"] == "open":
            reached.setdefault(key, []).append(p["from"])
        else:
            failed.setdefault(key, {})[p["from"]] = p["status"]
    return [
        ProbedPort(
            to, port, kinds[(to, port)], how, tuple(sorted(reached.get((to, port), []), key=natural_key))
        )
        for (to, port), how in sorted(failed.items(), key=lambda item: (natural_key(item[0][0]), item[0][1]))
    ]


def _blocks_job(port: ProbedPort, master: str) -> bool:
    return port.kind == "rendezvous" and port.to == master


def _status(ports: Iterable[ProbedPort], master: str) -> Status:
    """A failure where the job needs the port (the master's rendezvous port, an ephemeral or a
    job port); a warning for another node's rendezvous port only."""
    needed = any(p.kind != "rendezvous" or _blocks_job(p, master) for p in ports)
    return "fail" if needed else "warn"


def on_targets(ports: Sequence[ProbedPort], live: Sequence[str], master: str) -> list[CheckResult]:
    """A ``probe`` finding for each port its sources are not to blame for, and how it failed, named
    on its node; the few sources that reached it, if any, are said."""
    findings: list[CheckResult] = []
    rows = [(port, how) for port in ports if not port.sources_at_fault for how in set(port.failed.values())]
    for port, how in sorted(rows, key=lambda row: (natural_key(row[0].to), row[0].port, row[1])):
        sources = sorted((s for s, h in port.failed.items() if h == how), key=natural_key)
        others = sorted((n for n in live if n != port.to), key=natural_key)
        where = "every other node" if sources == others and len(others) > 1 else fold(sources)
        label = {
            "rendezvous": "the master's rendezvous port"
            if _blocks_job(port, master)
            else "the rendezvous port",
            "ephemeral": "an ephemeral port (NCCL and gloo connect on these)",
            "extra": "a job port",
        }[port.kind]
        summary = f"{port.to}:{port.port} ({label}) is {_HOW.get(how, how)} from {where}"
        if port.reached:
            summary += f"; {_reach(port.reached)} it"
        elif len(port.failed) == 1:
            summary += ", the only node that probed it: the block may be on either end"
        details = {
            "item": "probe",
            "to": port.to,
            "port": port.port,
            "kind": port.kind,
            "how": how,
            "sources": sources,
            "reached": list(port.reached),
            "blocks_job": _blocks_job(port, master),
        }
        findings.append(finding(NAME, _status([port], master), summary, [port.to], details))
    return findings


def _reach(nodes: Sequence[str]) -> str:
    return f"{fold(nodes)} {'reaches' if len(nodes) == 1 else 'reach'}"


def _and(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _which(ports: Sequence[ProbedPort], master: str) -> str:
    """The ports, targets folded: the master's rendezvous port first, then by port number,
    then the ephemeral ports (each node's own)."""
    groups: dict[tuple[int, int], list[ProbedPort]] = {}
    for p in ports:
        key = (0, p.port) if _blocks_job(p, master) else (2, 0) if p.kind == "ephemeral" else (1, p.port)
        groups.setdefault(key, []).append(p)
    phrases = []
    for (order, number), group in sorted(groups.items()):
        targets = fold(p.to for p in group)
        if order == 0:
            phrases.append(f"the master's rendezvous port {targets}:{number}")
        elif order == 2:
            one = group[0]
            phrases.append(
                f"{one.to}'s ephemeral port {one.port}"
                if len(group) == 1
                else f"the ephemeral ports of {targets}"
            )
        else:
            phrases.append(f"{targets}:{number}" if len(group) == 1 else f"port {number} on {targets}")
    return _and(phrases)


def _what(failures: Sequence[tuple[ProbedPort, str]], master: str) -> str:
    """The ports a source failed, by how: ``node1:29500 (dropped) and node2:29500 (refused)``."""
    by_how: dict[str, list[ProbedPort]] = {}
    for port, how in failures:
        by_how.setdefault(how, []).append(port)
    return _and([f"{_which(ports, master)} ({_SHORT.get(how, how)})" for how, ports in by_how.items()])


# The ports a source failed, and how.
Failures = list[tuple[ProbedPort, str]]


@dataclass(frozen=True)
class _BlockedSources:
    """Sources named in one finding: those that failed the same ports the same way, or two that
    fail only toward each other (``each_other``: the link between them)."""

    sources: list[str]
    failures: Failures
    each_other: bool = False


def _only_peer(source: str, by_source: Mapping[str, Failures]) -> str | None:
    """The one node a source failed toward, where it failed toward one only."""
    targets = {port.to for port, _ in by_source[source]}
    return next(iter(targets)) if len(targets) == 1 else None


def _blocked_sources(ports: Sequence[ProbedPort]) -> list[_BlockedSources]:
    by_source: dict[str, Failures] = {}
    for port in ports:
        if port.sources_at_fault:
            for source, how in port.failed.items():
                by_source.setdefault(source, []).append((port, how))
    alike: dict[tuple[tuple[str, int, str], ...], list[str]] = {}
    for source, failures in by_source.items():
        alike.setdefault(tuple(sorted((p.to, p.port, how) for p, how in failures)), []).append(source)
    groups = sorted(
        (sorted(sources, key=natural_key) for sources in alike.values()), key=lambda g: natural_key(g[0])
    )
    alone = {group[0] for group in groups if len(group) == 1}
    culprits: list[_BlockedSources] = []
    named: set[str] = set()
    for group in groups:
        if named.intersection(group):
            continue
        peer = _only_peer(group[0], by_source) if len(group) == 1 else None
        if peer is not None and peer in alone - named and _only_peer(peer, by_source) == group[0]:
            culprits.append(
                _BlockedSources([group[0], peer], by_source[group[0]] + by_source[peer], each_other=True)
            )
        else:
            culprits.append(_BlockedSources(group, by_source[group[0]]))
        named.update(culprits[-1].sources)
    return culprits


def _cannot_reach(culprits: _BlockedSources, master: str) -> str:
    """``node3 cannot reach node1:29500 (dropped); node2 reaches it: look at ...``."""
    unreached = [port for port, _ in culprits.failures]
    if len(unreached) == 1:
        reach = f"{_reach(unreached[0].reached)} it"
    elif all(set(p.failed) <= set(culprits.sources) for p in unreached):
        reach = "the other nodes reach them"
    else:
        reach = "other nodes reach each of them"
    if culprits.each_other:
        a, b = culprits.sources
        ways = ", ".join(
            f"{_what([f for f in culprits.failures if f[0].to == to], master)} from {source}"
            for source, to in ((a, b), (b, a))
        )
        return (
            f"{a} and {b} cannot reach each other: {ways}; {reach}: "
            "look at the firewall or route between them"
        )
    who = fold(culprits.sources)
    targets = fold(sorted({p.to for p in unreached}, key=natural_key))
    return (
        f"{who} cannot reach {_what(culprits.failures, master)}; {reach}: "
        f"look at {who}'s outbound firewall or route to {targets}"
    )


def on_sources(ports: Sequence[ProbedPort], master: str) -> list[CheckResult]:
    """A ``cannot_reach`` finding for the sources that failed ports the other sources reached,
    named on those sources: every port each failed, and who reached each."""
    findings: list[CheckResult] = []
    for culprits in _blocked_sources(ports):
        unreached = [port for port, _ in culprits.failures]
        details: CannotReachDetails = {
            "item": "cannot_reach",
            "sources": culprits.sources,
            "unreached": [p.entry() for p in unreached],
            "blocks_job": any(_blocks_job(p, master) for p in unreached),
        }
        summary = _cannot_reach(culprits, master)
        findings.append(finding(NAME, _status(unreached, master), summary, culprits.sources, dict(details)))
    return findings
