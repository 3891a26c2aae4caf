"""What every fact gatherer shares: the :class:`Sink` it fills, :class:`Unavailable` for a fact it
cannot read, and reading the node's files and commands.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    JsonDict = dict[str, Any]

# Subprocesses get a few seconds each.
SUBPROCESS_TIMEOUT_S = 5.0


class Unavailable(Exception):
    """A fact cannot be read on this node; the message is the short human reason."""


def read_text(path: str) -> str | None:
    """The text of a file (undecodable bytes replaced), or None where it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def find_tool(name: str) -> str | None:
    """A command's path: on the PATH, else in /usr/bin or /bin (a minimal PATH over SSH); None where
    it is in neither."""
    found = shutil.which(name)
    return found or next((p for p in ("/usr/bin/" + name, "/bin/" + name) if os.access(p, os.X_OK)), None)


def run_output(argv: Sequence[str], timeout: float = SUBPROCESS_TIMEOUT_S) -> tuple[int, str, str]:
    """Run a command (stdin closed, C locale): its exit status, stdout and stderr; Unavailable where
    it cannot be run or times out."""
    env = dict(os.environ, LC_ALL="C")
    try:
        proc = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        raise Unavailable(f"{argv[0]} not found on PATH") from None
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{argv[0]} timed out after {timeout:g} s") from None
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def failed(argv: Sequence[str], status: int, out: str, err: str) -> Unavailable:
    """Why a command that exited with ``status`` gave no fact: the first line it printed."""
    text = err.strip() or out.strip()
    first = text.splitlines()[0] if text else "no output"
    return Unavailable(f"{argv[0]} exited with status {status}: {first}")


def run_command(argv: Sequence[str], timeout: float = SUBPROCESS_TIMEOUT_S) -> str:
    """Run a command (stdin closed, C locale) and return its stdout, or raise Unavailable."""
    status, out, err = run_output(argv, timeout)
    if status != 0:
        raise failed(argv, status, out, err)
    return out


class Sink:
    """Where the gatherers put what they found and what they could not read; ``options`` is what
    the controller asked for (``job_env``: the job's own variables that change what is found,
    ``salt``: the key of this run's secret digests)."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.facts: JsonDict = {}
        self.unavailable: dict[str, str] = {}
        self.options: Mapping[str, Any] = options or {}
