"""The JSON contract of the ``ports`` check's details: each node's listeners, ephemeral port and route to
the master, the matrix of connection attempts and the attempts that failed; and the ports a node
could not reach while the other nodes did.
"""

from __future__ import annotations

from typing import TypedDict

NAME = "ports"


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


class UnreachedPort(TypedDict):
    """One target's port that some sources failed: who failed it (and how) and who reached it."""

    to: str
    port: int
    kind: str  # rendezvous, ephemeral, extra
    failed: dict[str, str]  # source -> dropped, refused, unreachable, error
    reached: list[str]


class CannotReachDetails(TypedDict):
    """``cannot_reach``: nodes that failed ports the other nodes reached, named themselves."""

    item: str
    sources: list[str]  # the nodes named
    unreached: list[UnreachedPort]  # every port they failed
    blocks_job: bool  # one of them is the master's rendezvous port
