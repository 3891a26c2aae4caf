"""When each node's job entered each of its phases, as the controller heard it: the job's start (the
request written to the node's host) and each phase its first rank announced (``PHASE_MARKER``),
each ending where the next begins and the last where the node's part of the job ended. Kept as
spans of the run's timeline (:mod:`preflight.timeline`)."""

from __future__ import annotations

import time

from checks.job.node.markers import PHASE_MARKER, marked_lines
from preflight.timeline import JOB_START, Timeline


class PhaseTimes:
    """The phases one job's nodes entered, stamped when the controller read each announcement."""

    def __init__(self, timeline: Timeline, names: list[str], started: float) -> None:
        self.timeline = timeline
        self.entered: dict[str, list[tuple[str, float]]] = {name: [(JOB_START, started)] for name in names}
        self._read: dict[str, int] = dict.fromkeys(names, 0)
        self._ended: set[str] = set()

    def hear(self, name: str, stderr: bytes) -> None:
        """Read what ``name``'s host wrote since last time: each phase announced is entered now."""
        start = self._read.get(name)
        if start is None or len(stderr) <= start:
            return
        end = stderr.rfind(b"\n", start) + 1
        if end <= start:
            return
        self._read[name] = end
        now = time.monotonic()
        for marker in marked_lines(stderr[start:end].decode("utf-8", "replace"), PHASE_MARKER):
            phase = marker.get("phase")
            if isinstance(phase, str) and phase:
                self.entered[name].append((phase, now))

    def end(self, name: str, at: float | None = None) -> None:
        """``name``'s part of the job ended (now by default): its phases go on the timeline."""
        if name in self._ended or name not in self.entered:
            return
        self._ended.add(name)
        at = time.monotonic() if at is None else at
        entered = self.entered[name]
        for (phase, start), (_, until) in zip(entered, [*entered[1:], ("", at)], strict=True):
            self.timeline.add(name, phase, start, until)
