"""``[baseline]``: how far a run may fall behind the known-good run it is compared with."""

from __future__ import annotations

from dataclasses import dataclass

from preflight.config import DriftPolicy


@dataclass(frozen=True)
class BaselineSection:
    """Comparing a run with a previous known-good one (``--baseline RUN.json``)."""

    # A busbw below (1 - this) of the baseline's, at the same message size or pair, fails.
    max_busbw_drop: float = 0.2
    # What a version that changed since the baseline is: an upgrade may be intended.
    version_change: DriftPolicy = "warn"
    # What a node that was not in the baseline is.
    new_node: DriftPolicy = "warn"
