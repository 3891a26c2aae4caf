"""The one silence watch of every phase (the facts probe, the ports probe, the job): which nodes
stopped answering, told from nodes that are only slow and from a controller that is itself late.

A node is *heard* when its process sends anything (output, a heartbeat) and when it answers a
keepalive on its connection: an SSH keepalive is answered by the node's sshd and kernel whatever
its probe is doing, and since the connection is one ordered stream, its answer also brings in
everything the node sent before it. The rule:

- a node quiet for :data:`ASK_S` is asked a keepalive (and asked again each time it is quiet again);
- a node is **silent** once it has been quiet for ``silence_s`` *and* a keepalive asked of it has
  gone unanswered for the answer window (:data:`ANSWER_S`, or three times the slowest round trip
  other nodes answered in lately, whichever is longer) *and* the controller shows that it is fine:
  another node of the run was heard after that keepalive was asked (nodes that are not otherwise
  heard from are asked keepalives as references). A node that answers is slow, never silent.
- every wait is counted in the controller's own time: what it spent stalled (its CPU, its
  interpreter lock: :mod:`preflight.stall`) is taken out, so a starved controller names nobody.
  When no other node answers either, the silence is the controller's (its link, its load), and
  nobody is named: the phase's own deadline ends it. A run of one node has no other node to ask,
  and its node is named on its own silence.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from preflight.deadline import Deadline
from preflight.model import HostError
from preflight.stall import StallMeter, controller_stalls
from preflight.transport import HostUnavailable, RemoteProcess, Transport

# Seconds a node may be quiet before it is asked a keepalive: longer than any heartbeat's interval
# (the facts probe beats every second, the job's ranks every two).
ASK_S = 3.0
# Seconds a keepalive may go unanswered before its node can be silent (at least; see the module).
ANSWER_S = 2.0
# The answer window is at least this many times the slowest recent round trip.
ROUND_TRIPS = 3.0
RECENT_ROUND_TRIPS = 32
# Other nodes asked a keepalive as references when nobody else was heard since a suspect was asked.
REFERENCES = 2
# Seconds between two looks at a process's output while a line is awaited.
LISTEN_S = 0.25
# Keepalives in flight at once (each holds a thread while it waits).
ASK_AT_ONCE = 64
# Seconds one keepalive is waited for at most; a node asked again after that.
KEEPALIVE_LIMIT_S = 30.0

Ask = Callable[[str, float], bool]
# How a silent node's finding says what the watch saw.
SILENT_AS = "no output, and no answer to a keepalive on its connection"


class SilenceWatch:
    """The watch over one phase's nodes. ``ask(name, limit_s)`` sends a keepalive on the node's
    connection and says whether it was answered within ``limit_s`` (it blocks; the watch calls it
    from its own threads). ``nodes``: every node of the run with a connection, the watched ones
    and those that may serve as references.

    Callers tell the watch what each node sent (:meth:`hear`, with the node's count of bytes
    received) and ask which are silent (:meth:`silent`); both are safe from many threads."""

    def __init__(
        self,
        nodes: Iterable[str],
        silence_s: float,
        ask: Ask,
        *,
        clock: Callable[[], float] = time.monotonic,
        stalls: StallMeter | None = None,
        pool: cf.Executor | None = None,
    ) -> None:
        self.silence_s = silence_s
        self._ask = ask
        self._clock = clock
        self._stalls = stalls if stalls is not None else controller_stalls()
        now = clock()
        self._lock = threading.RLock()  # an executor may ask (and record the answer) at once
        self._heard = dict.fromkeys(nodes, now)
        self._received: dict[str, int] = {}
        self._asked: dict[str, float] = {}  # the first keepalive asked since the node was last heard
        self._asking: set[str] = set()
        self._alive: set[str] = set()  # nodes heard or answering since the watch began: references
        self._round_trips: deque[float] = deque(maxlen=RECENT_ROUND_TRIPS)
        self._pool = pool or cf.ThreadPoolExecutor(max_workers=ASK_AT_ONCE, thread_name_prefix="keepalive")

    def close(self) -> None:
        """Stop asking (keepalives in flight are left to end on their own)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> SilenceWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def hear(self, name: str, received_bytes: int) -> None:
        """What ``name``'s process has received so far: the node is heard when it grew since the
        last call, and at the first call (its process began to be watched)."""
        with self._lock:
            if self._received.get(name) != received_bytes:
                self._received[name] = received_bytes
                self._heard_now(name, self._clock())

    def _heard_now(self, name: str, when: float) -> None:
        self._alive.add(name)
        if when >= self._heard.get(name, when):
            self._heard[name] = when
            self._asked.pop(name, None)

    def quiet_s(self, name: str) -> float:
        """Seconds since ``name`` was last heard, the controller's stalls taken out."""
        with self._lock:
            return self._quiet_s(name, self._clock())

    def _quiet_s(self, name: str, now: float) -> float:
        heard = self._heard[name]
        return max(0.0, now - heard - self._stalls.stalled_s(heard, now))

    def _window_s(self) -> float:
        slowest = max(self._round_trips, default=0.0)
        return max(ANSWER_S, ROUND_TRIPS * slowest)

    def silent(self, names: Iterable[str]) -> dict[str, float]:
        """Of ``names``, those silent now, with the seconds each has been quiet (the controller's
        stalls taken out); asks the keepalives the rule needs as it goes."""
        now = self._clock()
        with self._lock:
            suspects = []
            for name in names:
                quiet = self._quiet_s(name, now)
                if quiet >= ASK_S:
                    self._start_asking(name, now)
                if quiet < self.silence_s or name not in self._asked:
                    continue
                asked = self._asked[name]
                if now - asked - self._stalls.stalled_s(asked, now) >= self._window_s():
                    suspects.append(name)
            if not suspects:
                return {}
            if len(self._heard) == 1:  # nobody else to show the controller is fine
                return {name: round(self._quiet_s(name, now), 1) for name in suspects}
            others = [n for n in self._heard if n not in suspects]
            since = min(self._asked[name] for name in suspects)
            fine = [name for name in suspects if any(self._heard[o] > self._asked[name] for o in others)]
            if len(fine) < len(suspects):
                # Nobody heard since: ask the nodes heard last, whose answer shows the controller works.
                alive = [n for n in others if n in self._alive]
                for other in sorted(alive, key=self._heard.__getitem__, reverse=True)[:REFERENCES]:
                    if self._heard[other] <= since:
                        self._start_asking(other, now)
            return {name: round(self._quiet_s(name, now), 1) for name in fine}

    def _start_asking(self, name: str, now: float) -> None:
        if name in self._asking:
            return
        self._asking.add(name)
        self._asked.setdefault(name, now)
        try:
            self._pool.submit(self._keepalive, name)
        except RuntimeError:  # the watch is closed
            self._asking.discard(name)

    def _keepalive(self, name: str) -> None:
        asked = self._clock()
        try:
            answered = self._ask(name, KEEPALIVE_LIMIT_S)
        except Exception:  # a connection that breaks while asked has not answered
            answered = False
        when = self._clock()
        with self._lock:
            self._asking.discard(name)
            if answered:
                self._round_trips.append(max(0.0, when - asked - self._stalls.stalled_s(asked, when)))
                self._heard_now(name, when)


