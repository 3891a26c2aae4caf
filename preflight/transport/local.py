"""The local transport: the controller's own machine, through subprocess, without SSH."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
from collections.abc import Sequence

from preflight.deadline import Deadline
from preflight.inventory import HostSpec
from preflight.transport import RemoteProcess, Transport

_NOT_FOUND = 127


class LocalProcess(RemoteProcess):
    grace_s = 0.0  # the controller itself ends a local command at its deadline

    def __init__(self, argv: Sequence[str], timeout_s: float) -> None:
        super().__init__(timeout_s)
        self._proc: subprocess.Popen[bytes] | None = None
        self._status: int | None = None
        try:
            self._proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, to end it with its children
            )
        except OSError as exc:
            self._status = _NOT_FOUND
            self._stderr.add(f"{argv[0]}: {exc.strerror}\n".encode())
            return
        self._selector = selectors.DefaultSelector()
        assert self._proc.stdout is not None and self._proc.stderr is not None
        for pipe, buffer in ((self._proc.stdout, self._stdout), (self._proc.stderr, self._stderr)):
            os.set_blocking(pipe.fileno(), False)
            self._selector.register(pipe, selectors.EVENT_READ, buffer)

    def write(self, data: bytes) -> None:
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()

    def close_stdin(self) -> None:
        if self._proc is not None and self._proc.stdin is not None and not self._proc.stdin.closed:
            # Closing flushes what is still buffered: a process that ended without reading all of
            # its input (its exit status says why) must not make that an error here.
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.close()

    def _pump(self, wait_s: float) -> bool:
        if self._proc is None:
            return False
        if not self._selector.get_map():
            if self._proc.poll() is not None:
                return False
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=wait_s)
            return self._proc.poll() is None
        for key, _ in self._selector.select(timeout=wait_s):
            chunk = os.read(key.fd, 65536)
            if chunk:
                key.data.add(chunk)
            else:
                self._selector.unregister(key.fileobj)
        return True

    def waitables(self) -> list[int]:
        if self._proc is None:
            return []
        return [key.fd for key in self._selector.get_map().values()]

    def _exit_status(self) -> int | None:
        if self._proc is None:
            return self._status
        try:
            return self._proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return None

    def _exit_status_now(self) -> int | None:
        return self._status if self._proc is None else self._proc.poll()

    def kill(self) -> None:
        if self._proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self._proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self._proc.wait(timeout=2)
                return
            except subprocess.TimeoutExpired:
                continue

    def _release(self) -> None:
        if self._proc is not None:
            self.close_stdin()
            self._selector.close()
            for pipe in (self._proc.stdout, self._proc.stderr):
                if pipe is not None:
                    pipe.close()


class LocalTransport(Transport):
    kind = "local"

    def __init__(self, spec: HostSpec) -> None:
        super().__init__(spec)
        self._running: list[LocalProcess] = []

    def open(self, deadline: Deadline) -> None:
        return None

    def start(self, argv: Sequence[str], *, timeout_s: float) -> LocalProcess:
        process = LocalProcess(argv, timeout_s)
        self._running = [p for p in self._running if p._exit_status_now() is None] + [process]
        return process

    def close(self) -> None:
        for process in self._running:
            process.kill()
        self._running = []
