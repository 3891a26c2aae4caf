"""``[intranode]``: how slow inside a node is too slow. Its phase runs in the job
(``checks.intranode.phase``), whose start it shares.
"""

from __future__ import annotations

from dataclasses import dataclass

from preflight.settings import Settings


@dataclass(frozen=True)
class IntranodeSection:
    """The all-reduce inside each node and the GPUs' host-device copies."""

    # A node (or GPU) below this fraction of the median node's busbw (GPU's copy rate) is slow.
    slow_ratio: float = 0.5


SETTINGS = Settings(IntranodeSection)