def keepalive_of(transports: Callable[[str], Transport | None]) -> Ask:
    """``ask`` for a watch over the nodes whose transport ``transports(name)`` gives (a missing or
    closed one never answers)."""

    def ask(name: str, limit_s: float) -> bool:
        transport = transports(name)
        return transport is not None and transport.responsive(limit_s)

    return ask


class NodeSilent(HostUnavailable):
    """The node stopped answering: what it runs cannot be ended from here now (its own deadline on
    the node ends it), and its connection is dropped rather than closed."""


def listen(watch: SilenceWatch, name: str, process: RemoteProcess, during: str) -> None:
    """Tell the watch what ``name``'s process received; raise :class:`NodeSilent` once the node is
    silent (``during``: the phase, for the finding: "the facts probe")."""
    watch.hear(name, process.received_bytes)
    quiet_s = watch.silent([name]).get(name)
    if quiet_s is not None:
        raise NodeSilent(HostError("timeout", f"silent for {quiet_s:.0f} s during {during}: {SILENT_AS}"))


def read_line(
    watch: SilenceWatch, name: str, process: RemoteProcess, deadline: Deadline, during: str
) -> bytes | None:
    """The process's next stdout line; None at its end or at ``deadline``; raises
    :class:`NodeSilent` once the watch finds the node silent."""
    while True:
        line = process.readline(Deadline.after(LISTEN_S).sooner(deadline.remaining()))
        if line is not None:
            return line
        if deadline.expired or process.deadline.expired or not process.running():
            return None
        listen(watch, name, process, during)


def write_watched(
    watch: SilenceWatch, name: str, transport: Transport, process: RemoteProcess, data: bytes, during: str
) -> None:
    """Send ``data`` to the process's stdin while the watch listens to ``name``: a node that stops
    answering while the write waits on it (its link cut while a script is on its way: the write
    blocks in the connection, keepalives with it) is named silent (:class:`NodeSilent`), and its
    connection dropped so that the write stops waiting. A node that is only slow to read answers
    its keepalives, and the write waits for it. Raises what the write raised (``OSError``)."""
    sent: cf.Future[None] = cf.Future()

    def send() -> None:
        try:
            process.write(data)
            sent.set_result(None)
        except BaseException as exc:  # handed to the caller, whatever it is
            sent.set_exception(exc)

    threading.Thread(target=send, name=f"write-{name}", daemon=True).start()
    while True:
        try:
            sent.result(timeout=LISTEN_S)
            return
        except cf.TimeoutError:
            pass
        process.running()  # what arrived meanwhile is what the watch hears
        try:
            listen(watch, name, process, during)
        except NodeSilent:
            transport.abandon()
            raise
