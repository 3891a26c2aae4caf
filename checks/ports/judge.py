"""The ``ports`` judge (pure): blocked ports from the observation (on their node, or on the few
nodes that could not reach them: :mod:`checks.ports.blocked`), ports a node could not listen on,
routes to the master that differ, and nodes with more peers on their subnet than their ARP table
keeps; and the typed details the report draws the matrix from.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from checks.ports.blocked import on_sources, on_targets, probed_ports
from checks.ports.details import NAME, NodeReport, PortsDetails, ProbeRecord
from preflight.facts import NodeFacts
from preflight.findings import finding
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold, group_by_value, minority
from preflight.status import Status

# Probes whose matrix is kept whole in the report; above this only the blocked ones are.
MATRIX_MAX_NODES = 64


@dataclass(frozen=True)
class PortsObservation:
    """What the nodes saw: plain data, kept in the report and judged by :func:`judge_ports`."""

    master: str  # inventory name of the master node ("" when it is not among the hosts)
    master_address: str
    port: int
    extra_ports: tuple[int, ...]
    nodes: Mapping[str, NodeReport]  # host -> what it reported when ready, or {"error": ...}
    probes: Sequence[ProbeRecord]


def _result(status: Status, summary: str, hosts: Sequence[str], **details: Any) -> CheckResult:
    return finding(NAME, status, summary, hosts, details)


def _cannot_listen(obs: PortsObservation) -> list[CheckResult]:
    """A finding for each port a node could not listen on: a failure on the master, else a warning."""
    findings: list[CheckResult] = []
    for name, node in obs.nodes.items():
        for port, state in (node.get("listening") or {}).items():
            if state == "ok":
                continue
            on_master = name == obs.master
            what = "the master's rendezvous port" if on_master and int(port) == obs.port else f"port {port}"
            status: Status = "fail" if on_master else "warn"
            summary = (
                f"{what} is already in use on {name}"
                if state == "in_use"
                else f"{name} cannot listen on port {port}: {state}"
            )
            if state == "in_use" and on_master:
                summary += ": another job (or a stale one) holds it; the training job could not start"
            findings.append(
                _result(
                    status,
                    summary,
                    [name],
                    item="listen",
                    port=int(port),
                    state=state,
                    blocks_job=on_master and int(port) == obs.port,
                )
            )
    return findings


def judge_ports(obs: PortsObservation) -> list[CheckResult]:
    findings: list[CheckResult] = []
    names = list(obs.nodes)
    for name, node in obs.nodes.items():
        if "error" in node:
            findings.append(_result("error", f"{name}: {node['error']}", [name], item="probe"))
    findings += _cannot_listen(obs)
    probed = probed_ports(obs.probes)
    live = [n for n in names if "error" not in obs.nodes[n]]
    findings += on_targets(probed, live, obs.master)
    findings += on_sources(probed, obs.master)
    findings.extend(_judge_routes(obs))
    # Notes (a route that could not be determined) fail nothing: shown after the findings or the pass.
    notes = [f for f in findings if f.is_note]
    findings = [f for f in findings if not f.is_note]
    details = _matrix(obs)
    if not any(f.status in ("fail", "warn", "error") for f in findings):
        open_count = sum(1 for p in obs.probes if p["status"] == "open")
        ports = ", ".join(str(p) for p in (obs.port, *obs.extra_ports))
        eph = " and an ephemeral port" if any(p["kind"] == "ephemeral" for p in obs.probes) else ""
        between = (
            f"between all {len(names)} nodes ({open_count} probes)" if len(names) > 1 else f"on {fold(names)}"
        )
        return [_result("pass", f"port {ports}{eph} open {between}", [], **details), *notes]
    # "port" is the rendezvous port the matrix was probed on, not the port a probe finding names.
    return [*with_check_details(findings, details, kept=("port",)), *notes]


def _judge_routes(obs: PortsObservation) -> list[CheckResult]:
    findings: list[CheckResult] = []
    routes = {n: node["route"] for n, node in obs.nodes.items() if node.get("route")}
    # A real "no route to the master" (or a master name that does not resolve) fails; a route the
    # node could not determine (no `ip` command, and the kernel could not be asked) is a note.
    failed = {n: r["error"] for n, r in routes.items() if r.get("error")}
    for error, hosts in group_by_value(failed):
        findings.append(_result("fail", f"{fold(hosts)}: {error}", hosts, item="route"))
    unknown = {
        n: str(why) for n, r in routes.items() if not r.get("error") and (why := r.get("undetermined"))
    }
    for why, hosts in group_by_value(unknown):
        details = {"item": "route", "undetermined": why}
        findings.append(CheckResult.note(NAME, f"{fold(hosts)}: {why}", tuple(hosts), details))
    # Every node's interface toward the master, the master's own included: it reaches itself
    # over loopback, but reports the interface that holds its address (an older probe that
    # reported loopback is left out of the comparison).
    compared = {n: r for n, r in routes.items() if not r.get("error") and r.get("dev") not in (None, "lo")}
    for key, what in (("dev", "interface"), ("mtu", "MTU")):
        values = {n: r.get(key) for n, r in compared.items()}
        groups = group_by_value(values)
        if len(groups) > 1:
            text = "; ".join(f"{fold(hosts)}: {value}" for value, hosts in groups)
            _, odd = minority(values)  # with no majority, every node is named
            hint = " (set NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME per node)" if key == "dev" else ""
            findings.append(
                _result(
                    "warn",
                    f"the route to the master {obs.master_address} uses different {what}s: {text}{hint}",
                    odd,
                    item="route",
                    key=key,
                )
            )
    return findings


GC_THRESH3 = "net.ipv4.neigh.default.gc_thresh3"


def judge_neighbour_limits(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Nodes with more peers on their own subnets than their kernel keeps ARP entries for.

    A job's all-to-all traffic makes every node resolve every peer on its layer-2 network;
    past ``gc_thresh3`` the kernel refuses new neighbours and those peers look unreachable.
    Peers are counted from the addresses the nodes report, grouped by subnet.
    """
    members: dict[ipaddress.IPv4Network, set[str]] = {}
    networks: dict[str, set[ipaddress.IPv4Network]] = {}
    for host, node in nodes.items():
        for interface in node.interfaces:
            for address in interface.addresses:
                try:
                    network = ipaddress.ip_interface(address).network
                except ValueError:
                    continue
                if (
                    isinstance(network, ipaddress.IPv4Network)
                    and not network.is_loopback
                    and network.prefixlen < 32
                ):
                    members.setdefault(network, set()).add(host)
                    networks.setdefault(host, set()).add(network)
    crowded: dict[tuple[int, int], list[str]] = {}
    for host, node in nodes.items():
        limit = node.sysctl.get(GC_THRESH3)
        if not isinstance(limit, int):
            continue
        peers = len(set().union(*(members[n] for n in networks.get(host, ()))) - {host})
        if peers > limit:
            crowded.setdefault((peers, limit), []).append(host)
    return [
        _result(
            "warn",
            f"{fold(hosts)}: {peers:,} peers on the same subnet, more than {GC_THRESH3} = {limit:,}: "
            "under a job's all-to-all traffic the kernel refuses new ARP entries and some peers "
            "look unreachable; raise gc_thresh1/2/3",
            hosts,
            item="neighbours",
            peers=peers,
            gc_thresh3=limit,
        )
        for (peers, limit), hosts in sorted(crowded.items())
    ]


def _matrix(obs: PortsObservation) -> PortsDetails:
    details: PortsDetails = {"master": obs.master, "master_address": obs.master_address, "port": obs.port}
    kept = ("listening", "ephemeral", "route", "error")
    details["nodes"] = {
        n: cast(NodeReport, {k: v for k, v in node.items() if k in kept}) for n, node in obs.nodes.items()
    }
    if len(obs.nodes) <= MATRIX_MAX_NODES:
        matrix: dict[str, dict[str, dict[str, str]]] = {}
        for p in obs.probes:
            matrix.setdefault(p["from"], {}).setdefault(p["to"], {})[p["kind"]] = p["status"]
        details["matrix"] = matrix
    details["blocked"] = [p.copy() for p in obs.probes if p["status"] != "open"]
    return details
