"""A check's own work on every reachable node at once, bounded by the run's fan-out and deadline:
each node's answer, or one line saying why there is none. ``names`` and ``clocks`` run their node
scripts through it.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from preflight.check import CheckContext, HostSession
from preflight.transport import GRACE_S, HostUnavailable

T = TypeVar("T")


@dataclass
class Answers(Generic[T]):
    """What each node answered, and why the others did not, by host name in inventory order."""

    answers: dict[str, T] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def on_every_node(
    ctx: CheckContext,
    work: Callable[[HostSession], T],
    *,
    limit_s: float,
    sessions: Sequence[HostSession] | None = None,
    phase: str = "",
) -> Answers[T]:
    """Run ``work`` for every live session (or ``sessions``), ``fanout`` at a time. ``work`` bounds
    its own remote commands by ``limit_s``; a node still busy past that (and the transport's grace)
    is reported as not answering, never waited on. Each node's work is a span of the run's
    timeline, named ``phase``."""
    chosen = list(ctx.live_sessions if sessions is None else sessions)
    found: Answers[T] = Answers()
    if not chosen:
        return found
    workers = max(1, min(ctx.config.run.fanout, len(chosen)))
    waves = -(-len(chosen) // workers)
    pool = cf.ThreadPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(_timed, ctx, phase, work, session): session.spec.name for session in chosen}
        done, pending = cf.wait(futures, timeout=ctx.deadline.cap(limit_s * waves) + 2 * GRACE_S)
        for future in done:
            name = futures[future]
            exc = future.exception()
            if isinstance(exc, HostUnavailable):
                found.errors[name] = exc.error.message
            elif isinstance(exc, OSError):
                found.errors[name] = str(exc)
            elif exc is not None:
                found.errors[name] = f"internal error: {exc!r}"
            else:
                found.answers[name] = future.result()
        for future in pending:
            future.cancel()
            found.errors[futures[future]] = f"no answer within {limit_s:g} s"
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    order = {s.spec.name: i for i, s in enumerate(chosen)}
    found.answers = dict(sorted(found.answers.items(), key=lambda kv: order[kv[0]]))
    found.errors = dict(sorted(found.errors.items(), key=lambda kv: order[kv[0]]))
    return found


def _timed(ctx: CheckContext, phase: str, work: Callable[[HostSession], T], session: HostSession) -> T:
    with ctx.timeline.span(session.spec.name, phase):
        return work(session)
