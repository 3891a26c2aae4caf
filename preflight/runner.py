"""One run, end to end: gather every host's facts, run the selected checks, build the report.

The run's deadline bounds everything; Ctrl-C ends remote work, closes every connection
and still returns a report of what was learned, marked interrupted. The report is published (its
files written, its verdict printed) before the connections are closed: ending what a lost node
still runs can take seconds, and whoever waits on the verdict does not wait for that.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from preflight import __version__
from preflight.check import Backend, Check, CheckContext, HostSession
from preflight.config import Config
from preflight.deadline import Deadline
from preflight.gather import close_all, facts_probe_args, gather
from preflight.handback import hand_back
from preflight.history.session import HistoryRequest, remember
from preflight.inventory import HostSpec
from preflight.model import CheckResult, HostError, HostReport, RunReport
from preflight.progress import NoProgress, Progress
from preflight.registry import unreached_check
from preflight.timeline import CONTROLLER, FACTS, Timeline
from preflight.transport import Transport
from preflight.transport.local import LocalTransport
from preflight.transport.srun import SrunSettings, SrunTransport
from preflight.transport.ssh import SshSettings, SshTransport


@dataclass
class RunRequest:
    hosts: Sequence[HostSpec]
    config: Config
    checks: Sequence[Check]
    ssh: SshSettings | None = None
    backend: Backend | None = None
    baseline: RunReport | None = None
    min_nodes: int | None = None  # pass when at least this many nodes are good (--min-nodes)
    srun: SrunSettings | None = None  # inside a Slurm allocation: reach the nodes as job steps
    history: HistoryRequest | None = None  # the store the run is written to, and read from


def _make_transport(request: RunRequest, spec: HostSpec) -> Transport:
    if spec.local:
        return LocalTransport(spec)
    if request.srun is not None:
        return SrunTransport(spec, request.srun)
    if request.ssh is None:
        raise ValueError("SSH settings are needed for remote hosts")
    return SshTransport(spec, request.ssh)


def _run_check(check: Check, ctx: CheckContext) -> list[CheckResult]:
    try:
        return list(check.run(ctx))
    except Exception as exc:  # a bug in one check must not cost the others' findings
        return [
            CheckResult(
                check=check.name,
                status="error",
                summary=f"the {check.name} check crashed: {exc!r}",
                details={"traceback": traceback.format_exc()},
            )
        ]


def _prepare(checks: Sequence[Check]) -> None:
    """What the checks can do before any node answers, done in the background while the hosts
    connect; whatever fails here is done again, and fails with its reason, where it is needed."""
    preparing = list(dict.fromkeys(c.prepare for c in checks if c.prepare is not None))

    def run() -> None:
        for prepare in preparing:
            with contextlib.suppress(Exception):
                prepare()

    if preparing:
        threading.Thread(target=run, name="prepare", daemon=True).start()


def execute(
    request: RunRequest,
    progress: Progress | None = None,
    publish: Callable[[RunReport], None] | None = None,
) -> RunReport:
    """Run the request and return its report; ``publish`` is given the report before the run's
    connections are closed (an interrupted run closes them first)."""
    progress = progress or NoProgress()
    started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    started = time.monotonic()
    timeline = Timeline(started)
    run = request.config.run
    deadline = Deadline.after(run.timeout_s)
    sessions: list[HostSession] = [
        HostSession(spec, HostReport(name=spec.name, address=spec.address)) for spec in request.hosts
    ]
    results: list[CheckResult] = []
    timings: dict[str, float] = {}
    interrupted = False
    # Modules the selected checks' node scripts need: imported once, while the others run.
    stay_imports = list(dict.fromkeys(m for check in request.checks for m in check.warm_imports))
    _prepare(request.checks)
    try:
        phase_started = time.monotonic()
        sessions = gather(
            request.hosts,
            lambda spec: _make_transport(request, spec),
            python=run.python,
            probe_timeout_s=run.probe_timeout_s,
            silence_s=run.silence_s,
            fanout=run.fanout,
            deadline=deadline,
            progress=progress,
            args=facts_probe_args(request.config.job_env, stay_imports),
            stay=bool(stay_imports),
            timeline=timeline,
        )
        timings["facts"] = time.monotonic() - phase_started
        timeline.add(CONTROLLER, FACTS, phase_started)
        ctx = CheckContext(
            config=request.config,
            sessions=sessions,
            deadline=deadline,
            backend=request.backend,
            selected=tuple(c.name for c in request.checks),
            baseline=request.baseline,
            timeline=timeline,
        )
        _run_checks(request.checks, ctx, progress, results, timings)
    except KeyboardInterrupt:
        interrupted = True
        for session in sessions:
            if not session.report.reachable and session.report.error is None:
                session.report = HostReport(
                    name=session.spec.name,
                    address=session.spec.address,
                    error=HostError("interrupted", "the run was interrupted before this host was checked"),
                )
        close_all(sessions)
    except BaseException:
        close_all(sessions)
        raise
    finally:
        progress.close()
    try:
        report = _report(request, sessions, results, started_at, started, interrupted, timings, timeline)
        if publish is not None:
            publish(report)
    finally:
        close_all(sessions)
    return report


def _run_checks(
    checks: Sequence[Check],
    ctx: CheckContext,
    progress: Progress,
    results: list[CheckResult],
    timings: dict[str, float],
) -> None:
    """Every check in order, each finding added to ``results`` as it is made (an interrupted run
    keeps what was found); the probes that need nothing but the facts started first, side by side."""
    for check in checks:
        for probe in check.starts_early(ctx) if check.starts_early else ():
            ctx.start(probe)
    findings: dict[str, list[CheckResult]] = {}
    for check in checks:
        progress.check_started(check.name)
        phase_started = time.monotonic()
        # A check sees the findings of the checks it reads, and no others.
        ctx.findings = {name: findings[name] for name in check.reads if name in findings}
        found = _run_check(check, ctx)
        timings[check.name] = time.monotonic() - phase_started
        ctx.timeline.add(CONTROLLER, check.name, phase_started)
        findings[check.name] = found
        results.extend(found)
        progress.check_done(check.name, found)


def _report(
    request: RunRequest,
    sessions: Sequence[HostSession],
    results: list[CheckResult],
    started_at: str,
    started: float,
    interrupted: bool,
    timings: dict[str, float],
    timeline: Timeline,
) -> RunReport:
    hosts = [s.report for s in sessions]
    handback = hand_back(
        hosts,
        results,
        {c.name: c.action for c in request.checks},
        unreached_check=unreached_check(),
        min_nodes=request.min_nodes,
    )
    report = RunReport.build(
        tool_version=__version__,
        started_at=started_at,
        duration_s=time.monotonic() - started,
        hosts=hosts,
        results=results,
        interrupted=interrupted,
        timings=timings,
        handback=handback.to_dict(),
        enough_nodes=handback.enough,
        timeline=timeline.spans(),
    )
    return report if request.history is None else remember(report, request.history)
