"""The one silence watch (preflight.silence), on a fake clock: a node is silent only when it sent
nothing, answered no keepalive, and the controller shows that it is itself fine; a node that answers
is slow, never silent; a controller that stalled or whose own keepalives come back late names
nobody. Keepalives are answered (or not) by the test, as a node's sshd would."""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Iterable

import pytest

from preflight.silence import ANSWER_S, ASK_S, SilenceWatch
from preflight.stall import StallMeter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Nodes:
    """Nodes as the watch sees them: bytes received, and keepalives answered where the node's sshd
    answers (``answering``), each round trip taking ``round_trip_s`` of the fake clock."""

    def __init__(self, clock: Clock, names: Iterable[str], answering: Iterable[str] = ()) -> None:
        self.clock = clock
        self.received = dict.fromkeys(names, 0)
        self.answering = set(answering)
        self.asked: list[str] = []
        self.round_trip_s = 0.0

    def ask(self, name: str, limit_s: float) -> bool:
        self.asked.append(name)
        if name not in self.answering:
            return False
        self.clock.now += self.round_trip_s
        return True

    def beat(self, *names: str) -> None:
        for name in names:
            self.received[name] += 100


class AtOnce(cf.Executor):
    """Runs each keepalive as it is asked, in the asking thread."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def,override]
        future: cf.Future[object] = cf.Future()
        future.set_result(fn(*args, **kwargs))
        return future


@pytest.fixture
def clock() -> Clock:
    return Clock()


def watch_of(clock: Clock, nodes: Nodes, stalls: StallMeter | None = None) -> SilenceWatch:
    stalls = stalls or StallMeter(clock, start=False)
    watch = SilenceWatch(nodes.received, 10.0, nodes.ask, clock=clock, stalls=stalls, pool=AtOnce())
    look(watch, nodes, nodes.received)  # the nodes' processes begin to be watched
    return watch


def look(watch: SilenceWatch, nodes: Nodes, names: Iterable[str]) -> dict[str, float]:
    for name in names:
        watch.hear(name, nodes.received[name])
    return watch.silent(names)


def advance(clock: Clock, watch: SilenceWatch, nodes: Nodes, seconds: float, beating: Iterable[str]) -> None:
    """``seconds`` pass in steps of half a second, the ``beating`` nodes sending all along."""
    beating = list(beating)
    for _ in range(int(seconds * 2)):
        clock.now += 0.5
        nodes.beat(*beating)
        look(watch, nodes, nodes.received)


def test_a_node_frozen_while_the_others_beat_is_named_at_the_silence(clock: Clock) -> None:
    nodes = Nodes(clock, "abc", answering="ab")
    with watch_of(clock, nodes) as watch:
        advance(clock, watch, nodes, 9.5, beating="ab")
        assert look(watch, nodes, "abc") == {}
        assert "c" in nodes.asked  # asked once it was quiet for ASK_S
        clock.now += 0.5
        assert look(watch, nodes, "abc") == {"c": 10.0}


def test_a_starved_node_that_answers_its_keepalives_is_never_silent(clock: Clock) -> None:
    # Its probe sends nothing for a minute (a slow import, a starved CPU); its sshd answers.
    nodes = Nodes(clock, "abc", answering="abc")
    with watch_of(clock, nodes) as watch:
        advance(clock, watch, nodes, 60, beating="ab")
        assert look(watch, nodes, "abc") == {}
        assert nodes.asked.count("c") >= 60 / (10 + ASK_S) - 1  # asked again each time it was quiet


def test_a_controller_that_stalled_names_nobody(clock: Clock) -> None:
    # The controller stood still for 30 s (its CPU, its interpreter lock): nobody was heard, and
    # none of it counts as the nodes' silence.
    nodes = Nodes(clock, "abc", answering="abc")
    stalls = StallMeter(clock, start=False)
    with watch_of(clock, nodes, stalls) as watch:
        advance(clock, watch, nodes, 2, beating="abc")
        clock.now += 30.0
        stalls.record(clock.now, 30.0)
        assert look(watch, nodes, "abc") == {}
        assert watch.quiet_s("c") < 1.0
        assert nodes.asked == []  # not even a keepalive: the quiet was the controller's


def test_when_no_node_answers_the_silence_is_the_controllers_and_nobody_is_named(clock: Clock) -> None:
    nodes = Nodes(clock, "abc", answering="")
    with watch_of(clock, nodes) as watch:
        advance(clock, watch, nodes, 40, beating="")
        assert look(watch, nodes, "abc") == {}


def test_a_node_frozen_after_the_others_finished_is_named_once_another_answers(clock: Clock) -> None:
    # The others have ended their work (they send nothing more, but their sshd answers): the frozen
    # one is named once a reference keepalive shows the controller is fine.
    nodes = Nodes(clock, "abc", answering="ab")
    with watch_of(clock, nodes) as watch:
        advance(clock, watch, nodes, 1, beating="abc")
        for _ in range(22):
            clock.now += 0.5
            watch.silent(["c"])  # only c is still watched: a and b are done
        assert set(nodes.asked) >= {"a", "c"}  # a was asked as a reference
        assert watch.silent(["c"]) == {"c": pytest.approx(11.0, abs=0.6)}


def test_a_run_of_one_node_names_its_node_on_its_own_silence(clock: Clock) -> None:
    nodes = Nodes(clock, "a", answering="")
    with watch_of(clock, nodes) as watch:
        advance(clock, watch, nodes, 9.5, beating="")
        assert look(watch, nodes, "a") == {}
        clock.now += 0.5
        assert look(watch, nodes, "a") == {"a": 10.0}


def test_keepalives_that_come_back_slowly_widen_the_answer_window(clock: Clock) -> None:
    # The controller's own round trips take 5 s (it is loaded): a node whose keepalive has gone
    # unanswered for 6 s is not yet silent; at three round trips (15 s) it is.
    nodes = Nodes(clock, "abc", answering="ab")
    with watch_of(clock, nodes) as watch:
        nodes.round_trip_s = 5.0
        advance(clock, watch, nodes, ASK_S + 1, beating="a")  # b answers its keepalive in 5 s
        assert watch._window_s() == pytest.approx(15.0)
        nodes.round_trip_s = 0.0
        advance(clock, watch, nodes, 6, beating="ab")  # c: quiet 15 s, asked 11 s ago
        assert look(watch, nodes, "abc") == {}
        advance(clock, watch, nodes, 4.5, beating="ab")
        assert set(look(watch, nodes, "abc")) == {"c"}


def test_the_answer_window_is_never_below_its_floor(clock: Clock) -> None:
    nodes = Nodes(clock, "ab", answering="ab")
    with watch_of(clock, nodes) as watch:
        assert watch._window_s() == ANSWER_S


def test_the_stall_meter_counts_the_stalled_part_of_a_span() -> None:
    meter = StallMeter(lambda: 100.0, start=False)
    meter.record(10.0, 2.0)  # stalled from 8 to 10
    meter.record(20.0, 1.0)  # from 19 to 20
    meter.record(30.0, 5.0)  # from 25 to 30
    assert meter.stalled_s(0, 100) == 8.0
    assert meter.stalled_s(9, 100) == 7.0
    assert meter.stalled_s(9, 19.5) == 1.5
    assert meter.stalled_s(11, 18) == 0.0
    assert meter.stalled_s(26, 27) == 1.0
    assert meter.stalled_s(40) == 0.0


def test_the_stall_meter_sees_its_own_thread_held_up() -> None:
    # The meter's thread needs the interpreter lock to run: a thread that holds it for 0.5 s
    # (a C call that does not let go) is a stall the meter measures.
    import time

    meter = StallMeter()
    time.sleep(0.3)
    started = time.monotonic()
    _hold_the_interpreter(0.5)
    time.sleep(0.3)
    assert meter.stalled_s(started) >= 0.3


def _hold_the_interpreter(seconds: float) -> None:
    import re
    import time

    # A catastrophic backtracking match runs in C without releasing the GIL; grow it until it
    # lasts about ``seconds``.
    n = 18
    while True:
        started = time.monotonic()
        re.match(r"(a+)+$", "a" * n + "b")
        if time.monotonic() - started >= seconds:
            return
        n += 1
