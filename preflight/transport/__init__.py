"""How preflight runs a command on a host: one small interface, SSH, srun and local behind it.

Every command gets a deadline that is enforced on the host too (``timeout`` wraps it
there), and runs in its own process group so that it can be ended, children and all,
when the controller gives up on it. :meth:`Transport.start` gives a live process to talk
to line by line; :meth:`Transport.run` is start, feed stdin, wait.
"""

from __future__ import annotations

import select
import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from preflight.deadline import Deadline
from preflight.inventory import HostSpec
from preflight.model import HostError

# Extra seconds the controller waits beyond a command's own deadline on the host,
# for the host's `timeout` to fire and the exit status to travel back.
GRACE_S = 5.0
# Seconds between the host's TERM and KILL when a command outlives its deadline.
KILL_AFTER_S = 3
PGID_MARKER = b"preflight-pgid="
# `timeout` exits with 124 when the command ran out of time.
TIMEOUT_STATUS = 124
# What is kept of each output stream of each command: its first and its last bytes. The rest is
# read (the node never blocks on a full pipe) and dropped, so a node that prints gigabytes
# instead of its probe's answer costs the controller a few MiB, not gigabytes.
KEEP_HEAD_BYTES = 4 << 20
KEEP_TAIL_BYTES = 1 << 20


class HostUnavailable(Exception):
    """A host could not be reached or used; carries the ``HostError`` for the report."""

    def __init__(self, error: HostError) -> None:
        super().__init__(error.message)
        self.error = error


class KeptOutput:
    """One output stream as kept: the first ``head_limit`` bytes, then a rolling window of the
    last ``tail_limit``; ``cut`` counts the bytes dropped between them."""

    def __init__(self, head_limit: int = KEEP_HEAD_BYTES, tail_limit: int = KEEP_TAIL_BYTES) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.cut = 0
        self.received = 0  # every byte that arrived, kept or not
        self._head_limit = head_limit
        self._tail_limit = tail_limit

    def add(self, chunk: bytes) -> None:
        self.received += len(chunk)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        if len(self.tail) > self._tail_limit:
            excess = len(self.tail) - self._tail_limit
            del self.tail[:excess]
            self.cut += excess

    def data(self) -> bytes:
        if not self.cut:
            return bytes(self.head + self.tail)
        marker = f"\n[... {self.cut} bytes of output cut here ...]\n".encode()
        return bytes(self.head) + marker + bytes(self.tail)


@dataclass(frozen=True)
class CommandResult:
    """What one command did. ``exit_status`` is None when it never reported one. ``*_cut``: bytes
    of that stream that were dropped (see :class:`KeptOutput`)."""

    exit_status: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration_s: float
    stdout_cut: int = 0
    stderr_cut: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out

    def stderr_tail(self, lines: int = 5) -> str:
        text = self.stderr.decode("utf-8", "replace").strip().splitlines()
        return "\n".join(text[-lines:])


def wrap_command(argv: Sequence[str], timeout_s: float) -> str:
    """The shell line that runs ``argv`` on a host under its own deadline.

    ``sh -c`` makes it independent of the user's login shell; ``exec timeout`` makes
    the timeout process the leader of a new process group whose id is printed first on
    stderr, so the whole group can be killed later. Every word is quoted: nothing from
    the inventory or a config reaches the shell unquoted.
    """
    seconds = max(1, int(timeout_s + 0.999))
    inner = f"echo {PGID_MARKER.decode()}$$ >&2; exec timeout -k {KILL_AFTER_S} {seconds} {shlex.join(argv)}"
    return f"sh -c {shlex.quote(inner)}"


def split_pgid(stderr: bytes) -> tuple[int | None, bytes]:
    """Remove the process-group line that :func:`wrap_command` prints; return it and the rest. The
    line is the first unless the node's login shell printed on stderr before the command ran; a
    line not yet ended is not read."""
    start = 0 if stderr.startswith(PGID_MARKER) else stderr.find(b"\n" + PGID_MARKER) + 1
    end = stderr.find(b"\n", start)
    if (start or stderr.startswith(PGID_MARKER)) and end >= 0:
        value = stderr[start + len(PGID_MARKER) : end].strip()
        if value.isdigit():
            return int(value), stderr[:start] + stderr[end + 1 :]
    return None, stderr


