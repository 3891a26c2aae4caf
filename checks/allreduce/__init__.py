"""``allreduce``: busbw across the world and between node pairs, judged on the large sizes; slow
nodes and links named once a re-test confirms them; NCCL's fall-back to TCP. Its phase runs in the
job it shares with ``ddp`` (``checks.job``); ``judge`` judges it, ``present`` shows it.
"""

from __future__ import annotations

from checks.allreduce.details import NAME
from checks.allreduce.explain import EXPLAINS
from checks.allreduce.judge import judge_allreduce
from checks.allreduce.measures import MEASURES
from checks.allreduce.phase import PHASE
from checks.allreduce.present import PRESENTATION
from checks.compute.root_cause import causes_in, refer_to_compute
from checks.job import launch
from preflight.check import Check, CheckContext
from preflight.model import CheckResult
from preflight.settings import PROFILES

__all__ = ["CHECK", "NAME", "PHASE", "PRESENTATION", "judge_allreduce"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    found = launch.judge_job(ctx, NAME, lambda outcome: judge_allreduce(outcome, ctx.config, ctx.facts()))
    return refer_to_compute(found, causes_in(ctx.findings), PHASE.speed_keys)


CHECK = Check(
    name=NAME,
    title="all-reduce bus bandwidth across the world and between node pairs; the slow node or link named",
    run=_run,
    presentation=PRESENTATION,
    warm_imports=launch.JOB_IMPORTS,
    prepare=launch.pack_job_script,
    reads=("ports", *PHASE.refers_to),
    settings=PHASE.settings,
    profiles=PROFILES,
    duration=PHASE.duration,
    measures=MEASURES,
    explains=EXPLAINS,
)
