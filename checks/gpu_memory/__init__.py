"""``gpu_memory``: every node has its GPUs, with their full memory free and no memory faults.

Names the node and the GPU: missing GPUs, a smaller GPU than its siblings, memory held by
someone else's process (with its pid), uncorrected ECC errors, pending row remaps. Judged in
:mod:`checks.gpu_memory.judge`, charted in :mod:`checks.gpu_memory.present`.
"""

from __future__ import annotations

from checks.gpu_memory.explain import EXPLAINS
from checks.gpu_memory.judge import NAME, fold_indices, judge_gpu_memory
from checks.gpu_memory.present import PRESENTATION, gpu_blocks
from checks.gpu_memory.settings import SETTINGS
from preflight.check import Check, CheckContext
from preflight.model import CheckResult
from preflight.settings import PROFILES

__all__ = ["CHECK", "PRESENTATION", "fold_indices", "gpu_blocks", "judge_gpu_memory"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    return judge_gpu_memory(ctx.nodes(), ctx.config)


CHECK = Check(
    name=NAME,
    title="every node has its GPUs, their memory free and without ECC or row-remap faults",
    run=_run,
    presentation=PRESENTATION,
    action="reset_gpu",
    node_local=True,
    settings=SETTINGS,
    profiles=PROFILES,
    explains=EXPLAINS,
)
