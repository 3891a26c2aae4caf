"""``compute``: every rank multiplies matrices for the same short time inside the job (bf16 GEMM on
a GPU, fp32 on a CPU); a rank slower than the others is named with its node and GPU, and with the
cause when the GPU gives one (thermal, power brake, hardware slowdown). ``judge`` judges it,
``present`` shows it, ``attribution`` lets the network checks refer to it.
"""

from __future__ import annotations

from checks.compute.details import NAME
from checks.compute.explain import EXPLAINS
from checks.compute.judge import judge_compute
from checks.compute.measures import MEASURES, slow_gpus
from checks.compute.phase import PHASE
from checks.compute.present import PRESENTATION
from checks.job import launch
from preflight.check import Check, CheckContext
from preflight.model import CheckResult

__all__ = ["CHECK", "NAME", "PHASE", "PRESENTATION", "judge_compute"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    return launch.judge_job(ctx, NAME, lambda outcome: judge_compute(outcome, ctx.config))


CHECK = Check(
    name=NAME,
    title="compute burn on every rank (GEMM on GPUs): the slow GPU or node named, with its cause",
    run=_run,
    presentation=PRESENTATION,
    warm_imports=launch.JOB_IMPORTS,
    prepare=launch.pack_job_script,
    reads=("ports", *PHASE.refers_to),
    settings=PHASE.settings,
    duration=PHASE.duration,
    measures=MEASURES,
    parts_named=slow_gpus,
    explains=EXPLAINS,
)
