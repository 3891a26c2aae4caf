"""Where a run's time goes: each phase of the run, on the controller and on every node, as a span of
seconds since the run began (the controller's monotonic clock, so that no node's clock enters it).

The controller's lane holds the facts gathering and each check; a node's lane holds its connection,
its facts probe, the probes the checks ran on it (ports, names, clocks, storage) and the job: its
start (the host starting the ranks, their join) and each phase as the node's first rank announced
it. The gaps between a lane's spans are time the node waited on others. Recorded from any thread.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The controller's own lane.
CONTROLLER = "controller"
# A node's phases before and around the checks.
CONNECT = "connection"
FACTS = "facts"
# A node's job, from the request written to its host to the first phase its ranks announced.
JOB_START = "job start"


@dataclass(frozen=True)
class Span:
    """One phase on one lane: the controller's (:data:`CONTROLLER`) or a node's (its name)."""

    lane: str
    phase: str
    start_s: float  # seconds since the run began
    end_s: float

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    def to_dict(self) -> dict[str, Any]:
        return {"lane": self.lane, "phase": self.phase, "start_s": self.start_s, "end_s": self.end_s}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Span:
        return cls(str(data["lane"]), str(data["phase"]), float(data["start_s"]), float(data["end_s"]))


class Timeline:
    """The spans of one run, recorded as they end (times from :func:`time.monotonic`)."""

    def __init__(self, origin: float | None = None) -> None:
        self.origin = time.monotonic() if origin is None else origin
        self._spans: list[Span] = []
        self._lock = threading.Lock()

    def add(self, lane: str, phase: str, start: float, end: float | None = None) -> None:
        """A span from ``start`` to ``end`` (now by default), both monotonic times."""
        end = time.monotonic() if end is None else end
        span = Span(lane, phase, round(start - self.origin, 3), round(max(start, end) - self.origin, 3))
        with self._lock:
            self._spans.append(span)

    @contextlib.contextmanager
    def span(self, lane: str, phase: str) -> Iterator[None]:
        """The span of the block's run (kept however the block ends)."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(lane, phase, start)

    def spans(self) -> tuple[Span, ...]:
        """Every span, by lane (the controller's first, then the nodes' in the order they first
        appear) and by start."""
        with self._lock:
            spans = list(self._spans)
        lanes = list(dict.fromkeys([CONTROLLER, *(s.lane for s in sorted(spans, key=lambda s: s.start_s))]))
        return tuple(sorted(spans, key=lambda s: (lanes.index(s.lane), s.start_s, s.end_s)))


def phase_seconds(spans: Sequence[Span], lane: str = CONTROLLER) -> dict[str, float]:
    """Seconds each phase of ``lane`` took, in the order the phases began (a phase that ran
    several times counts each)."""
    found: dict[str, float] = {}
    for span in sorted((s for s in spans if s.lane == lane), key=lambda s: s.start_s):
        found[span.phase] = found.get(span.phase, 0.0) + span.seconds
    return found


def busiest(spans: Sequence[Span], phase: str) -> Span | None:
    """The node's span of ``phase`` that took longest (the one the run waited for)."""
    found = [s for s in spans if s.phase == phase and s.lane != CONTROLLER]
    return max(found, key=lambda s: (s.seconds, s.lane)) if found else None


def job_phases(spans: Sequence[Span]) -> list[str]:
    """The job's phases, in the order the nodes ran them: its start, then what each node's lane
    holds after it."""
    found: dict[str, None] = {}
    for lane in dict.fromkeys(s.lane for s in spans if s.lane != CONTROLLER):
        in_job = False
        for span in sorted((s for s in spans if s.lane == lane), key=lambda s: s.start_s):
            in_job = in_job or span.phase == JOB_START
            if in_job:
                found[span.phase] = None
    return list(found)


def slowest_node_seconds(spans: Sequence[Span], phases: Sequence[str]) -> dict[str, float]:
    """Each of ``phases`` at the seconds its slowest node took (the run waited for that one)."""
    found: dict[str, float] = {}
    for phase in phases:
        taken = [s.seconds for s in spans if s.lane != CONTROLLER and s.phase == phase]
        if taken:
            found[phase] = max(taken)
    return found
