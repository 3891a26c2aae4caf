"""Launching one distributed job across every node with torchrun, over the SSH transports.

The ``allreduce`` and ``ddp`` checks share one launch (each torchrun start costs seconds):
the first of them to run starts the job with the phases of every selected check, and
both judge its outcome. Every node gets a deadline; a node that fails, dies or never
joins ends the job on all the others, and is named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NodeOutcome:
    """How the job went on one node."""

    host: str  # the host's name in the inventory
    node_rank: int
    exit_status: int | None  # None: never reported one (killed, or the connection was lost)
    timed_out: bool  # ended at its deadline
    lost: bool  # the node stopped answering (SSH connection lost) during the job
    killed: bool  # ended by preflight because another node failed first
    stderr: str  # the node's stderr (torchrun, NCCL_DEBUG lines, tracebacks), capped

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not (self.timed_out or self.lost or self.killed)


@dataclass(frozen=True)
class JobOutcome:
    """What one torchrun job across the nodes produced."""

    phases: tuple[str, ...]
    backend: str  # "nccl" | "gloo"
    master: str  # address the nodes rendezvoused at
    port: int
    nodes: tuple[NodeOutcome, ...]
    duration_s: float
    # The JSON document printed by global rank 0, None when it printed none.
    document: Mapping[str, Any] | None = None
    # Why the job could not be launched at all (None when it was).
    launch_error: str | None = None
    # Per-node environment the job ran with (NCCL_SOCKET_IFNAME, ...), secrets masked.
    environment: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def failed_nodes(self) -> Sequence[NodeOutcome]:
        return [n for n in self.nodes if not n.ok]
