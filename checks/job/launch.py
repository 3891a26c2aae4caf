"""Launching the one job across every node over the SSH transports (each node's host forks its
ranks with torchrun's variables), watching it to its end, and the probe (:data:`JOB`) through
which ``allreduce`` and ``ddp`` share it.

Each job start costs seconds: the first of the two checks to run starts the job with the
phases of every selected check, and both judge its outcome. Every node gets a deadline; a node
that fails, dies or never joins ends the job on all the others, and is named.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from checks import ports
from checks.job.layout import decide_devices, socket_environment, socket_interface
from checks.job.nccl_log import parse_nccl_log
from checks.job.node.counters import read_samples, without_samples
from checks.job.node.markers import BEAT_MARKER, marked_lines, parse_result_line
from checks.job.outcome import JobNotRun, JobOutcome, NodeOutcome
from checks.job.phase_times import PhaseTimes
from checks.job.phases import job_phase, job_phases
from checks.job.settings import AllreduceSection
from checks.job.stalled_node import read_progress
from preflight.check import CheckContext, HostSession, Probe
from preflight.deadline import Deadline
from preflight.facts import NodeFacts
from preflight.gather import remove_host_tmpdir, without_probe_beats
from preflight.model import CheckResult
from preflight.nodeset import fold
from preflight.probes import node_script, start_node_script
from preflight.redact import MASK, is_secret_name
from preflight.silence import NodeSilent, SilenceWatch, write_watched
from preflight.transport import HostUnavailable, RemoteProcess, wait_for_any

# The script every node's host runs (it starts the node's ranks, which run it too): the entry module
# of the job's node code, shipped as its bundle and never imported here.
NODE_SCRIPT = "checks.job.node.job"
# The script host a node gets when the facts probe did not stay (preflight.node.host.serve).
HOST_SCRIPT = "preflight.node.facts"
# Modules the job imports, imported on every node while the other checks run (Check.warm_imports):
# torch.distributed for every phase; DDP's constructor imports torch._dynamo (most of a second).
JOB_IMPORTS = ("torch.distributed",)
DDP_IMPORTS = ("torch.nn.parallel", "torch._dynamo")
# Seconds, on this lab's 2 cores, for a node's host to start its ranks (importing torch first when
# the facts probe did not stay); real nodes are faster, and the deadline only bounds a job that hangs.
STARTUP_S = 40.0
# The phase a node silent while its job is sent to it is named in.
STARTING = "the job's start"
# After the first node fails, the others get this long to fail (and say why) on their own.
FAILURE_GRACE_S = 3.0
# A node that stops answering (its ranks beat every 2 s; a quiet node is asked a keepalive) is
# named by the run's silence watch (preflight.silence).
# The watch loop looks at the nodes when one has news, at most every WATCH_MIN_S and at least
# every WATCH_MAX_S.
WATCH_MIN_S = 0.02
WATCH_MAX_S = 0.1
# The ranks' heartbeats, dropped from the stderr a node's outcome keeps (with the facts probe's: the
# node's host beats while it imports the job's modules, after the facts).
_BEAT_LINE_RE = re.compile(rb"^[^\n]*" + re.escape(BEAT_MARKER.encode()) + rb"[^\n]*\n", re.MULTILINE)
STDERR_HEAD = 48_000
STDERR_TAIL = 16_000


def _skip(summary: str, **details: Any) -> JobNotRun:
    return JobNotRun("skip", summary, (), details)


def _blocked_by_ports(ctx: CheckContext) -> JobNotRun | None:
    for result in ctx.findings.get("ports", ()):
        if result.check == "ports" and result.details.get("blocks_job"):
            return _skip(f"not launched: {result.summary}", blocked_by="ports")
    return None


def _routes(ctx: CheckContext, sessions: Sequence[HostSession], master_address: str) -> dict[str, Any]:
    """The route to the master from every node: from the ports check, or asked now."""
    known: dict[str, Any] = ports.routes(ctx.probe(ports.OBSERVE)) if "ports" in ctx.selected else {}
    missing = [s for s in sessions if s.spec.name not in known]
    python = ctx.config.run.python
    setup = json.dumps({"mode": "route", "master": master_address})

    def ask(session: HostSession) -> tuple[str, Any]:
        assert session.transport is not None
        try:
            process = start_node_script(
                session.transport, ports.NODE_SCRIPT, python=python, args=(setup,), timeout_s=15
            )
            process.close_stdin()
            line = process.readline(ctx.deadline.sooner(15))
            process.wait(Deadline.after(5))
        except (HostUnavailable, OSError):
            return session.spec.name, None
        if line and line.startswith(b"ROUTE "):
            return session.spec.name, json.loads(line[len(b"ROUTE ") :])
        return session.spec.name, None

    if missing:
        with cf.ThreadPoolExecutor(max_workers=min(ctx.config.run.fanout, len(missing))) as pool:
            known.update(dict(pool.map(ask, missing)))
    return known


def _job_args(ctx: CheckContext, phases: tuple[str, ...], names: list[str], gpu: bool) -> dict[str, Any]:
    """What every node's job is sent: the world, the node module that runs each phase (``runs``),
    and each phase's settings (every phase's: the node side reads every section it knows;
    ``phases`` says which run, in order)."""
    cfg = ctx.config.section(AllreduceSection)
    declared = job_phases()
    return {
        "phases": list(phases),
        "backend": "nccl" if gpu else "gloo",
        "device": "cuda" if gpu else "cpu",
        "timeout_s": cfg.collective_timeout_s,
        "join_timeout_s": cfg.join_timeout_s,
        "nodes": names,
        "runs": {phase.name: phase.node for phase in declared},
        **{phase.name: phase.sent(ctx.config, names, gpu) for phase in declared},
    }


def _budget_s(args: Mapping[str, Any]) -> float:
    """The job's seconds: its start, the join, one collective's timeout, and each phase's own."""
    budget = STARTUP_S + float(args["join_timeout_s"]) + float(args["timeout_s"])
    return budget + sum(job_phase(name).budget_s(args[name]) for name in args["phases"])


