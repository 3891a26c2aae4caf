"""Run profiles (``--quick``, ``--deep``) and how long a run is expected to take.

A profile is a set of config changes and, for ``--quick``, the checks it runs. The expected
duration is a rough model of where a run's time goes (connecting and facts, ports, the job's
start, its all-reduce sweep, pair rounds and DDP steps), printed before the run starts and
used for the progress bar's ETA. It is an estimate, not a deadline.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

from preflight.config import Config

Profile = Literal["quick", "standard", "deep"]

# The checks --quick runs (unless --only says otherwise): no DDP, no baseline comparison; of the
# surroundings, those judged from the facts alone (they cost nothing more).
QUICK_CHECKS = ("connect", "versions", "ports", "gpu_memory", "environment", "limits", "allreduce")

# Seconds, measured on the lab cluster (3 nodes, 2 shared cores): connecting and the facts probe
# (torch imported once, by each node's host), the ports check, the job's start (the hosts fork their
# ranks, which join), what is left of the import of DDP's modules once the other checks are done,
# the sweep of message sizes on a healthy fabric (4x apart, 20 iterations), and DDP's steps.
FACTS_S = 2.0
PORTS_S = 0.4
JOB_START_S = 0.4
DDP_IMPORT_S = 0.4
SWEEP_S = 1.8
DDP_STEP_S = 0.005
DDP_FIXED_S = 0.1
DEEP_BURN_S = 10.0
# The surroundings checks that ask the nodes again (3 lab nodes); storage only when it has paths.
SURROUNDINGS_S = {"names": 0.2, "clocks": 0.2, "storage": 0.4}
# Rounds of re-tests a pair plan is given when something is slow (see retest_plan).
RETEST_ROUNDS = 5


def apply_profile(config: Config, profile: Profile) -> Config:
    """``config`` with the profile's changes: shorter and smaller for quick, longer and larger for deep."""
    allreduce = config.allreduce
    if profile == "quick":
        allreduce = dataclasses.replace(
            allreduce, sweep_budget_s=1.0, max_bytes=allreduce.max_bytes or 4 << 20, pairwise="never"
        )
        return dataclasses.replace(config, allreduce=allreduce)
    if profile == "deep":
        allreduce = dataclasses.replace(
            allreduce,
            sweep_budget_s=max(allreduce.sweep_budget_s, 20.0),
            pair_budget_s=max(allreduce.pair_budget_s, 4.0),
            pair_plan="full",
            iters=max(allreduce.iters, 50),
            sweep_factor=2,
        )
        ddp = dataclasses.replace(config.ddp, steps=max(config.ddp.steps, 200))
        # Long enough for a GPU to reach its steady temperature and clocks: thermal slowdown
        # shows after seconds, a power cap or a broken GPU at once.
        compute = dataclasses.replace(config.compute, burn_s=max(config.compute.burn_s, DEEP_BURN_S))
        return dataclasses.replace(config, allreduce=allreduce, ddp=ddp, compute=compute)
    return config


def _pair_rounds(n_nodes: int, config: Config) -> int:
    cfg = config.allreduce
    if cfg.pairwise == "never" or (cfg.pairwise == "auto" and n_nodes < 3) or n_nodes < 2:
        return 0
    full = cfg.pair_plan == "full" or (cfg.pair_plan == "auto" and n_nodes <= 16)
    if full:
        return n_nodes - 1 if n_nodes % 2 == 0 else n_nodes
    return 1 if n_nodes % 2 == 0 else 2


def expected_duration_s(config: Config, n_hosts: int, checks: Sequence[str]) -> float:
    """About how long a healthy run of ``checks`` on ``n_hosts`` takes (re-tests not counted)."""
    seconds = FACTS_S + 0.2 * math.log2(max(1, n_hosts))
    if "ports" in checks:
        seconds += PORTS_S
    asking = [name for name in SURROUNDINGS_S if name in checks]
    if not config.storage.has_paths and "storage" in asking:
        asking.remove("storage")  # it asks no node (checks.storage)
    seconds += sum(SURROUNDINGS_S[name] for name in asking)
    job = [c for c in ("compute", "intranode", "allreduce", "ddp") if c in checks]
    if job and n_hosts >= 1:
        seconds += JOB_START_S
    if "compute" in checks:
        seconds += config.compute.burn_s
    if "allreduce" in checks:
        # A sweep takes SWEEP_S on a healthy fabric (twice as many sizes at a factor of 2, time in
        # proportion to the iterations), its budget at most; a pair round a quarter of its budget.
        cfg = config.allreduce
        sweep = SWEEP_S * (2 if cfg.sweep_factor == 2 else 1) * max(1, cfg.iters) / 20
        seconds += min(cfg.sweep_budget_s, sweep)
        seconds += _pair_rounds(n_hosts, config) * cfg.pair_budget_s / 4
    if "ddp" in checks:
        seconds += DDP_IMPORT_S + DDP_FIXED_S + config.ddp.steps * DDP_STEP_S
    return seconds
