"""A host whose facts probe goes silent is named as silent after the run's silence_s, not after the
probe's own timeout; a probe that keeps beating while it works is waited for."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest

from preflight.deadline import Deadline
from preflight.gather import close_all, facts_probe_args, gather
from preflight.inventory import local_host
from preflight.node.beat import PROBE_BEAT, start_beating, stop_beating
from preflight.progress import NoProgress
from preflight.transport.local import LocalTransport


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def _gather(python: str, *, stay: bool, silence_s: float) -> tuple[float, object]:
    started = time.monotonic()
    sessions = gather(
        [local_host()],
        LocalTransport,
        python=python,
        probe_timeout_s=60,
        fanout=1,
        deadline=Deadline.after(120),
        progress=NoProgress(),
        args=facts_probe_args({}, ("json",) if stay else ()),
        stay=stay,
        silence_s=silence_s,
    )
    took = time.monotonic() - started
    try:
        return took, sessions[0].report
    finally:
        close_all(sessions)


@pytest.mark.parametrize("stay", [True, False], ids=["staying", "once"])
def test_a_silent_probe_is_named_after_silence_s_and_ended(tmp_path: Path, stay: bool) -> None:
    # Reads its input, says nothing, and would run for 5 minutes.
    python = _script(tmp_path, "cat >/dev/null &\nexec sleep 300\n")
    took, report = _gather(python, stay=stay, silence_s=1.5)
    error = report.error  # type: ignore[attr-defined]
    assert error is not None and error.kind == "timeout", error
    assert error.message == "silent for 2 s during the facts probe"  # the connect finding adds the host
    assert 1.5 <= took < 10  # named within the 10 s silence is allowed, whatever the load
    deadline = time.monotonic() + 5
    while (left := _sleepers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == []


def _sleepers() -> list[psutil.Process]:
    """This test's probe, if it still runs (a child of the test, at any depth)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.cmdline() == ["sleep", "300"] and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:
            pass
    return found


def test_a_probe_that_beats_while_it_works_is_waited_for(tmp_path: Path) -> None:
    # Beats for 3 s, twice as long as the silence allowed, then runs the real probe; its beats are
    # not what an error message would quote.
    beats = "; ".join([f"echo {PROBE_BEAT} >&2; sleep 0.3"] * 10)
    python = _script(tmp_path, f'{beats}\nexec {sys.executable} "$@"\n')
    took, report = _gather(python, stay=True, silence_s=1.5)
    assert report.error is None, report.error  # type: ignore[attr-defined]
    assert report.reachable  # type: ignore[attr-defined]
    assert took >= 3


def test_the_node_beats_on_stderr_until_it_is_stopped(capfd: pytest.CaptureFixture[str]) -> None:
    pid = start_beating(0.05)
    assert pid is not None
    time.sleep(0.5)
    stop_beating(pid)
    beats = capfd.readouterr().err.count(PROBE_BEAT + "\n")
    time.sleep(0.2)
    assert beats >= 4
    assert capfd.readouterr().err.count(PROBE_BEAT) == 0
    assert not psutil.pid_exists(pid)