# The options that make the facts script a bare script host (preflight.node.host.serve).
SERVE = json.dumps({"serve": True})


def job_script(args: Mapping[str, Any]) -> bytes:
    """The job's script for these arguments: its bundle, carrying the node module of every phase
    it is sent (``runs``), which the entry imports by name."""
    return node_script(NODE_SCRIPT, tuple(args["runs"].values()))


def pack_job_script() -> None:
    """Pack the job's script ahead of its launch (``Check.prepare``): the bundle of every declared
    phase's node code, as :func:`job_script` ships it."""
    node_script(NODE_SCRIPT, tuple(phase.node for phase in job_phases()))


def host_request(request: Mapping[str, Any]) -> bytes:
    """What a node's script host is sent to run the job there: the header line, then the script."""
    source = job_script(request["job"])
    header = {"length": len(source), "name": "preflight-job", "args": [json.dumps(request)]}
    return json.dumps(header).encode() + b"\n" + source


def _cap(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace")
    if len(text) <= STDERR_HEAD + STDERR_TAIL:
        return text
    cut = len(text) - STDERR_HEAD - STDERR_TAIL
    return f"{text[:STDERR_HEAD]}\n[... {cut} characters cut ...]\n{text[-STDERR_TAIL:]}"


def _unfit(ctx: CheckContext, nodes: Mapping[str, NodeFacts]) -> JobNotRun | None:
    """Why the job cannot run on these nodes: a Python without torch, or GPUs CUDA cannot start on."""
    no_torch = {
        n: str(node.unavailable.get("torch", "not importable")) for n, node in nodes.items() if not node.torch
    }
    if no_torch:
        first = next(iter(no_torch.values())).removeprefix("torch not importable: ")
        python = ctx.config.run.python
        return JobNotRun(
            status="fail",
            summary=(
                f"{fold(no_torch)}: {python} cannot import torch ({first}), so the job cannot run there; "
                "point --python at the training environment's interpreter"
            ),
            hosts=tuple(no_torch),
            details={"item": "torch", "unavailable": no_torch},
        )
    unregistered = {n: [g.index for g in node.gpus or [] if g.unregistered] for n, node in nodes.items()}
    unregistered = {n: gpus for n, gpus in unregistered.items() if gpus}
    if unregistered:
        # CUDA cannot start there: the job would only fail on it, under the hardware finding's cause.
        reason = f"{fold(unregistered)}: GPUs not registered with the NVSwitch fabric, so CUDA cannot start"
        if "hardware" in ctx.selected:
            return _skip(f"not launched: {reason} (see hardware)", blocked_by="hardware")
        return JobNotRun(
            status="fail",
            summary=f"not launched: {reason}",
            hosts=tuple(unregistered),
            details={"item": "gpu_fabric", "unregistered": unregistered, "action": "drain"},
        )
    return None


def _node_environment(
    node: NodeFacts, route: Mapping[str, Any], socket_ifname: str, gpu: bool
) -> dict[str, str]:
    """The environment a node's ranks run in: one thread each, the socket interface, NCCL's log."""
    ifname = socket_interface(node, route, socket_ifname)
    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **socket_environment(ifname)}
    if gpu:
        # Which network NCCL really used is read from its INIT/NET log lines; Ring because
        # Tree on two nodes can exceed one NIC's rate and hide a slow link.
        env.update(
            NCCL_DEBUG="INFO",
            NCCL_DEBUG_SUBSYS="INIT,NET",
            NCCL_DEBUG_FILE="/dev/stderr",  # NCCL logs to stdout otherwise; the judge reads stderr
            NCCL_ALGO="Ring",
            TORCH_NCCL_ASYNC_ERROR_HANDLING="1",
        )
    return env


