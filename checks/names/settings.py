"""``[names]``: how many peers each node resolves and how long a lookup may take; what asking the
nodes adds to a run's expected duration.
"""

from __future__ import annotations

from dataclasses import dataclass

from preflight.settings import Cost, Settings


@dataclass(frozen=True)
class NamesSection:
    """Name resolution between the nodes."""

    # Peers each node resolves besides the master and itself (all of them up to this many).
    max_peers: int = 16
    # Seconds one lookup may take before it counts as failed (a resolver that times out).
    lookup_timeout_s: float = 5.0


SETTINGS = Settings(NamesSection)
# Seconds asking the nodes takes, measured on the lab cluster (3 nodes, 2 shared cores).
DURATION = (Cost.fixed("the names probe", 0.2),)
