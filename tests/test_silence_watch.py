"""The launcher's watch names a node silent when it sends nothing for ``silence_s``: while others
talk, at once; when nobody else is running (the others have ended, a node froze in the teardown),
after a keepalive round trip shows the controller itself is fine; and never when no node answers
at all (the controller's own link is down)."""

from __future__ import annotations

import pytest

from checks.job import launch
from checks.job.launch import _Silence
from checks.job.node.markers import BEAT_MARKER


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Node:
    """What the watch reads of a node's process: bytes received, and its stderr."""

    def __init__(self, phase: str = "allreduce") -> None:
        self.received_bytes = 0
        self.stderr_so_far = f'{BEAT_MARKER} {{"phase": "{phase}", "rank": 0, "t": 1.0}}\n'.encode()

    def beat(self) -> None:
        self.received_bytes += 100

    def stderr_contains(self, marker: bytes) -> bool:
        return marker in self.stderr_so_far


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(launch.time, "monotonic", fake)
    return fake


def test_a_node_silent_while_the_others_beat_is_named_with_its_phase(clock: Clock) -> None:
    nodes = {"a": Node(), "b": Node(), "c": Node()}
    asked: list[str] = []
    watch = _Silence(nodes, 10.0, lambda name: asked.append(name) or True)  # type: ignore[arg-type]
    for node in nodes.values():
        node.beat()
    watch.silent(nodes)  # type: ignore[arg-type]
    for _ in range(4):
        clock.now += 2.0
        nodes["a"].beat()
        nodes["b"].beat()
        assert watch.silent(nodes) == {}  # type: ignore[arg-type]
    clock.now += 2.0
    nodes["a"].beat()
    assert watch.silent(nodes) == {"c": (10.0, "allreduce")}  # type: ignore[arg-type]
    assert asked == []  # the others talk: no keepalive needed


def test_the_last_node_running_frozen_in_the_teardown_is_named(clock: Clock) -> None:
    # The others have ended; the last one stopped beating and answers no keepalive (its link is
    # cut), or answers one (its processes stopped, its sshd alive): named either way.
    for answer in (False, True):
        nodes = {"a": Node("teardown"), "b": Node("teardown")}
        watch = _Silence(nodes, 10.0, lambda name, b=answer: b if name == "b" else True)  # type: ignore[arg-type,misc]
        for node in nodes.values():
            node.beat()
        watch.silent(nodes)  # type: ignore[arg-type]
        running = {"b": nodes["b"]}  # a ended
        clock.now += 9.9
        assert watch.silent(running) == {}  # type: ignore[arg-type]
        clock.now += 0.2
        assert watch.silent(running) == {"b": (10.1, "teardown")}  # type: ignore[arg-type]


def test_a_stalled_controller_names_nobody_whose_bytes_come_in_with_the_round_trip(clock: Clock) -> None:
    # The controller itself stood still for 30 s: nobody was heard from. A keepalive's round trip
    # brings in what the nodes sent meanwhile, and nobody is named.
    nodes = {"a": Node(), "b": Node()}

    def answers(name: str) -> bool:
        nodes[name].beat()  # what was waiting arrives before the keepalive's answer
        return True

    watch = _Silence(nodes, 10.0, answers)  # type: ignore[arg-type]
    clock.now += 30.0
    assert watch.silent(nodes) == {}  # type: ignore[arg-type]


def test_when_no_node_answers_the_controllers_own_link_is_down_and_nobody_is_named(clock: Clock) -> None:
    nodes = {"a": Node(), "b": Node()}
    watch = _Silence(nodes, 10.0, lambda name: False)  # type: ignore[arg-type]
    clock.now += 30.0
    assert watch.silent(nodes) == {}  # type: ignore[arg-type]
    # With one ended node still answering, the controller's link is fine: the quiet one is named.
    watch = _Silence(nodes, 10.0, lambda name: name == "a")  # type: ignore[arg-type]
    clock.now += 30.0
    assert watch.silent({"b": nodes["b"]}) == {"b": (30.0, "allreduce")}  # type: ignore[arg-type]