def _host_settings(
    ordered: Sequence[HostSession],
    nproc: Mapping[str, int],
    environments: Mapping[str, dict[str, str]],
    master_address: str,
    port: int,
) -> dict[str, dict[str, Any]]:
    """Each node's part of the world: its node rank, its ranks' offset and count, the rendezvous."""
    world_size = sum(max(1, nproc[s.spec.name]) for s in ordered)
    settings: dict[str, dict[str, Any]] = {}
    rank_offset = 0
    for node_rank, session in enumerate(ordered):
        name = session.spec.name
        count = max(1, nproc[name])
        settings[name] = {
            "nproc": count,
            "node_rank": node_rank,
            "nnodes": len(ordered),
            "rank_offset": rank_offset,
            "world_size": world_size,
            "master_addr": master_address,
            "master_port": port,
            "env": environments[name],
        }
        rank_offset += count
    return settings


def _not_launched(ctx: CheckContext, nodes: Mapping[str, NodeFacts]) -> JobNotRun | None:
    """Why the job cannot start on these reachable nodes; None when it can."""
    if not nodes:
        return _skip("no reachable host to run the job on", item="job_hosts_unreachable")
    blocked = _blocked_by_ports(ctx)
    if blocked is not None:
        return blocked
    unfit = _unfit(ctx, nodes)
    if unfit is not None:
        return unfit
    master_name, master_address = ports.master_of(ctx)
    if master_name not in nodes:
        return _skip(
            f"not launched: the master {master_name or master_address} could not be checked",
            item="job_hosts_unreachable",
        )
    return None


