"""The one error hierarchy of preflight and the exit codes it maps to.

The CLI is the only place that turns these into a one-line message and an exit code;
everything below it raises them with a message that says what is wrong and where.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes relied on by CI gates (docs/exit-codes.md)."""

    OK = 0
    CHECK_FAILED = 1
    USAGE_ERROR = 2
    HOSTS_UNCHECKED = 3
    INTERRUPTED = 130


class PreflightError(Exception):
    """Base of every error preflight reports to the user."""

    exit_code: ExitCode = ExitCode.USAGE_ERROR


class InputError(PreflightError):
    """A hosts file, a config file or a saved report that cannot be used.

    The message starts with the place: ``hosts.txt:3: ...``.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.line = line


class ConfigError(InputError):
    """A config file or option value that is not valid; ``key`` is the dotted key, when known."""

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None, key: str | None = None
    ) -> None:
        super().__init__(message, path=path, line=line)
        self.key = key


class UsageError(PreflightError):
    """A command line that cannot be acted on."""
