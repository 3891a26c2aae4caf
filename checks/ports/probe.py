"""Observing the ports (I/O): every reachable node runs :mod:`checks.ports.node` at once,
listens on the job's ports, then probes every other node; the controller collects what each
saw into one :class:`~checks.ports.judge.PortsObservation`, made once per run (:data:`OBSERVE`).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import time
from dataclasses import dataclass, field

from checks.ports.details import NAME, NodeReport, ProbeRecord, Route
from checks.ports.judge import PortsObservation
from checks.ports.settings import PortsSection
from preflight.check import CheckContext, HostSession, Probe
from preflight.deadline import Deadline
from preflight.probes import start_node_script
from preflight.silence import NodeSilent, SilenceWatch, read_line
from preflight.transport import HostUnavailable, RemoteProcess

# The script each node runs: listen, probe its peers, report its route to the master.
NODE_SCRIPT = "checks.ports.node"

_READY_S = 20.0
# The phase a node silent here is named in.
DURING = "the ports probe"


def master_of(ctx: CheckContext) -> tuple[str, str]:
    """(name, address) of the job's master: the config's address, or the first host."""
    configured = ctx.config.section(PortsSection).master_addr
    for session in ctx.sessions:
        if not configured or configured in (session.spec.address, session.spec.name):
            return session.spec.name, configured or session.spec.address
    return "", configured


def _kind(port: int, obs_port: int, ephemeral: int | None) -> str:
    if port == obs_port:
        return "rendezvous"
    return "ephemeral" if port == ephemeral else "extra"


@dataclass
class _PortsRun:
    """One ports probe across the nodes: its settings, each node's process and what each reported."""

    ctx: CheckContext
    settings: PortsSection
    sessions: list[HostSession]
    ports: list[int]
    setup: str
    budget: float
    watch: SilenceWatch
    nodes: dict[str, NodeReport] = field(default_factory=dict)
    processes: dict[str, RemoteProcess] = field(default_factory=dict)
    silent: set[str] = field(default_factory=set)
    done: dict[str, float] = field(default_factory=dict)  # when each node's probes of the others ended


def _start_node(run: _PortsRun, session: HostSession) -> None:
    """Start the probe on one node and wait for it to listen (``READY``), noting why it did not."""
    assert session.transport is not None
    ctx, nodes = run.ctx, run.nodes
    name = session.spec.name
    try:
        process = start_node_script(
            session.transport,
            NODE_SCRIPT,
            python=ctx.config.run.python,
            args=(run.setup,),
            timeout_s=run.budget,
        )
    except (HostUnavailable, OSError) as exc:
        nodes[name] = {"error": str(exc)}
        return
    run.processes[name] = process
    try:
        line = read_line(run.watch, name, process, ctx.deadline.sooner(_READY_S), DURING)
    except NodeSilent as exc:
        nodes[name] = {"error": exc.error.message}
        session.silent = True
        run.silent.add(name)
        return
    if line is None or not line.startswith(b"READY "):
        result = process.wait(Deadline.after(2))
        nodes[name] = {"error": f"the ports probe did not start: {result.stderr_tail(2) or 'no answer'}"}
        run.processes.pop(name)
        return
    nodes[name] = json.loads(line[len(b"READY ") :])


def _probe_peers(run: _PortsRun, session: HostSession) -> list[ProbeRecord]:
    """Have one listening node probe every other listening node's ports (``GO``, ``RESULT``)."""
    ctx, nodes, settings = run.ctx, run.nodes, run.settings
    name = session.spec.name
    process = run.processes[name]
    targets = [
        {
            "node": other.spec.name,
            "address": other.spec.address,
            "ports": run.ports + ([e] if (e := nodes[other.spec.name].get("ephemeral")) else []),
        }
        for other in run.sessions
        if other.spec.name != name and other.spec.name in run.processes
    ]
    try:
        process.write(
            f"GO {json.dumps({'targets': targets, 'timeout_s': settings.connect_timeout_s})}\n".encode()
        )
    except OSError as exc:
        nodes[name] = {**nodes[name], "error": str(exc)}
        return []
    try:
        line = read_line(
            run.watch, name, process, ctx.deadline.sooner(2 * settings.connect_timeout_s + 10), DURING
        )
    except NodeSilent as exc:
        nodes[name] = {**nodes[name], "error": exc.error.message}
        session.silent = True
        run.silent.add(name)
        return []
    if line is None or not line.startswith(b"RESULT "):
        nodes[name] = {**nodes[name], "error": "the ports probe gave no result"}
        return []
    found = json.loads(line[len(b"RESULT ") :])["probes"]
    run.done[name] = time.monotonic()
    return [
        {
            "from": name,
            "to": p["node"],
            "port": p["port"],
            "kind": _kind(p["port"], ctx.config.run.port, nodes[p["node"]].get("ephemeral")),
            "status": p["status"],
            "seconds": p["seconds"],
        }
        for p in found
    ]


def _end_probes(run: _PortsRun, pool: cf.ThreadPoolExecutor) -> None:
    """Close every probe's input and wait for each one that is not silent to end."""
    for process in run.processes.values():
        with contextlib.suppress(OSError):
            process.close_stdin()
    # A silent node's probe cannot be ended now: the run's close leaves it to its own deadline.
    live = [p for name, p in run.processes.items() if name not in run.silent]
    list(pool.map(lambda p: p.wait(run.ctx.deadline.sooner(10)), live))


def observe_ports(ctx: CheckContext) -> PortsObservation:
    """Run the ports probe on every reachable node at once: listen, then probe each other."""
    cfg = ctx.config
    settings = cfg.section(PortsSection)
    master, master_address = master_of(ctx)
    ports = [cfg.run.port, *settings.extra_ports]
    sessions = ctx.live_sessions
    setup = json.dumps({"ports": ports, "ephemeral": settings.probe_ephemeral, "master": master_address})
    budget = ctx.deadline.cap(_READY_S + 2 * settings.connect_timeout_s + 15)
    probes: list[ProbeRecord] = []
    workers = max(1, min(cfg.run.fanout, len(sessions)))
    with ctx.silence_watch() as watch, cf.ThreadPoolExecutor(max_workers=workers) as pool:
        run = _PortsRun(ctx, settings, sessions, ports, setup, budget, watch)
        try:
            started = time.monotonic()
            list(pool.map(lambda s: _start_node(run, s), sessions))
            ready = [s for s in sessions if s.spec.name in run.processes]
            for found in pool.map(lambda s: _probe_peers(run, s), ready):
                probes.extend(found)
            # Each node's part: its probe's start, then its probes of the others.
            for session in sessions:
                ctx.timeline.add(session.spec.name, NAME, started, run.done.get(session.spec.name))
        finally:
            _end_probes(run, pool)
    # Threads finish in any order: report in inventory order, so that runs compare line by line.
    order = {s.spec.name: i for i, s in enumerate(sessions)}
    nodes = {name: run.nodes[name] for name in sorted(run.nodes, key=order.__getitem__)}
    probes.sort(key=lambda p: (order[p["from"]], order[p["to"]], p["port"]))
    return PortsObservation(
        master=master,
        master_address=master_address,
        port=cfg.run.port,
        extra_ports=tuple(settings.extra_ports),
        nodes=nodes,
        probes=probes,
    )


# The observation, made once: the training job reads the routes to the master from it.
OBSERVE = Probe("ports", observe_ports)


def routes(obs: PortsObservation) -> dict[str, Route]:
    """Each node's route to the master, by node name, where it reported one."""
    return {name: route for name, node in obs.nodes.items() if (route := node.get("route"))}