def launch(ctx: CheckContext, phases: tuple[str, ...]) -> JobOutcome | JobNotRun:
    """Start the job on every reachable node at once and watch it to its end."""
    sessions = ctx.live_sessions
    nodes = {s.spec.name: s.report.node for s in sessions}
    not_launched = _not_launched(ctx, nodes)
    if not_launched is not None:
        return not_launched
    master_name, master_address = ports.master_of(ctx)
    devices = decide_devices(nodes, {s.spec.name: s.spec.slots for s in sessions}, ctx.backend)
    if isinstance(devices, JobNotRun):
        return devices
    gpu = devices.gpu
    # The master first: node rank 0 hosts global rank 0 and the rendezvous store.
    ordered = sorted(sessions, key=lambda s: s.spec.name != master_name)
    names = [s.spec.name for s in ordered]
    args = _job_args(ctx, phases, names, gpu)
    budget = ctx.deadline.cap(_budget_s(args))
    socket_ifname = ctx.config.section(AllreduceSection).socket_ifname
    routes = {} if socket_ifname else _routes(ctx, ordered, master_address)
    python = ctx.config.run.python
    port = ctx.config.run.port
    environments = {n: _node_environment(nodes[n], routes.get(n) or {}, socket_ifname, gpu) for n in names}
    hosts = _host_settings(ordered, devices.nproc, environments, master_address, port)
    requests = {n: host_request({"host": hosts[n], "job": args}) for n in names}

    started = time.monotonic()
    processes: dict[str, RemoteProcess] = {}
    failures: dict[str, str] = {}
    times = PhaseTimes(ctx.timeline, names, started)

    def start(session: HostSession, watch: SilenceWatch) -> None:
        transport = session.transport
        assert transport is not None
        name = session.spec.name

        def send(process: RemoteProcess, data: bytes) -> None:  # a node cut meanwhile is named
            write_watched(watch, name, transport, process, data, STARTING)

        try:
            host = session.take_host() or start_node_script(
                transport, HOST_SCRIPT, python=python, args=(SERVE,), timeout_s=budget, send=send
            )
            processes[name] = host
            send(host, requests[name])
        except NodeSilent as exc:
            session.silent = True
            processes.pop(name, None)
            failures[name] = exc.error.message
        except (HostUnavailable, OSError) as exc:
            failures[name] = exc.error.message if isinstance(exc, HostUnavailable) else f"{name}: {exc}"

    with cf.ThreadPoolExecutor(max_workers=min(ctx.config.run.fanout, len(ordered))) as pool:
        try:
            with ctx.silence_watch() as starting:
                list(pool.map(lambda session: start(session, starting), ordered))
            outcomes = _watch(ctx, ordered, processes, failures, budget, pool, times)
        except BaseException:  # Ctrl-C: end the job everywhere and remove what it made, then go
            _abort(ordered, processes, pool)
            raise
    return JobOutcome(
        phases=phases,
        backend="nccl" if gpu else "gloo",
        master=master_address,
        port=port,
        nodes=tuple(outcomes[s.spec.name] for s in ordered),
        duration_s=round(time.monotonic() - started, 3),
        document=next(
            (d for n in outcomes.values() if (d := parse_result_line(n.stdout.decode("utf-8", "replace")))),
            None,
        ),
        launch_error="; ".join(failures.values()) or None,
        untested_gpus=dict(devices.untested),
        environment={
            n: {k: MASK if is_secret_name(k) else v for k, v in env.items()}
            for n, env in environments.items()
        },
    )


@dataclass(frozen=True)
class _Watched(NodeOutcome):
    stdout: bytes = b""


def _watch(
    ctx: CheckContext,
    sessions: Sequence[HostSession],
    processes: dict[str, RemoteProcess],
    failures: dict[str, str],
    budget: float,
    pool: cf.ThreadPoolExecutor,
    times: PhaseTimes,
) -> dict[str, _Watched]:
    """Wait for every node; once one fails, give the others a moment, then end them. ``times``
    hears each node's phases as they begin."""
    deadline = Deadline.after(budget).sooner(ctx.deadline.remaining())
    running = dict(processes)
    first_failure: float | None = time.monotonic() if failures else None
    finished: dict[str, Any] = {}
    transports = {s.spec.name: s.transport for s in sessions}
    silent: dict[str, tuple[float, str | None]] = {}
    named_at = 0.0
    heard: dict[str, int] = {}
    with ctx.silence_watch() as watch:
        while running and not deadline.expired:
            for name, process in list(running.items()):
                if not process.running():
                    result = process.wait(Deadline.after(5))
                    times.hear(name, result.stderr)
                    times.end(name)
                    finished[name] = result
                    del running[name]
                    if not result.ok and first_failure is None:
                        first_failure = time.monotonic()
                else:
                    received = process.received_bytes
                    watch.hear(name, received)
                    if heard.get(name) != received:
                        heard[name] = received
                        times.hear(name, process.stderr_so_far)
            if first_failure is not None and time.monotonic() - first_failure > FAILURE_GRACE_S:
                break
            if not running:
                break
            quiet = watch.silent(running)
            if quiet:
                named_at = time.time()  # since when each was silent is told from this moment
                silent = {n: (q, _last_phase(running[n].stderr_so_far)) for n, q in quiet.items()}
                break  # no grace: the silent node cannot say more, and the others only wait for it
            # Wake on any node's news; not more often than WATCH_MIN_S, so that the heartbeats of a
            # thousand nodes do not keep the controller busy.
            woke = time.monotonic()
            wait_for_any(running.values(), WATCH_MAX_S)
            time.sleep(max(0.0, WATCH_MIN_S - (time.monotonic() - woke)))
    timed_out = deadline.expired and not silent
    # End what is still running, all at once. A silent node cannot be asked to end its ranks: what it
    # sent is kept, and its processes end at their own deadline on the node (the run's close tries
    # again once the report is out).
    lost = set(silent)
    for session in sessions:
        if session.spec.name in lost:
            session.silent = True
            finished[session.spec.name] = running[session.spec.name].so_far()
    ending = {n: p for n, p in running.items() if n not in lost}
    for name, result in zip(
        ending, pool.map(lambda p: p.wait(Deadline.after(0)), ending.values()), strict=True
    ):
        finished[name] = result

    for name in finished:
        times.end(name)
    ended = [n for n, r in finished.items() if not r.ok and n not in lost]
    list(pool.map(lambda name: remove_host_tmpdir(transports[name], finished[name].stderr), ended))
    return _outcomes(sessions, finished, failures, set(running), silent, timed_out, named_at)


