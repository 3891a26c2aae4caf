"""``names``: every node resolves the master's name, its own and its peers' to the address the
controller reaches each node at; a node whose own name resolves to a loopback address is named.

Observed in :mod:`checks.names.probe` by the node script :mod:`checks.names.node`, judged in
:mod:`checks.names.judge`, shown by :mod:`checks.names.present`.
"""

from __future__ import annotations

from checks.names.explain import EXPLAINS
from checks.names.judge import NAME, Answer, NamedNode, NamesObservation, judge_names
from checks.names.present import PRESENTATION
from checks.names.probe import OBSERVE, names_to_ask, node_names
from checks.names.settings import DURATION, SETTINGS
from preflight.check import Check, CheckContext, on_live_nodes
from preflight.model import CheckResult

__all__ = [
    "CHECK",
    "PRESENTATION",
    "Answer",
    "NamedNode",
    "NamesObservation",
    "judge_names",
    "names_to_ask",
    "node_names",
]


def _run(ctx: CheckContext) -> list[CheckResult]:
    if not ctx.live_sessions:
        return [CheckResult(NAME, "skip", "no reachable host to ask")]
    return judge_names(ctx.probe(OBSERVE))


CHECK = Check(
    name=NAME,
    title="every node resolves the master's, its own and its peers' names to the expected addresses",
    run=_run,
    presentation=PRESENTATION,
    action="fix_config",
    settings=SETTINGS,
    duration=DURATION,
    starts_early=on_live_nodes(OBSERVE),
    explains=EXPLAINS,
)
