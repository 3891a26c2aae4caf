"""The local transport: the controller's own machine, through subprocess, without SSH."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence

from preflight.deadline import Deadline
from preflight.transport import GRACE_S, CommandResult, Transport


class LocalTransport(Transport):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._running: set[subprocess.Popen[bytes]] = set()

    def open(self, deadline: Deadline) -> None:
        return None

    def run(self, argv: Sequence[str], *, stdin: bytes | None = None, timeout_s: float) -> CommandResult:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, to end it with its children
            )
        except FileNotFoundError as exc:
            return CommandResult(127, b"", str(exc).encode(), False, time.monotonic() - started)
        self._running.add(proc)
        timed_out = False
        try:
            out, err = proc.communicate(stdin, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            out, err = proc.communicate(timeout=GRACE_S)
        finally:
            self._running.discard(proc)
        return CommandResult(proc.returncode, out, err, timed_out, time.monotonic() - started)

    def close(self) -> None:
        for proc in list(self._running):
            _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=2)
            return
        except subprocess.TimeoutExpired:
            continue
