"""``[allreduce]``: its section (:class:`AllreduceSection`, kept with the job that reads it), what
``--quick`` and ``--deep`` change in it, and what the sweep and the pair rounds add to a run's
expected duration.
"""

from __future__ import annotations

import dataclasses

from checks.job.pairs import pairs_tested, round_count
from checks.job.settings import JOB_START, AllreduceSection
from preflight.config import Config
from preflight.settings import Cost, Profile, Settings

__all__ = ["DURATION", "SETTINGS", "AllreduceSection"]

# Seconds the sweep of message sizes takes on a healthy fabric (4x apart, 20 iterations), measured
# on the lab cluster (3 nodes, 2 shared cores).
SWEEP_S = 1.8
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


def _sweep_s(config: Config, n_hosts: int) -> float:
    # Twice as many sizes at a factor of 2, time in proportion to the iterations; its budget at most.
    cfg = config.section(AllreduceSection)
    sweep = SWEEP_S * (2 if cfg.sweep_factor == 2 else 1) * max(1, cfg.iters) / 20
    return min(cfg.sweep_budget_s, sweep)


def _pair_rounds_s(config: Config, n_hosts: int) -> float:
    # A pair round of the first wave takes about a quarter of its budget on a healthy fabric.
    cfg = config.section(AllreduceSection)
    rounds = round_count(n_hosts, cfg.pair_plan) if pairs_tested(n_hosts, cfg.pairwise) else 0
    return rounds * cfg.pair_budget_s / 4


SETTINGS = Settings(AllreduceSection, profile=_profiled)
DURATION = (JOB_START, Cost("the sweep of message sizes", _sweep_s), Cost("the pair rounds", _pair_rounds_s))
