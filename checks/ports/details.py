"""The JSON contract of the ``ports`` check's details: each node's listeners, ephemeral port and route to
the master, the matrix of connection attempts and the attempts that failed.
"""

from __future__ import annotations

from typing import TypedDict


class Route(TypedDict, total=False):
    """How a node reaches the master (:func:`checks.ports.node.route_to`)."""

    master: str
    address: str
    dev: str | None
    src: str | None
    local: bool
    mtu: int | None
    error: str  # no route to the master: a failure
    undetermined: str  # why the route could not be found (no `ip`, the kernel not asked): a note


class NodeReport(TypedDict, total=False):
    """What a node's ports probe said when ready, or (``error``) why it could not."""

    listening: dict[str, str]  # port -> "ok", "in_use", "denied", "error: ..."
    ephemeral: int | None
    hostname: str
    route: Route
    error: str


# One connection attempt: {"from", "to", "port", "kind", "status", "seconds"}.
ProbeRecord = TypedDict(
    "ProbeRecord", {"from": str, "to": str, "port": int, "kind": str, "status": str, "seconds": float}
)


class PortsDetails(TypedDict, total=False):
    """What the report draws from: on the pass, or merged into the first finding."""

    master: str
    master_address: str
    port: int
    nodes: dict[str, NodeReport]  # listening, ephemeral, route, error
    matrix: dict[str, dict[str, dict[str, str]]]  # from -> to -> kind -> status (up to 64 nodes)
    blocked: list[ProbeRecord]
