"""``[environment]``: which variables are compared between nodes, and which must match."""

from __future__ import annotations

from dataclasses import dataclass

from preflight.settings import Settings

# Variables whose difference between nodes breaks a job rather than tunes it: ranks that disagree
# on the network, its plugin or the algorithm and protocol a collective uses do not connect, or
# hang in the first collective; ranks told different masters or world sizes never rendezvous.
MUST_MATCH = (
    "NCCL_NET",
    "NCCL_NET_PLUGIN",
    "NCCL_IB_DISABLE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
)


@dataclass(frozen=True)
class EnvironmentSection:
    """Comparing the environment NCCL, torch, CUDA and gloo read on each node."""

    # Variables not compared (fnmatch patterns: "NCCL_DEBUG*").
    ignore: tuple[str, ...] = ()
    # Variables whose difference fails the run (patterns); any other difference warns.
    must_match: tuple[str, ...] = MUST_MATCH


SETTINGS = Settings(EnvironmentSection)
