"""The JSON contract of the ``connect`` check's details: the hosts reached (its pass), or the hosts
that could not be checked for one cause (each error finding).
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
