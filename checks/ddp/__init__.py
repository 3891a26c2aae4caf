"""``ddp``: a seeded tiny model trains under DDP on every rank: all join, the loss falls, parameters
and gradients agree, no straggler in its own compute time. Its phase runs in the job it shares with
``allreduce`` (``checks.job``); ``judge`` judges it, ``present`` shows it.
"""

from __future__ import annotations

from checks.compute.root_cause import causes_in, refer_to_compute
from checks.ddp.details import NAME
from checks.ddp.explain import EXPLAINS
from checks.ddp.judge import judge_ddp
from checks.ddp.measures import MEASURES
from checks.ddp.phase import PHASE
from checks.ddp.present import PRESENTATION
from checks.job import launch
from preflight.check import Check, CheckContext
from preflight.model import CheckResult

__all__ = ["CHECK", "NAME", "PHASE", "PRESENTATION", "judge_ddp"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    found = launch.judge_job(ctx, NAME, lambda outcome: judge_ddp(outcome, ctx.config))
    return refer_to_compute(found, causes_in(ctx.findings), PHASE.speed_keys)


CHECK = Check(
    name=NAME,
    title="DDP smoke training: every rank joins, the loss falls, checksums agree, no straggler",
    run=_run,
    presentation=PRESENTATION,
    warm_imports=launch.JOB_IMPORTS + launch.DDP_IMPORTS,
    prepare=launch.pack_job_script,
    reads=("ports", *PHASE.refers_to),
    settings=PHASE.settings,
    duration=PHASE.duration,
    measures=MEASURES,
    explains=EXPLAINS,
)
