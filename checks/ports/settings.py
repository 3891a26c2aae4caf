"""``[ports]``: the ports a job needs between nodes, and what the ports probe adds to a run's
expected duration.
"""

from __future__ import annotations

from dataclasses import dataclass

from preflight.settings import Cost, Settings


@dataclass(frozen=True)
class PortsSection:
    """Node-to-node reachability of the ports a job needs."""

    # The job's master (rendezvous) address; empty means the first host of the inventory.
    master_addr: str = ""
    # More TCP ports the job needs between nodes, besides the rendezvous port.
    extra_ports: tuple[int, ...] = ()
    # Seconds one connect attempt may take before the port counts as dropped.
    connect_timeout_s: float = 2.0
    # Also probe one random ephemeral port per node: NCCL and gloo connect on such ports.
    probe_ephemeral: bool = True


SETTINGS = Settings(PortsSection)
# Seconds the probe takes, measured on the lab cluster (3 nodes, 2 shared cores).
DURATION = (Cost.fixed("the ports probe", 0.4),)