def _outcomes(
    sessions: Sequence[HostSession],
    finished: Mapping[str, Any],
    failures: Mapping[str, str],
    running: set[str],
    silent: Mapping[str, tuple[float, str | None]],
    timed_out: bool,
    named_at: float,
) -> dict[str, _Watched]:
    """Each node's outcome from what its process returned: ended by the controller (``running``
    when the watch stopped), silent, timed out or finished on its own."""
    outcomes: dict[str, _Watched] = {}
    for rank, session in enumerate(sessions):
        name = session.spec.name
        if name in failures:
            outcomes[name] = _Watched(name, rank, None, False, True, False, failures[name])
            continue
        result = finished[name]
        killed = name in running
        quiet_s, last_phase = silent.get(name, (None, None))
        outcomes[name] = _Watched(
            host=name,
            node_rank=rank,
            exit_status=result.exit_status,
            timed_out=killed and timed_out,
            lost=name in silent or (result.exit_status is None and not killed),
            killed=killed and not timed_out and name not in silent,
            stderr=_cap(without_samples(_BEAT_LINE_RE.sub(b"", without_probe_beats(result.stderr)))),
            nccl=parse_nccl_log(result.stderr.decode("utf-8", "replace")),
            stdout=result.stdout,
            silent_s=quiet_s,
            last_phase=last_phase,
            silent_since=_since(named_at, quiet_s),
            counters=read_samples(result.stderr.decode("utf-8", "replace")),
            progress=read_progress(result.stderr.decode("utf-8", "replace")),
        )
    return outcomes


def _since(named_at: float, quiet_s: float | None) -> str | None:
    """The UTC moment ``quiet_s`` seconds before ``named_at`` (a time.time()), to the millisecond."""
    if quiet_s is None:
        return None
    moment = datetime.fromtimestamp(named_at, UTC) - timedelta(seconds=quiet_s)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _last_phase(stderr: bytes) -> str | None:
    beats = marked_lines(stderr[-16_000:].decode("utf-8", "replace"), BEAT_MARKER)
    phase = beats[-1].get("phase") if beats else None
    return str(phase) if phase else None


def _abort(
    sessions: Sequence[HostSession], processes: Mapping[str, RemoteProcess], pool: cf.ThreadPoolExecutor
) -> None:
    transports = {s.spec.name: s.transport for s in sessions}

    def end(name: str) -> None:
        process = processes[name]
        process.kill()
        remove_host_tmpdir(transports[name], process.stderr_so_far)

    list(pool.map(end, list(processes)))


def distributed_job(ctx: CheckContext) -> JobOutcome | JobNotRun:
    """The one job that ``allreduce`` and ``ddp`` share: launched on first use, then reused."""
    return ctx.probe(JOB)


def judge_job(
    ctx: CheckContext, check: str, judge: Callable[[JobOutcome], Sequence[CheckResult]]
) -> list[CheckResult]:
    """What each check of the job does: judge the shared job's outcome, or say why it did not start
    (the first of the job's checks in the run says it, the others refer to it)."""
    outcome = distributed_job(ctx)
    if isinstance(outcome, JobNotRun):
        return [outcome.result(check, ctx.selected)]
    return list(judge(outcome))


def _launch_selected(ctx: CheckContext) -> JobOutcome | JobNotRun:
    every = tuple(phase.name for phase in job_phases())
    return launch(ctx, tuple(name for name in every if name in ctx.selected) or every)


JOB = Probe("job", _launch_selected)
