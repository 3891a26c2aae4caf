"""``ports``: can every node reach the others on the ports the job needs?

Every node listens on the rendezvous port, the configured extra ports and one ephemeral
port (NCCL and gloo connect on such ports); then every node probes every other one. The
findings name each blocked ``node:port``, from where, and how: dropped, refused, in use.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from preflight.check import Check, CheckContext, HostSession, Probe
from preflight.deadline import Deadline
from preflight.model import CheckResult
from preflight.nodeset import fold, group_by_value, minority
from preflight.probes import start_node_script
from preflight.status import Status
from preflight.transport import HostUnavailable, RemoteProcess
from preflight.view import Presentation, advice_by_item

# Probes whose matrix is kept whole in the report; above this only the blocked ones are.
MATRIX_MAX_NODES = 64
_READY_S = 20.0
_HOW = {
    "dropped": "dropped (no answer: a firewall DROP rule, or a wrong route?)",
    "refused": "refused (nothing listens there, or a firewall REJECT rule)",
    "unreachable": "unreachable (no route to the node)",
    "error": "failed",
}


@dataclass(frozen=True)
class PortsObservation:
    """What the nodes saw: plain data, kept in the report and judged by :func:`judge_ports`."""

    master: str  # inventory name of the master node ("" when it is not among the hosts)
    master_address: str
    port: int
    extra_ports: tuple[int, ...]
    nodes: Mapping[str, Mapping[str, Any]]  # host -> what it reported when ready, or {"error": ...}
    probes: Sequence[Mapping[str, Any]]  # {"from", "to", "port", "kind", "status", "seconds"}


def master_of(ctx: CheckContext) -> tuple[str, str]:
    """(name, address) of the job's master: the config's address, or the first host."""
    configured = ctx.config.ports.master_addr
    for session in ctx.sessions:
        if not configured or configured in (session.spec.address, session.spec.name):
            return session.spec.name, configured or session.spec.address
    return "", configured


def _kind(port: int, obs_port: int, ephemeral: int | None) -> str:
    if port == obs_port:
        return "rendezvous"
    return "ephemeral" if port == ephemeral else "extra"


def observe_ports(ctx: CheckContext) -> PortsObservation:
    """Run the ports probe on every reachable node at once: listen, then probe each other."""
    cfg = ctx.config
    master, master_address = master_of(ctx)
    ports = [cfg.run.port, *cfg.ports.extra_ports]
    sessions = ctx.live_sessions
    setup = json.dumps({"ports": ports, "ephemeral": cfg.ports.probe_ephemeral, "master": master_address})
    budget = ctx.deadline.cap(_READY_S + 2 * cfg.ports.connect_timeout_s + 15)
    nodes: dict[str, dict[str, Any]] = {}
    processes: dict[str, RemoteProcess] = {}

    def start(session: HostSession) -> None:
        assert session.transport is not None
        name = session.spec.name
        try:
            process = start_node_script(
                session.transport, NODE_SCRIPT, python=cfg.run.python, args=(setup,), timeout_s=budget
            )
        except (HostUnavailable, OSError) as exc:
            nodes[name] = {"error": str(exc)}
            return
        processes[name] = process
        line = process.readline(ctx.deadline.sooner(_READY_S))
        if line is None or not line.startswith(b"READY "):
            result = process.wait(Deadline.after(2))
            nodes[name] = {"error": f"the ports probe did not start: {result.stderr_tail(2) or 'no answer'}"}
            processes.pop(name)
            return
        nodes[name] = json.loads(line[len(b"READY ") :])

    def probe(session: HostSession) -> list[dict[str, Any]]:
        name = session.spec.name
        process = processes[name]
        targets = [
            {
                "node": other.spec.name,
                "address": other.spec.address,
                "ports": ports + ([e] if (e := nodes[other.spec.name].get("ephemeral")) else []),
            }
            for other in sessions
            if other.spec.name != name and other.spec.name in processes
        ]
        try:
            process.write(
                f"GO {json.dumps({'targets': targets, 'timeout_s': cfg.ports.connect_timeout_s})}\n".encode()
            )
        except OSError as exc:
            nodes[name] = {**nodes[name], "error": str(exc)}
            return []
        line = process.readline(ctx.deadline.sooner(2 * cfg.ports.connect_timeout_s + 10))
        if line is None or not line.startswith(b"RESULT "):
            nodes[name] = {**nodes[name], "error": "the ports probe gave no result"}
            return []
        found = json.loads(line[len(b"RESULT ") :])["probes"]
        return [
            {
                "from": name,
                "to": p["node"],
                "port": p["port"],
                "kind": _kind(p["port"], cfg.run.port, nodes[p["node"]].get("ephemeral")),
                "status": p["status"],
                "seconds": p["seconds"],
            }
            for p in found
        ]

    probes: list[dict[str, Any]] = []
    with cf.ThreadPoolExecutor(max_workers=max(1, min(cfg.run.fanout, len(sessions)))) as pool:
        try:
            list(pool.map(start, sessions))
            ready = [s for s in sessions if s.spec.name in processes]
            for found in pool.map(probe, ready):
                probes.extend(found)
        finally:
            for process in processes.values():
                with contextlib.suppress(OSError):
                    process.close_stdin()
            list(pool.map(lambda p: p.wait(ctx.deadline.sooner(10)), processes.values()))
    # Threads finish in any order: report in inventory order, so that runs compare line by line.
    order = {s.spec.name: i for i, s in enumerate(sessions)}
    nodes = {name: nodes[name] for name in sorted(nodes, key=order.__getitem__)}
    probes.sort(key=lambda p: (order[p["from"]], order[p["to"]], p["port"]))
    return PortsObservation(
        master=master,
        master_address=master_address,
        port=cfg.run.port,
        extra_ports=tuple(cfg.ports.extra_ports),
        nodes=nodes,
        probes=probes,
    )


def _result(status: Status, summary: str, hosts: Sequence[str], **details: Any) -> CheckResult:
    return CheckResult(check="ports", status=status, summary=summary, hosts=tuple(hosts), details=details)


def judge_ports(obs: PortsObservation) -> list[CheckResult]:
    findings: list[CheckResult] = []
    names = list(obs.nodes)
    for name, node in obs.nodes.items():
        if "error" in node:
            findings.append(_result("error", f"{name}: {node['error']}", [name], item="probe"))

    # Ports a node could not listen on.
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

    # Blocked probes, grouped by (target, port, how) with their sources folded.
    blocked: dict[tuple[str, int, str, str], list[str]] = {}
    for p in obs.probes:
        if p["status"] != "open":
            blocked.setdefault((p["to"], p["port"], p["kind"], p["status"]), []).append(p["from"])
    for (target, port, kind, how), sources in sorted(blocked.items()):
        others = [n for n in names if n != target and "error" not in obs.nodes[n]]
        where = "every other node" if sorted(sources) == sorted(others) and len(others) > 1 else fold(sources)
        is_master_rdzv = target == obs.master and kind == "rendezvous"
        label = {
            "rendezvous": "the master's rendezvous port" if is_master_rdzv else "the rendezvous port",
            "ephemeral": "an ephemeral port (NCCL and gloo connect on these)",
            "extra": "a job port",
        }[kind]
        status = "warn" if kind == "rendezvous" and not is_master_rdzv else "fail"
        findings.append(
            _result(
                status,
                f"{target}:{port} ({label}) is {_HOW.get(how, how)} from {where}",
                [target],
                item="probe",
                to=target,
                port=port,
                kind=kind,
                how=how,
                sources=sorted(sources),
                blocks_job=is_master_rdzv,
            )
        )

    findings.extend(_judge_routes(obs))
    details = _matrix(obs)
    if not any(f.status in ("fail", "warn", "error") for f in findings):
        open_count = sum(1 for p in obs.probes if p["status"] == "open")
        ports = ", ".join(str(p) for p in (obs.port, *obs.extra_ports))
        eph = " and an ephemeral port" if any(p["kind"] == "ephemeral" for p in obs.probes) else ""
        between = (
            f"between all {len(names)} nodes ({open_count} probes)" if len(names) > 1 else f"on {fold(names)}"
        )
        return [_result("pass", f"port {ports}{eph} open {between}", [], **details)]
    first = findings[0]
    findings[0] = CheckResult(
        first.check, first.status, first.summary, first.hosts, {**first.details, **details}
    )
    return findings


def _judge_routes(obs: PortsObservation) -> list[CheckResult]:
    findings: list[CheckResult] = []
    routes = {n: node["route"] for n, node in obs.nodes.items() if node.get("route")}
    failed = {n: r["error"] for n, r in routes.items() if r.get("error")}
    for error, hosts in group_by_value(failed):
        findings.append(_result("fail", f"{fold(hosts)}: {error}", hosts, item="route"))
    # The master reaches itself over loopback: only the other nodes' routes are compared.
    remote = {n: r for n, r in routes.items() if not r.get("error") and not r.get("local")}
    for key, what in (("dev", "interface"), ("mtu", "MTU")):
        values = {n: r.get(key) for n, r in remote.items()}
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


def judge_neighbour_limits(facts: Mapping[str, Mapping[str, Any]]) -> list[CheckResult]:
    """Nodes with more peers on their own subnets than their kernel keeps ARP entries for.

    A job's all-to-all traffic makes every node resolve every peer on its layer-2 network;
    past ``gc_thresh3`` the kernel refuses new neighbours and those peers look unreachable.
    Peers are counted from the addresses the nodes report, grouped by subnet.
    """
    members: dict[ipaddress.IPv4Network, set[str]] = {}
    networks: dict[str, set[ipaddress.IPv4Network]] = {}
    for host, node in facts.items():
        for interface in (node.get("net") or {}).get("interfaces") or []:
            for address in interface.get("addresses") or []:
                try:
                    network = ipaddress.ip_interface(str(address)).network
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
    for host, node in facts.items():
        limit = (node.get("sysctl") or {}).get(GC_THRESH3)
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


def _matrix(obs: PortsObservation) -> dict[str, Any]:
    details: dict[str, Any] = {"master": obs.master, "master_address": obs.master_address, "port": obs.port}
    details["nodes"] = {
        n: {k: v for k, v in node.items() if k in ("listening", "ephemeral", "route", "error")}
        for n, node in obs.nodes.items()
    }
    if len(obs.nodes) <= MATRIX_MAX_NODES:
        matrix: dict[str, dict[str, dict[str, str]]] = {}
        for p in obs.probes:
            matrix.setdefault(p["from"], {}).setdefault(p["to"], {})[p["kind"]] = p["status"]
        details["matrix"] = matrix
    details["blocked"] = [dict(p) for p in obs.probes if p["status"] != "open"]
    return details


# The script each node runs: listen, probe its peers, report its route to the master.
NODE_SCRIPT = "checks.node.ports"

# The observation, made once: the training job reads the routes to the master from it.
OBSERVE = Probe("ports", observe_ports)


def routes(obs: PortsObservation) -> dict[str, Any]:
    """Each node's route to the master, by node name, where it reported one."""
    return {name: node["route"] for name, node in obs.nodes.items() if node.get("route")}


def run(ctx: CheckContext) -> list[CheckResult]:
    if not ctx.live_sessions:
        return [_result("skip", "no reachable host to probe", [])]
    return judge_ports(ctx.probe(OBSERVE)) + judge_neighbour_limits(ctx.facts())


PRESENTATION = Presentation(
    heading="Ports",
    about="the rendezvous, job and ephemeral ports are open between every pair of nodes",
    advice=advice_by_item(
        {
            "probe": "Open the port between the nodes named (firewall rule, security group), or fix the "
            "route; the job cannot rendezvous or connect otherwise.",
            "listen": "Find what holds the port on that node (ss -ltnp) and stop it, or run the job "
            "on another --port.",
            "route": "Pin the interface: set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME on every node.",
            "neighbours": "Raise net.ipv4.neigh.default.gc_thresh1/2/3 on the nodes named (sysctl, and "
            "in /etc/sysctl.d to keep it) above the number of peers on their subnet.",
        }
    ),
)

CHECK = Check(
    name="ports",
    title="rendezvous, job and ephemeral ports open between every pair of nodes; route to the master",
    run=run,
    presentation=PRESENTATION,
)
