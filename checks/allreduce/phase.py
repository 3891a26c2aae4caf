"""The all-reduce phase of the job, declared beside the check that judges it: the sweep of message
sizes across the whole world, then the pair tests between nodes with the re-tests they call for
(``checks.job.node.allreduce``). Its findings about a node's speed refer to the node's root cause
where another check found one.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from checks.allreduce.details import NAME
from checks.allreduce.settings import SETTINGS
from checks.job.declaration import JobPhase, Timed
from checks.job.node.planning import REPEATS, SMALL_PAIRS
from checks.job.pair_plan import pairs_tested, plan_mode, plan_rounds
from checks.job.settings import AllreduceSection
from preflight.config import Config

# Seconds the sweep of message sizes takes on a healthy fabric (4x apart, 20 iterations), measured
# on the lab cluster (3 nodes, 2 shared cores); its last size may run past the sweep's budget by
# up to half of it.
SWEEP_S = 1.8
SWEEP_OVERRUN = 0.5
# The rounds of pair tests after the first wave, at most: about five of re-tests (the slow pairs,
# each suspect against two good nodes, the suspects with each other) and up to four testing the
# nodes that still look slow with each other (side_plan). A healthy round takes about a quarter
# of its budget; each round may take a second past it (its communicators' start, the agreement).
RETEST_ROUNDS = 9
HEALTHY_ROUND_SHARE = 0.25
ROUND_OVERHEAD_S = 1.0


def _sent(config: Config, names: Sequence[str], gpu: bool | None) -> dict[str, Any]:
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
        "max_bytes": cfg.sweep_top_bytes(gpu),
        "pair_bytes": cfg.pair_message_bytes(gpu),
        "pair_budget_s": cfg.pair_budget_s,
        "warmup_iters": cfg.warmup_iters,
        "iters": cfg.iters,
        "slow_ratio": cfg.slow_ratio,
        "quiet_slow_ratio": cfg.quiet_slow_ratio,
        "pairwise": pairwise,
        "rounds": plan_rounds(n, plan, switches, seed) if pairwise else [],
        **({"pair_seed": seed} if pairwise and seed is not None else {}),
    }


def _time(sent: Mapping[str, Any]) -> tuple[Timed, ...]:
    # Twice as many sizes at a factor of 2, time in proportion to the iterations; its budget at most.
    sweep_budget_s = float(sent["sweep_budget_s"])
    sweep_s = SWEEP_S * (2 if sent["sweep_factor"] == 2 else 1) * max(1, int(sent["iters"])) / 20
    rounds = len(sent["rounds"])
    again = RETEST_ROUNDS
    if sum(len(pairs) for pairs in sent["rounds"]) <= SMALL_PAIRS:
        again += REPEATS * rounds  # a small cluster repeats its pairs (repeat_plan)
    pair_budget_s = float(sent["pair_budget_s"])
    return (
        Timed(
            "the sweep of message sizes",
            1,
            sweep_budget_s,
            min(sweep_budget_s, sweep_s),
            over_s=SWEEP_OVERRUN * sweep_budget_s,
        ),
        Timed(
            "the pair rounds",
            rounds,
            pair_budget_s,
            HEALTHY_ROUND_SHARE * pair_budget_s,
            again=again,
            over_s=ROUND_OVERHEAD_S,
        ),
    )


PHASE = JobPhase(
    name=NAME,
    label="all-reduce",
    node="checks.job.node.allreduce",
    settings=SETTINGS,
    sent=_sent,
    time=_time,
    refers_to=("compute", "hardware", "intranode", "rails"),
    speed_keys=("ratio", "link", "floor_gbps", "busbw_gbps"),
)
