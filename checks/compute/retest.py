"""The compute burn's re-test, as the job's document holds it: the ranks slow in the first burn
(the suspects) burned again beside a few ranks that were typical in it (the controls), together
(GPUs) or each alone in turn (CPU ranks), and each one's throughput then against the controls'
median. Pure: the phase's section in, the re-test out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Retest:
    """The second, shorter burn of the suspects and the controls."""

    burn_s: float
    suspects: tuple[int, ...]
    controls: tuple[int, ...]
    flops: Mapping[int, float]  # rank -> throughput in the re-test, for every rank that burned
    reference: float | None  # the controls' median throughput in the re-test
    in_turn: bool = False  # each burned alone in turn (CPU ranks), not all together (GPUs)

    def ratio(self, rank: int) -> float | None:
        """The rank's re-test throughput over the controls' median; None when it has none."""
        flops = self.flops.get(rank)
        if flops is None or not self.reference:
            return None
        return flops / self.reference


def _ranks(value: Any) -> tuple[int, ...]:
    items = value if isinstance(value, list) else []
    return tuple(int(r) for r in items if isinstance(r, int) and not isinstance(r, bool))


def read_retest(section: Mapping[str, Any]) -> Retest | None:
    """The re-test the compute phase ran, None when it ran none (no rank was slow)."""
    found = section.get("retest")
    if not isinstance(found, Mapping):
        return None
    flops: dict[int, float] = {}
    for record in found.get("ranks") or []:
        if not isinstance(record, Mapping) or not isinstance(record.get("rank"), int):
            continue
        value = record.get("flops_per_s")
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value > 0
        ):
            flops[int(record["rank"])] = float(value)
    controls = _ranks(found.get("controls"))
    measured = [flops[r] for r in controls if r in flops]
    burn_s = found.get("burn_s")
    return Retest(
        burn_s=float(burn_s) if isinstance(burn_s, int | float) else 0.0,
        suspects=_ranks(found.get("suspects")),
        controls=controls,
        flops=flops,
        reference=float(statistics.median(measured)) if measured else None,
        in_turn=found.get("in_turn") is True,
    )
