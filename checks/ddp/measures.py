"""What ``ddp`` measures, as the history store, the History section and Prometheus read it
(:mod:`preflight.measures`): each node's compute step in the smoke training."""

from __future__ import annotations

from preflight.facts_values import records
from preflight.measures import Gauge, Measure, Sample
from preflight.model import CheckResult
from preflight.view import number


def node_step_s(result: CheckResult) -> list[Sample]:
    """Each node's compute step (seconds): its slowest rank's median step, the one its peers wait
    for at every gradient all-reduce."""
    slowest: dict[str, float] = {}
    for rank in records(result.details.get("ranks")):
        host, step = rank.get("host"), number(rank.get("compute_step_s"))
        if isinstance(host, str) and step is not None:
            slowest[host] = max(step, slowest.get(host, step))
    return [Sample(step, node=host) for host, step in slowest.items()]


NODE_STEP = Measure(
    "ddp_step_s",
    "s",
    "node",
    "DDP compute step",
    "DDP step",
    node_step_s,
    gauge=Gauge("preflight_ddp_step_seconds", "each node's DDP compute step, its slowest rank's (seconds)"),
)
MEASURES = (NODE_STEP,)
