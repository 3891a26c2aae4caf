"""A host that stops answering during the facts probe (no output, no answer to a keepalive) is named
as silent after the run's silence_s, not after the probe's own timeout; a probe that says nothing
while its host answers is slow, and is given its whole timeout; a probe that keeps beating while it
works is waited for."""

from __future__ import annotations

import re
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
from preflight.silence import SILENT_AS
from preflight.transport.local import LocalTransport


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


class Unanswering(LocalTransport):
    """This machine as a host whose connection answers no keepalive (a node frozen or cut off)."""

    def responsive(self, timeout_s: float) -> bool:
        return False


def _gather(
    python: str, *, stay: bool, silence_s: float, probe_timeout_s: float = 60, answers: bool = True
) -> tuple[float, object]:
    started = time.monotonic()
    sessions = gather(
        [local_host()],
        LocalTransport if answers else Unanswering,
        python=python,
        probe_timeout_s=probe_timeout_s,
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
def test_a_host_that_answers_nothing_is_named_silent_after_silence_s(tmp_path: Path, stay: bool) -> None:
    # Reads its input, says nothing, would run for 5 minutes, and its connection answers no keepalive.
    python = _script(tmp_path, "cat >/dev/null &\nexec sleep 300\n")
    took, report = _gather(python, stay=stay, silence_s=4, answers=False)
    error = report.error  # type: ignore[attr-defined]
    assert error is not None and error.kind == "timeout", error
    # the connect finding adds the host; at least ASK_S + ANSWER_S (5 s) pass before it is named
    assert re.fullmatch(rf"silent for [45] s during the facts probe: {SILENT_AS}", error.message), error
    assert 4 <= took < 10


@pytest.mark.parametrize("stay", [True, False], ids=["staying", "once"])
def test_a_quiet_probe_on_a_host_that_answers_is_given_its_timeout_and_ended(
    tmp_path: Path, stay: bool
) -> None:
    # The same probe on a host that answers its keepalives: slow, not silent.
    python = _script(tmp_path, "cat >/dev/null &\nexec sleep 300\n")
    took, report = _gather(python, stay=stay, silence_s=1.5, probe_timeout_s=6)
    error = report.error  # type: ignore[attr-defined]
    assert error is not None and error.kind == "timeout", error
    assert "silent" not in error.message
    assert took >= 6
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
