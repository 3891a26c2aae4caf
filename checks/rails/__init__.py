"""``rails``: each rail between two nodes (a GPU's rank and the NIC nearest it, or one of a CPU
node's interfaces) all-reduced on its own with the same rail of the node's ring neighbours; a node's
slow card is named by its rail. Its phase runs in the job (``checks.job``); ``judge`` judges it,
``present`` shows it. Skipped with a reason where nodes have one rail.
"""

from __future__ import annotations

from checks.compute.root_cause import causes_in, refer_to_compute
from checks.job import launch
from checks.rails.details import NAME
from checks.rails.explain import EXPLAINS
from checks.rails.judge import judge_rails
from checks.rails.measures import MEASURES, parts_named
from checks.rails.phase import PHASE
from checks.rails.present import PRESENTATION
from preflight.check import Check, CheckContext
from preflight.model import CheckResult

__all__ = ["CHECK", "NAME", "PHASE", "PRESENTATION", "judge_rails"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    found = launch.judge_job(ctx, NAME, lambda outcome: judge_rails(outcome, ctx.config))
    return refer_to_compute(found, causes_in(ctx.findings), PHASE.speed_keys)


CHECK = Check(
    name=NAME,
    title="each rail between nodes on its own (a GPU and its NIC, or one interface); the slow card named",
    run=_run,
    presentation=PRESENTATION,
    warm_imports=launch.JOB_IMPORTS,
    prepare=launch.pack_job_script,
    reads=("ports", *PHASE.refers_to),
    settings=PHASE.settings,
    duration=PHASE.duration,
    measures=MEASURES,
    parts_named=parts_named,
    explains=EXPLAINS,
)
