"""``ports``: can every node reach the others on the ports the job needs?

Every node listens on the rendezvous port, the configured extra ports and one ephemeral
port (NCCL and gloo connect on such ports); then every node probes every other one. The
findings name each blocked ``node:port``, from where, and how: dropped, refused, in use; a port
that one node (or a few) cannot reach while the others do is named on the nodes that cannot.

The observation is made in :mod:`checks.ports.probe` by the node script :mod:`checks.ports.node`,
judged in :mod:`checks.ports.judge` and drawn in :mod:`checks.ports.present`.
"""

from __future__ import annotations

from checks.ports.details import NAME
from checks.ports.explain import EXPLAINS
from checks.ports.judge import PortsObservation, judge_neighbour_limits, judge_ports
from checks.ports.present import PRESENTATION
from checks.ports.probe import NODE_SCRIPT, OBSERVE, master_of, observe_ports, routes
from checks.ports.settings import DURATION, SETTINGS
from preflight.check import Check, CheckContext, on_live_nodes
from preflight.model import CheckResult
from preflight.settings import PROFILES

__all__ = [
    "CHECK",
    "NODE_SCRIPT",
    "OBSERVE",
    "PRESENTATION",
    "PortsObservation",
    "judge_neighbour_limits",
    "judge_ports",
    "master_of",
    "observe_ports",
    "routes",
]


def run(ctx: CheckContext) -> list[CheckResult]:
    if not ctx.live_sessions:
        return [CheckResult(NAME, "skip", "no reachable host to probe")]
    return judge_ports(ctx.probe(OBSERVE)) + judge_neighbour_limits(ctx.nodes())


CHECK = Check(
    name=NAME,
    title="rendezvous, job and ephemeral ports open between every pair of nodes; route to the master",
    run=run,
    presentation=PRESENTATION,
    action="fix_config",
    settings=SETTINGS,
    profiles=PROFILES,
    duration=DURATION,
    starts_early=on_live_nodes(OBSERVE),
    explains=EXPLAINS,
)
