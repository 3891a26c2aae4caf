"""Observing the clocks (I/O): on every node at once, :mod:`checks.clocks.node` answers a few
requests over its open connection (SSH or srun) with its wall clock; the controller times each
round trip and keeps the shortest (``[clocks] samples``). Process start-up is not in the round trip.
"""

from __future__ import annotations

import contextlib
import time

from checks.clocks.judge import NAME, ClockSample, ClocksObservation, best_sample
from checks.clocks.settings import ClocksSection
from checks.fanout import on_every_node
from preflight.check import CheckContext, HostSession, Probe
from preflight.deadline import Deadline
from preflight.model import HostError
from preflight.probes import start_node_script
from preflight.transport import HostUnavailable

NODE_SCRIPT = "checks.clocks.node"
# Seconds for the node's Python to start and say READY, and for one answer.
_READY_S = 20.0
_ANSWER_S = 5.0


def read_clock(session: HostSession, *, python: str, samples: int, deadline: Deadline) -> ClockSample:
    """The node's clock against the controller's, from the shortest of ``samples`` round trips."""
    assert session.transport is not None
    budget = deadline.cap(_READY_S + samples * _ANSWER_S)
    process = start_node_script(session.transport, NODE_SCRIPT, python=python, timeout_s=budget)
    try:
        if process.readline(deadline.sooner(_READY_S)) != b"READY":
            result = process.wait(Deadline.after(2))
            why = result.stderr_tail(2) or "no answer"
            raise HostUnavailable(HostError("probe_failed", f"the clock probe did not start: {why}"))
        found: list[ClockSample] = []
        for _ in range(max(1, samples)):
            # The wall clock at sending; the monotonic clock times the round trip.
            sent_wall, sent = time.time(), time.monotonic()
            process.write(b"T\n")
            line = process.readline(deadline.sooner(_ANSWER_S))
            received = time.monotonic()
            if line is None or not line.strip().isdigit():
                raise HostUnavailable(HostError("probe_failed", "the clock probe stopped answering"))
            found.append(ClockSample(sent_wall, sent_wall + (received - sent), int(line) / 1e9))
        return best_sample(found)
    finally:
        with contextlib.suppress(OSError):
            process.write(b"DONE\n")
            process.close_stdin()
        process.wait(Deadline.after(5))


def observe_clocks(ctx: CheckContext) -> ClocksObservation:
    cfg = ctx.config.section(ClocksSection)
    samples = max(1, cfg.samples)
    limit_s = _READY_S + samples * _ANSWER_S

    def work(session: HostSession) -> ClockSample:
        return read_clock(session, python=ctx.config.run.python, samples=samples, deadline=ctx.deadline)

    answered = on_every_node(ctx, work, limit_s=limit_s, phase=NAME)
    return ClocksObservation(
        samples=answered.answers,
        errors=answered.errors,
        time={h: n.time for h, n in ctx.nodes().items()},
    )


OBSERVE = Probe("clocks", observe_clocks)
