"""How late the controller itself runs: the measure that keeps its own starvation from being read
as a node's silence.

A thread asks to wake every :data:`TICK_S` and records how much later than asked it ran (the CPU
it waited for, and the interpreter lock held by the threads that talk to hundreds of nodes). A
wait that the controller spent stalled is not a node's silence: :meth:`StallMeter.stalled_s` says
how much of a span was the controller's own lateness, and the silence watch
(:mod:`preflight.silence`) and the SSH handshake (:mod:`preflight.transport.ssh`) discount it.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

# Seconds between the meter's wake-ups.
TICK_S = 0.1
# A wake-up later than this is a stall (the scheduler's ordinary jitter stays well below it).
STALL_MIN_S = 0.05
# Seconds of stalls kept: longer than any wait they are asked about.
KEPT_S = 900.0


class StallMeter:
    """The controller's stalls, each the span from when it asked to wake to when it woke (they do
    not overlap: one thread records them in turn); a thread records them from the first use on.
    ``clock`` and ``start=False`` let tests feed stalls by :meth:`record`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, start: bool = True) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._ends: list[float] = []  # when each stall ended (the late wake-up)
        self._starts: list[float] = []
        self._before: list[float] = [0.0]  # seconds stalled before each stall, and after the last
        if start:
            threading.Thread(target=self._tick, name="stall-meter", daemon=True).start()

    def _tick(self) -> None:
        asked = self._clock()
        while True:
            time.sleep(TICK_S)
            woke = self._clock()
            late = woke - asked - TICK_S
            if late > STALL_MIN_S:
                self.record(woke, late)
            asked = woke

    def record(self, woke: float, late_s: float) -> None:
        """The controller woke at ``woke``, ``late_s`` later than it asked to."""
        with self._lock:
            start = max(woke - late_s, self._ends[-1] if self._ends else woke - late_s)
            self._ends.append(woke)
            self._starts.append(start)
            self._before.append(self._before[-1] + woke - start)
            if self._ends[0] < woke - 2 * KEPT_S:
                keep = bisect.bisect_left(self._ends, woke - KEPT_S)
                del self._ends[:keep], self._starts[:keep]
                base = self._before[keep]
                self._before = [b - base for b in self._before[keep:]]

    def stalled_s(self, since: float, until: float | None = None) -> float:
        """Seconds of the span from ``since`` to ``until`` (now by default) that the controller spent
        stalled: the stalls inside it, and the parts of those that straddle its ends."""
        until = self._clock() if until is None else until
        if until <= since:
            return 0.0
        with self._lock:
            first = bisect.bisect_right(self._ends, since)  # the first stall that ends after since
            last = bisect.bisect_left(self._starts, until)  # one past the last that starts before until
            if first >= last:
                return 0.0
            total = self._before[last] - self._before[first]
            total -= max(0.0, since - self._starts[first])
            total -= max(0.0, self._ends[last - 1] - until)
            return max(0.0, total)


_meter: StallMeter | None = None
_meter_lock = threading.Lock()


def controller_stalls() -> StallMeter:
    """The process's one meter, started on first use."""
    global _meter
    with _meter_lock:
        if _meter is None:
            _meter = StallMeter()
        return _meter
