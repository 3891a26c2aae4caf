"""The job's phases as the controller knows them, in the order they run, each declared once: what
its node side is sent, the time it may take, what a person calls it and which check judges it. The
node side's table of the same phases is ``checks.job.node.phases``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checks.job.node.compute import RETEST_SHARE
from checks.job.node.planning import REPEATS, SMALL_PAIRS
from checks.job.node.rails import MAX_CPU_RAILS
from checks.job.pair_plan import pairs_tested, plan_mode, plan_rounds, ring_pairs
from checks.job.settings import (
    RAIL_PASSES,
    AllreduceSection,
    ComputeSection,
    DdpSection,
    RailsSection,
    rail_test_rounds,
)
from preflight.config import Config

# The largest all-reduce message of the sweep and the pair tests' message, by device: gloo between
# CPU nodes reaches its plateau by a few MiB; a GPU fabric needs large messages.
CPU_MAX_BYTES = 16 << 20
GPU_MAX_BYTES = 1 << 30
CPU_PAIR_BYTES = 4 << 20
GPU_PAIR_BYTES = 256 << 20
# Inside each node: an all-reduce of this many bytes, best of this many trials, and each GPU's
# copies to and from the host.
INTRANODE_BYTES = 4 << 20
INTRANODE_ITERS = 3
COPY_BYTES = 256 << 20
# Seconds each phase may take beyond what it is sent to spend.
DDP_S = 20.0
COMPUTE_S = 10.0  # the compute phase's set-up and gather, on top of its burn
INTRANODE_S = 15.0  # the all-reduce inside each node and the GPUs' copies
RAILS_S = 5.0  # the rails phase's set-up and gathers, on top of its tests


@dataclass(frozen=True)
class Phase:
    """One phase of the job: ``settings`` (config, node names, GPU or not) is what its node side is
    sent, ``budget_s`` (those settings) the seconds it may take."""

    name: str
    label: str
    check: str
    settings: Callable[[Config, Sequence[str], bool], dict[str, Any]]
    budget_s: Callable[[Mapping[str, Any]], float]


def _compute(config: Config, names: Sequence[str], gpu: bool) -> dict[str, Any]:
    compute = config.section(ComputeSection)
    return {
        "burn_s": compute.burn_s,
        "matrix": compute.matrix,
        "slow_ratio": compute.slow_ratio,
        "cpu_slow_ratio": compute.cpu_slow_ratio,
        "min_flops_per_s": compute.min_tflops * 1e12,
    }


def _compute_budget_s(settings: Mapping[str, Any]) -> float:
    # The burn, and the shorter re-test that runs when a rank was slow in it.
    return COMPUTE_S + float(settings["burn_s"]) * (1 + RETEST_SHARE)


def _allreduce(config: Config, names: Sequence[str], gpu: bool) -> dict[str, Any]:
    cfg = config.section(AllreduceSection)
    n = len(names)
    switches = [config.switch_of.get(name, "") for name in names] if config.switch_of else None
    pairwise = pairs_tested(n, cfg.pairwise)
    plan = plan_mode(n, cfg.pair_plan)
    # The sparse plan's partners are drawn per run; the seed goes in the report, to replay them.
    seed = (cfg.pair_seed or random.SystemRandom().randrange(1, 2**31)) if plan == "sparse" else None
    return {
        "sweep_budget_s": cfg.sweep_budget_s,
        "sweep_factor": cfg.sweep_factor,
        "max_bytes": cfg.max_bytes or (GPU_MAX_BYTES if gpu else CPU_MAX_BYTES),
        "pair_bytes": cfg.pair_bytes or (GPU_PAIR_BYTES if gpu else CPU_PAIR_BYTES),
        "pair_budget_s": cfg.pair_budget_s,
        "warmup_iters": cfg.warmup_iters,
        "iters": cfg.iters,
        "slow_ratio": cfg.slow_ratio,
        "quiet_slow_ratio": cfg.quiet_slow_ratio,
        "pairwise": pairwise,
        "rounds": plan_rounds(n, plan, switches, seed) if pairwise else [],
        **({"pair_seed": seed} if pairwise and seed is not None else {}),
    }


def _allreduce_budget_s(settings: Mapping[str, Any]) -> float:
    # The first wave, then about five rounds of re-tests (the slow pairs, each suspect against two
    # good nodes, the suspects with each other) and up to four testing the nodes that still look
    # slow with each other (side_plan), every pair within its budget.
    rounds = len(settings["rounds"])
    per_round = settings["pair_budget_s"] + 1
    budget = settings["sweep_budget_s"] * 1.5 + (rounds + 9) * per_round
    if sum(len(pairs) for pairs in settings["rounds"]) <= SMALL_PAIRS:
        budget += REPEATS * rounds * per_round  # a small cluster repeats its pairs (repeat_plan)
    return float(budget)


def _rails(config: Config, names: Sequence[str], gpu: bool) -> dict[str, Any]:
    cfg = config.section(RailsSection)
    pairs = config.section(AllreduceSection)
    return {
        "pairs": ring_pairs(len(names)) if cfg.test == "auto" else [],
        "interfaces": list(cfg.interfaces),
        "slow_ratio": cfg.slow_ratio,
        "pair_bytes": pairs.pair_bytes or (GPU_PAIR_BYTES if gpu else CPU_PAIR_BYTES),
        "pair_budget_s": cfg.test_budget_s,
        "iters": pairs.iters,
        # The rounds a ring pair's rails take: a GPU node's rails run at once, a CPU node's in turn.
        "rail_rounds": 1 if gpu else MAX_CPU_RAILS,
    }


def _rails_budget_s(settings: Mapping[str, Any]) -> float:
    # Every pass's rounds, each test within its budget; the slow tests again as many at most.
    rounds = RAIL_PASSES * rail_test_rounds(settings["pairs"], settings["rail_rounds"])
    return float(RAILS_S + 2 * rounds * (settings["pair_budget_s"] + 1))


def _intranode(config: Config, names: Sequence[str], gpu: bool) -> dict[str, Any]:
    return {"size_bytes": INTRANODE_BYTES, "iters": INTRANODE_ITERS, "copy_bytes": COPY_BYTES}


def _ddp(config: Config, names: Sequence[str], gpu: bool) -> dict[str, Any]:
    return {"steps": config.section(DdpSection).steps}


PHASES: dict[str, Phase] = {
    phase.name: phase
    for phase in (
        Phase("compute", "compute", "compute", _compute, _compute_budget_s),
        Phase("intranode", "inside-the-node", "intranode", _intranode, lambda _: INTRANODE_S),
        Phase("allreduce", "all-reduce", "allreduce", _allreduce, _allreduce_budget_s),
        Phase("rails", "per-rail", "rails", _rails, _rails_budget_s),
        Phase("ddp", "DDP", "ddp", _ddp, lambda _: DDP_S),
    )
}
