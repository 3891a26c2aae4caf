"""``[clocks]``: how far apart clocks may be, and what asking the nodes adds to a run's expected
duration.
"""

from __future__ import annotations

from dataclasses import dataclass

from preflight.config import DriftPolicy
from preflight.settings import Cost, Settings


@dataclass(frozen=True)
class ClocksSection:
    """Clock offsets between the nodes and the controller."""

    # A node further than this from the others (beyond the measurement's uncertainty) warns...
    max_offset_s: float = 1.0
    # ...and fails past this: Kerberos (and with it NFS and other network filesystems that use
    # it) refuses tickets from clocks 5 minutes apart, object stores refuse skewed signatures.
    fail_offset_s: float = 300.0
    # Round trips per node; the shortest one is used.
    samples: int = 5
    # A node whose kernel says no time service keeps its clock synchronised while other nodes'
    # kernels say one does: clocks that agree today drift apart by seconds a week.
    unsynchronised: DriftPolicy = "warn"
    # Judge unsynchronised clocks by that policy even where no node is synchronised (by default
    # a cluster that keeps time some other way, a VM's host clock say, is only said to).
    require_synchronised: bool = False


SETTINGS = Settings(ClocksSection)
# Seconds asking the nodes takes, measured on the lab cluster (3 nodes, 2 shared cores).
DURATION = (Cost.fixed("the clocks probe", 0.2),)