class RemoteProcess(ABC):
    """A command running on a host: write to its stdin, read its stdout by lines, wait for it."""

    # How long past its own deadline the controller waits for the process to report.
    grace_s = GRACE_S

    def __init__(self, timeout_s: float) -> None:
        self.started = time.monotonic()
        self.timeout_s = timeout_s
        self.deadline = Deadline.after(timeout_s + self.grace_s)
        self._stdout = KeptOutput()
        self._stderr = KeptOutput()
        self._consumed = 0  # bytes of stdout already returned by readline (line talk stays in the head)
        # When set, readline's lines start after this marker; what came before it (the node's login
        # shell printing on stdout) is kept in ``before_frame`` (preflight.probes frames node scripts).
        self.frame: bytes | None = None
        self.before_frame = b""

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def close_stdin(self) -> None: ...

    @abstractmethod
    def _pump(self, wait_s: float) -> bool:
        """Move whatever output is ready into the buffers, waiting up to ``wait_s`` for some.

        Returns False once the process has exited and its output is drained."""

    @abstractmethod
    def _exit_status(self) -> int | None: ...

    @abstractmethod
    def kill(self) -> None:
        """End the process group on the host (TERM, then KILL); best effort, bounded."""

    @property
    def stderr_so_far(self) -> bytes:
        """What the process has written to stderr until now (as kept)."""
        return self._stderr.data()

    @property
    def received_bytes(self) -> int:
        """Bytes that have arrived on stdout and stderr so far: when it grows, the host is talking."""
        return self._stdout.received + self._stderr.received

    def waitables(self) -> list[int]:
        """File descriptors that become readable when the process has news (output, or its
        end); empty when it can only be polled."""
        return []

    def running(self, wait_s: float = 0.0) -> bool:
        """Collect output that is ready (waiting up to ``wait_s``); False once the process is over."""
        return self._pump(wait_s)

    def readline(self, deadline: Deadline) -> bytes | None:
        """The next stdout line (without its newline), or None at end of output or deadline."""
        while True:
            if self.frame is not None and (at := self._stdout.head.find(self.frame, self._consumed)) >= 0:
                self.before_frame = bytes(self._stdout.head[self._consumed : at])
                self._consumed, self.frame = at + len(self.frame), None
            end = -1 if self.frame is not None else self._stdout.head.find(b"\n", self._consumed)
            if end >= 0:
                line = bytes(self._stdout.head[self._consumed : end])
                self._consumed = end + 1
                return line
            if deadline.expired or self.deadline.expired or not self._pump(min(0.2, deadline.remaining())):
                return None

    def wait(self, deadline: Deadline | None = None) -> CommandResult:
        """Wait for the end (killing the process at the deadline) and return all of its output."""
        deadline = deadline or self.deadline
        timed_out = False
        while self._pump(min(0.2, max(0.01, deadline.remaining()))):
            if deadline.expired:
                timed_out = True
                self.kill()
                break
        status = self._exit_status()
        self._release()
        if status == TIMEOUT_STATUS:
            timed_out = True
        return self._result(None if timed_out and status is None else status, timed_out)

    def so_far(self) -> CommandResult:
        """What the process sent until now, without waiting for it or ending it: for a process on a
        node that stopped answering, whose own deadline on the node ends it (no exit status)."""
        return self._result(None, False)

    def _result(self, status: int | None, timed_out: bool) -> CommandResult:
        _, stderr = split_pgid(self._stderr.data())
        return CommandResult(
            status,
            self._stdout.data(),
            stderr,
            timed_out,
            time.monotonic() - self.started,
            stdout_cut=self._stdout.cut,
            stderr_cut=self._stderr.cut,
        )

    def _release(self) -> None:  # noqa: B027 - most processes have nothing to free
        """Free the channel or pipes once the process is over."""


class Transport(ABC):
    """Runs commands on one host. Not shared across threads."""

    kind = "ssh"  # how the host is reached, as the facts' connection record names it

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec

    @abstractmethod
    def open(self, deadline: Deadline) -> None:
        """Connect (and authenticate). Raises :class:`HostUnavailable`."""

    @abstractmethod
    def start(self, argv: Sequence[str], *, timeout_s: float) -> RemoteProcess:
        """Start ``argv`` (no shell) on the host, to end by itself within ``timeout_s``."""

    def run(self, argv: Sequence[str], *, stdin: bytes | None = None, timeout_s: float) -> CommandResult:
        """Run ``argv`` with ``stdin``; never blocks past ``timeout_s`` + grace."""
        process = self.start(argv, timeout_s=timeout_s)
        try:
            if stdin:
                process.write(stdin)
            process.close_stdin()
        except OSError:
            pass  # the process ended without reading its input: its status says why
        return process.wait()

    def responsive(self, timeout_s: float) -> bool:
        """Whether the host still answers on this connection within ``timeout_s``."""
        return True

    @property
    def accepted_host_keys(self) -> list[str]:
        """Host keys accepted during this run that no known_hosts file had (SSH only)."""
        return []

    @abstractmethod
    def close(self) -> None:
        """Release the connection and end whatever this transport still has running."""

    def abandon(self) -> None:
        """Release the connection of a host that stopped answering, without asking it to end what
        it runs (each command's own deadline on the host ends it)."""
        self.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for_any(processes: Iterable[RemoteProcess], timeout_s: float, poll_s: float = 0.05) -> None:
    """Return once any of ``processes`` may have news (output, or its end), or after ``timeout_s``
    (``poll_s`` at most when one of them can only be polled).

    poll(), not select(): a controller talking to hundreds of hosts holds file descriptors past
    select()'s limit of 1,024."""
    poller = select.poll()
    watched = False
    for process in processes:
        fds = process.waitables()
        if not fds:
            timeout_s = min(timeout_s, poll_s)
        for fd in fds:
            poller.register(fd, select.POLLIN)
            watched = True
    if watched:
        poller.poll(max(0, int(timeout_s * 1000)))
    elif timeout_s > 0:
        time.sleep(timeout_s)
