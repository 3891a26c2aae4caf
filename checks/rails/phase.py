"""The per-rail phase of the job, declared beside the check that judges it: each rail between two
nodes all-reduced on its own with the same rail of the node's ring neighbours, at the pair message
(bandwidth) and at a few bytes (latency), a slow test tested again
(``checks.job.node.rails``). A node with a slow card on a rail is the root cause of its slowness
in the checks after it; its own findings refer to the node's causes found before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from checks.job.declaration import JobPhase, Timed
from checks.job.node.planning import pack_rounds
from checks.job.node.rails import MAX_CPU_RAILS
from checks.job.pair_plan import ring_pairs
from checks.job.settings import AllreduceSection, RailsSection
from checks.rails.details import NAME
from checks.rails.settings import SETTINGS
from preflight.config import Config

# Seconds the phase may take on top of its tests: its set-up and the gathers of the nodes' cards.
SETUP_S = 5.0
# A healthy rail test takes about a quarter of its budget (as a pair test does); the latency
# pass's tests take milliseconds (1.5 s for the whole phase on three healthy lab nodes, as counted
# here). Each test may take a second past its budget (its communicator's start, the agreement).
HEALTHY_TEST_SHARE = 0.25
TEST_OVERHEAD_S = 1.0


def rail_test_rounds(pairs: Iterable[Sequence[int]], rails_in_turn: int) -> int:
    """The rounds of rail tests in one pass: the ring's pairs packed as the job packs them (a node
    in one pair a round: one round for two nodes, two for an even ring, three for an odd one),
    each as many rounds as a node's rails that run in turn."""
    return len(pack_rounds(tuple(pair) for pair in pairs)) * max(1, rails_in_turn)


def rails_in_turn(cfg: RailsSection, gpu: bool | None) -> int:
    """The rounds one ring pair's rails take: one where they run at once (a GPU node's rails, its
    GPUs); a CPU node's listed interfaces (as many as it tests), or as many as GLOO_SOCKET_IFNAME
    may name on the node where none is listed. Before the nodes are asked (``gpu`` None), a node
    is taken for a GPU node unless interfaces are listed (only a CPU node's rails are)."""
    on_gpu = not cfg.interfaces if gpu is None else gpu
    if on_gpu:
        return 1
    return min(len(cfg.interfaces), MAX_CPU_RAILS) if cfg.interfaces else MAX_CPU_RAILS


def _sent(config: Config, names: Sequence[str], gpu: bool | None) -> dict[str, Any]:
    cfg = config.section(RailsSection)
    pairs = config.section(AllreduceSection)
    return {
        "pairs": ring_pairs(len(names)) if cfg.test == "auto" else [],
        "interfaces": list(cfg.interfaces),
        "slow_ratio": cfg.slow_ratio,
        "pair_bytes": pairs.pair_message_bytes(gpu),
        "pair_budget_s": cfg.test_budget_s,
        "iters": pairs.iters,
        "rail_rounds": rails_in_turn(cfg, gpu),
    }


def _time(sent: Mapping[str, Any]) -> tuple[Timed, ...]:
    # Each pass's rounds, each test within its budget; the slow tests again as many at most.
    rounds = rail_test_rounds(sent["pairs"], int(sent["rail_rounds"]))
    budget_s = float(sent["pair_budget_s"])
    return (
        Timed("the set-up and the gathers", 1, SETUP_S, 0.0),
        Timed(
            "the bandwidth tests",
            rounds,
            budget_s,
            HEALTHY_TEST_SHARE * budget_s,
            again=rounds,
            over_s=TEST_OVERHEAD_S,
        ),
        Timed("the latency tests", rounds, budget_s, 0.0, again=rounds, over_s=TEST_OVERHEAD_S),
    )


PHASE = JobPhase(
    name=NAME,
    label="per-rail",
    node="checks.job.node.rails",
    settings=SETTINGS,
    sent=_sent,
    time=_time,
    root_causes={
        "slow_rail": "having a slow card on one of its rails",
        "slow_on_every_rail": "being slow on every rail",
    },
    refers_to=("compute", "hardware", "intranode"),
    speed_keys=("ratio", "busbw_gbps"),
)
