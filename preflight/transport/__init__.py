"""How preflight runs a command on a host: one small interface, local and SSH behind it.

Every command gets a deadline that is enforced on the host too (``timeout`` wraps it
there), and every command runs in its own process group so that it can be ended,
children and all, when the controller gives up on it.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Sequence
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


class HostUnavailable(Exception):
    """A host could not be reached or used; carries the ``HostError`` for the report."""

    def __init__(self, error: HostError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True)
class CommandResult:
    """What one command did. ``exit_status`` is None when it never reported one."""

    exit_status: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration_s: float

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
    """Remove the process-group line that :func:`wrap_command` prints; return it and the rest."""
    if stderr.startswith(PGID_MARKER):
        line, _, rest = stderr.partition(b"\n")
        value = line[len(PGID_MARKER) :].strip()
        if value.isdigit():
            return int(value), rest
    return None, stderr


class Transport(ABC):
    """Runs commands on one host. Not shared across threads."""

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec

    @abstractmethod
    def open(self, deadline: Deadline) -> None:
        """Connect (and authenticate). Raises :class:`HostUnavailable`."""

    @abstractmethod
    def run(self, argv: Sequence[str], *, stdin: bytes | None = None, timeout_s: float) -> CommandResult:
        """Run ``argv`` (no shell) with ``stdin``; never blocks past ``timeout_s`` + grace."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection and end whatever this transport still has running."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
