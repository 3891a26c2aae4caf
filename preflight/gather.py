"""Fan-out: reach every host at once (bounded), run the facts probe, keep the connection.

One bad host never aborts the run: each host ends as facts or as a ``HostError``, and
hosts still busy when the run's deadline comes are named as timed out. The facts probe beats on
stderr while it works (:mod:`preflight.node.beat`), and the run's silence watch
(:mod:`preflight.silence`) names a host that stopped answering (its link cut, its processes
stopped) within the run's ``silence_s``, not when the probe's own timeout ends; a host that is only
slow answers its keepalives and is given the probe's whole timeout.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from preflight.check import HostSession
from preflight.deadline import Deadline
from preflight.inventory import HostSpec
from preflight.model import HostError, HostReport
from preflight.node.beat import PROBE_BEAT
from preflight.node.nccl import JOB_ENV_USED
from preflight.node.scratch import SCRATCH_ENV
from preflight.probes import (
    ScriptAnswer,
    frame_marker,
    framed,
    node_script,
    parse_script_output,
    start_node_script,
)
from preflight.progress import Progress
from preflight.redact import redact
from preflight.silence import (
    LISTEN_S,
    NodeSilent,
    SilenceWatch,
    keepalive_of,
    listen,
    read_line,
    write_watched,
)
from preflight.timeline import CONNECT, FACTS, Timeline
from preflight.transport import GRACE_S, CommandResult, HostUnavailable, RemoteProcess, Transport

TransportFactory = Callable[[HostSpec], Transport]
FACTS_SCRIPT = "preflight.node.facts"
# The private TMPDIR a staying facts probe announces on stderr (preflight.node.host).
_TMPDIR_RE = re.compile(rb"^preflight-tmpdir=(/[\w./-]*/preflight\.\w{6,})$", re.MULTILINE)
# Seconds an unused staying probe gets to end by itself once its stdin ends.
HOST_EXIT_S = 3.0
# Characters kept of what a node's login shell printed on stdout (the facts' connection record).
SHELL_OUTPUT_KEPT = 2000
# The probe's heartbeat lines, dropped from the stderr an error message quotes.
_BEAT_LINE_RE = re.compile(rb"^" + re.escape(PROBE_BEAT.encode()) + rb"\n", re.MULTILINE)
# The phase a host silent in the facts probe is named in.
DURING = "the facts probe"


def facts_probe_args(job_env: Mapping[str, str], stay_imports: Sequence[str] = ()) -> tuple[str, ...]:
    """The facts probe's options for one run: the job's variables it acts on (never a secret:
    nothing else of the job's environment leaves the controller), and a fresh key for the digests
    that let masked values be compared between nodes. With ``stay_imports`` the probe stays after
    its facts as the host's script host (:attr:`HostSession.host`), these modules imported."""
    options: dict[str, object] = {
        "salt": secrets.token_hex(16),
        "job_env": {k: v for k, v in job_env.items() if k in JOB_ENV_USED or k in SCRATCH_ENV},
    }
    if stay_imports:
        options["stay"] = {"imports": list(stay_imports)}
    return (json.dumps(options),)


def without_probe_beats(stderr: bytes) -> bytes:
    """A staying probe's stderr without its heartbeat lines."""
    return _BEAT_LINE_RE.sub(b"", stderr)


def _without_beats(result: CommandResult) -> CommandResult:
    return dataclasses.replace(result, stderr=without_probe_beats(result.stderr))


def _probe_once(
    transport: Transport,
    watch: SilenceWatch,
    name: str,
    *,
    python: str,
    args: tuple[str, ...],
    timeout_s: float,
) -> ScriptAnswer:
    """Run the facts probe to its end and return its answer (as ``run_node_script_answer`` does),
    naming the host as soon as the watch finds it silent."""
    marker = frame_marker()
    process = transport.start([python, "-", *args], timeout_s=timeout_s)
    with contextlib.suppress(OSError):  # one that ended without its input says why by its status
        write_watched(watch, name, transport, process, framed(node_script(FACTS_SCRIPT), marker), DURING)
        process.close_stdin()
    while process.running(LISTEN_S) and not process.deadline.expired:
        listen(watch, name, process, DURING)
    result = _without_beats(process.wait())
    return parse_script_output(result, python=python, timeout_s=timeout_s, frame=marker)


def _staying_probe(
    transport: Transport,
    watch: SilenceWatch,
    name: str,
    *,
    python: str,
    args: tuple[str, ...],
    probe_timeout_s: float,
    deadline: Deadline,
) -> tuple[ScriptAnswer, RemoteProcess]:
    """Run the facts probe so that it stays: its answer, and the process, still running."""
    process = start_node_script(
        transport,
        FACTS_SCRIPT,
        python=python,
        args=args,
        timeout_s=max(1.0, deadline.remaining()),
        send=lambda started, source: write_watched(watch, name, transport, started, source, DURING),
    )
    frame = process.frame
    line = read_line(
        watch, name, process, Deadline.after(probe_timeout_s).sooner(deadline.remaining()), DURING
    )
    document: Any = None
    if line is not None:
        try:
            document = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            document = None
    if isinstance(document, dict):
        shell = process.before_frame.strip()
        return ScriptAnswer(document, shell, len(shell)), process
    # No document: what the process did says why (it ended, timed out, or printed something else).
    with contextlib.suppress(OSError):
        process.close_stdin()
    timed_out = line is None and process.running()
    result = _without_beats(process.wait(Deadline.after(0 if timed_out else 5)))
    if timed_out:
        result = dataclasses.replace(result, timed_out=True)
    parse_script_output(result, python=python, timeout_s=probe_timeout_s, frame=frame or b"")
    raise HostUnavailable(HostError("probe_failed", f"the probe printed no facts: {result.stderr_tail(3)}"))


def shell_output_fact(answer: ScriptAnswer) -> dict[str, Any] | None:
    """What the node's login shell printed on stdout around the facts probe, for the facts'
    connection record: its size and its first lines (at most :data:`SHELL_OUTPUT_KEPT` characters,
    masked as facts are); None when it printed nothing."""
    if not answer.shell_output:
        return None
    text = answer.shell_output.decode("utf-8", "replace")
    return {"bytes": answer.shell_output_bytes, "text": redact(text[:SHELL_OUTPUT_KEPT])}


def _unchecked(spec: HostSpec, error: HostError) -> HostReport:
    return HostReport(name=spec.name, address=spec.address, reachable=False, error=error)


def _gather_one(
    session: HostSession,
    factory: TransportFactory,
    watch: SilenceWatch,
    *,
    python: str,
    probe_timeout_s: float,
    deadline: Deadline,
    progress: Progress,
    args: tuple[str, ...] = (),
    stay: bool = False,
    timeline: Timeline | None = None,
) -> None:
    spec = session.spec
    transport = session.transport = factory(spec)
    timeline = timeline or Timeline()
    started = time.monotonic()
    connected: float | None = None
    try:
        progress.host(spec.name, "connecting")
        transport.open(deadline)
        connected = time.monotonic()
        connected_s = connected - started
        timeline.add(spec.name, CONNECT, started, connected)
        progress.host(spec.name, "probing")
        if stay:
            answer, session.host = _staying_probe(
                transport,
                watch,
                spec.name,
                python=python,
                args=args,
                probe_timeout_s=probe_timeout_s,
                deadline=deadline,
            )
        else:
            answer = _probe_once(
                transport,
                watch,
                spec.name,
                python=python,
                args=args,
                timeout_s=deadline.cap(probe_timeout_s),
            )
    except HostUnavailable as exc:
        timeline.add(spec.name, CONNECT if connected is None else FACTS, connected or started)
        session.silent = isinstance(exc, NodeSilent)
        session.report = _unchecked(spec, exc.error)
        progress.host(spec.name, "error", error=exc.error.message)
        return
    timeline.add(spec.name, FACTS, connected)
    facts = dict(redact(answer.document.get("facts") or {}))
    facts["connection"] = {
        "transport": transport.kind,
        "user": spec.user,
        "port": spec.port if transport.kind == "ssh" else None,
        "python": python,
        "connect_s": round(connected_s, 3),
        "probe_s": round(time.monotonic() - started - connected_s, 3),
        "accepted_host_keys": transport.accepted_host_keys,
    }
    if (shell_output := shell_output_fact(answer)) is not None:
        facts["connection"]["shell_output"] = shell_output
    hostname = facts.get("hostname")
    session.report = HostReport(
        name=spec.name,
        address=spec.address,
        hostname=hostname if isinstance(hostname, str) else None,
        reachable=True,
        facts=facts,
    )
    progress.host(spec.name, "done")


def gather(
    specs: Sequence[HostSpec],
    factory: TransportFactory,
    *,
    python: str,
    probe_timeout_s: float,
    fanout: int,
    deadline: Deadline,
    progress: Progress,
    args: tuple[str, ...] = (),
    stay: bool = False,
    silence_s: float = 8.0,
    timeline: Timeline | None = None,
) -> list[HostSession]:
    """Connect to every host and gather its facts (``args``: the probe's options, the same for
    every host); the sessions keep their open transports, and with ``stay`` the facts probe that
    stayed as each host's script host. A host that stops answering is named as silent after
    ``silence_s`` (:mod:`preflight.silence`). Each host's connection and probe are spans of
    ``timeline``."""
    sessions = [
        HostSession(spec, _unchecked(spec, HostError("timeout", "not reached before the run's deadline")))
        for spec in specs
    ]
    progress.hosts_started([s.spec.name for s in sessions])
    by_name = {s.spec.name: s for s in sessions}
    watch = SilenceWatch(by_name, silence_s, keepalive_of(lambda name: by_name[name].transport))
    pool = cf.ThreadPoolExecutor(max_workers=max(1, min(fanout, len(specs))), thread_name_prefix="host")
    try:
        futures = {
            pool.submit(
                _gather_one,
                session,
                factory,
                watch,
                python=python,
                probe_timeout_s=probe_timeout_s,
                deadline=deadline,
                progress=progress,
                args=args,
                stay=stay,
                timeline=timeline,
            ): session
            for session in sessions
        }
        # The probe's bundle is packed here while the hosts connect, not by the first host to be
        # connected (the others wait for it: preflight.bundle.bundle); a bundle that cannot be
        # packed fails each host's probe, as it would have without this.
        with contextlib.suppress(Exception):
            node_script(FACTS_SCRIPT)
        done, pending = cf.wait(futures, timeout=deadline.remaining() + GRACE_S)
        for future in done:
            if (exc := future.exception()) is not None:  # a bug, not a host problem: say so
                session = futures[future]
                session.report = _unchecked(
                    session.spec, HostError("probe_failed", f"internal error: {exc!r}")
                )
        for future in pending:
            session = futures[future]
            future.cancel()
            if session.transport is not None:
                session.transport.close()
            session.report = _unchecked(
                session.spec,
                HostError("timeout", "no result before the run's deadline"),
            )
            progress.host(session.spec.name, "error", error=session.report.error.message)  # type: ignore[union-attr]
    except BaseException:
        close_all(sessions)
        raise
    finally:
        watch.close()
        pool.shutdown(wait=False, cancel_futures=True)
    return sessions


def remove_host_tmpdir(transport: Transport | None, stderr: bytes) -> None:
    """Remove the private TMPDIR a staying facts probe announced on stderr: when it was killed,
    it could not remove it itself."""
    found = _TMPDIR_RE.search(stderr)
    if found and transport is not None:
        with contextlib.suppress(HostUnavailable, OSError):
            transport.run(["rm", "-rf", "--", found.group(1).decode()], timeout_s=10)


def _close(session: HostSession) -> None:
    """End what the host still runs and close its connection; a staying facts probe that was never
    used is told to go (its stdin ends) and given a moment, then ended, its TMPDIR removed. A host
    named silent has its connection dropped: its processes end at their own deadline there."""
    if session.silent and session.transport is not None:
        session.transport.abandon()
        return
    host = session.take_host()
    if host is not None and session.transport is not None:
        with contextlib.suppress(OSError, HostUnavailable):
            host.close_stdin()
        result = host.wait(Deadline.after(HOST_EXIT_S))
        if not result.ok:
            remove_host_tmpdir(session.transport, result.stderr)
    if session.transport is not None:
        session.transport.close()


def close_all(sessions: Sequence[HostSession], *, timeout_s: float = 15.0) -> None:
    """Close every transport at once (each may have remote processes to end), bounded."""
    open_sessions = [s for s in sessions if s.transport is not None]
    if not open_sessions:
        return
    pool = cf.ThreadPoolExecutor(max_workers=min(32, len(open_sessions)), thread_name_prefix="close")
    try:
        futures = [pool.submit(_close, s) for s in open_sessions]
        cf.wait(futures, timeout=timeout_s)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        for s in open_sessions:
            s.transport = None
