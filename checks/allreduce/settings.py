"""``[allreduce]``: its section (:class:`AllreduceSection`, kept with the job that reads it) and
what ``--quick`` and ``--deep`` change in it. What the sweep and the pair rounds add to a run's
expected duration is counted from the phase it declares (``checks.allreduce.phase``).
"""

from __future__ import annotations

import dataclasses

from checks.job.settings import AllreduceSection
from preflight.settings import Profile, Settings

__all__ = ["SETTINGS", "AllreduceSection"]

# --quick's sweep: timed iterations and warm-ups per size (nccl-tests' -n and -w; the standard
# profile's are 20 and 5; the probe op of each size is its first warm-up). A quick verdict reads
# the sums of every size and the busbw of the largest against the floor: fewer ops per size keep
# every size's correctness check. Most of the sweep's ops are at the small sizes, where an op
# costs its latency (3-5 ms on the lab's shared cores), so the sweep's time follows their count.
QUICK_ITERS = 5
QUICK_WARMUP_ITERS = 1


def _profiled(cfg: AllreduceSection, profile: Profile) -> AllreduceSection:
    if profile == "quick":
        return dataclasses.replace(
            cfg,
            sweep_budget_s=1.0,
            max_bytes=cfg.max_bytes or 4 << 20,
            pairwise="never",
            iters=min(cfg.iters, QUICK_ITERS),
            warmup_iters=min(cfg.warmup_iters, QUICK_WARMUP_ITERS),
        )
    if profile == "deep":
        return dataclasses.replace(
            cfg,
            sweep_budget_s=max(cfg.sweep_budget_s, 20.0),
            pair_budget_s=max(cfg.pair_budget_s, 4.0),
            pair_plan="full",
            iters=max(cfg.iters, 50),
            sweep_factor=2,
        )
    return cfg


SETTINGS = Settings(AllreduceSection, profile=_profiled)
