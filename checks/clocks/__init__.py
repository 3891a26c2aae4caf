"""``clocks``: each node's clock offset from the controller, measured over the node's connection
by the midpoint method with its uncertainty, compared between the nodes; and whether a time service
keeps each node's clock synchronised (``unknown`` where the node cannot tell).

Observed in :mod:`checks.clocks.probe` by the node script :mod:`checks.clocks.node`, judged in
:mod:`checks.clocks.judge`, shown by :mod:`checks.clocks.present`.
"""

from __future__ import annotations

from checks.clocks.explain import EXPLAINS
from checks.clocks.judge import NAME, ClockSample, ClocksObservation, best_sample, judge_clocks
from checks.clocks.present import PRESENTATION
from checks.clocks.probe import OBSERVE
from checks.clocks.settings import DURATION, SETTINGS, ClocksSection
from preflight.check import Check, CheckContext, on_live_nodes
from preflight.model import CheckResult

__all__ = ["CHECK", "PRESENTATION", "ClockSample", "ClocksObservation", "best_sample", "judge_clocks"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    if not ctx.live_sessions:
        return [CheckResult(NAME, "skip", "no reachable host to ask")]
    return judge_clocks(ctx.probe(OBSERVE), ctx.config.section(ClocksSection))


CHECK = Check(
    name=NAME,
    title="clocks agree between nodes (midpoint over SSH, with its uncertainty) and a time service runs",
    run=_run,
    presentation=PRESENTATION,
    action="fix_config",
    settings=SETTINGS,
    duration=DURATION,
    starts_early=on_live_nodes(OBSERVE),
    explains=EXPLAINS,
)
