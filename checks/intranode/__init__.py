"""``intranode``: an all-reduce among the GPUs (ranks) of each node, every node at once, and each
GPU's host-device copy bandwidth, inside the job; a node slow inside itself is named for that path,
and the network checks refer to it. Skipped with a reason when every node runs one process.
``judge`` judges it, ``present`` shows it.
"""

from __future__ import annotations

from checks.compute.root_cause import causes_in, refer_to_compute
from checks.intranode.explain import EXPLAINS
from checks.intranode.judge import NAME, judge_intranode
from checks.intranode.measures import MEASURES
from checks.intranode.phase import PHASE
from checks.intranode.present import PRESENTATION
from checks.job import launch
from preflight.check import Check, CheckContext
from preflight.model import CheckResult

__all__ = ["CHECK", "NAME", "PHASE", "PRESENTATION", "judge_intranode"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    found = launch.judge_job(ctx, NAME, lambda outcome: judge_intranode(outcome, ctx.config))
    # A node slow inside itself whose GPUs have NVLinks down: the hardware finding says why.
    return refer_to_compute(found, causes_in(ctx.findings), PHASE.speed_keys, not_by=None)


CHECK = Check(
    name=NAME,
    title="all-reduce among each node's own GPUs, all nodes at once; host-device copies per GPU",
    run=_run,
    presentation=PRESENTATION,
    warm_imports=launch.JOB_IMPORTS,
    prepare=launch.pack_job_script,
    reads=("ports", *PHASE.refers_to),
    settings=PHASE.settings,
    duration=PHASE.duration,
    measures=MEASURES,
    explains=EXPLAINS,
)
