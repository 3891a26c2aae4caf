"""The JSON contract of the ``connect`` check's details: the hosts reached (its pass), the hosts
that could not be checked for one cause (each error finding), and the hosts whose login shell
prints on standard output (a note).
"""

from __future__ import annotations

from typing import Any, TypedDict


class Unreached(TypedDict):
    """Hosts that could not be checked for one cause, each with its own message."""

    cause: str  # a host error kind: "unreachable", "auth_refused"...
    errors: dict[str, str]


class Reached(TypedDict):
    """The hosts reached and probed."""

    reached: list[str]
    accepted_host_keys: dict[str, Any]  # host -> the keys accepted on first connection
    probe_s: dict[str, Any]  # host -> seconds the facts probe took


class ShellOutput(TypedDict):
    """Hosts whose login shell printed on stdout around the probe: a note (``note`` is true)."""

    item: str  # "shell_output"
    first_lines: dict[str, str]  # host -> the first line its shell printed
    bytes: dict[str, int]  # host -> how many bytes its shell printed
