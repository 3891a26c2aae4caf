"""``environment``: the variables that change what NCCL, torch, CUDA and gloo do (``NCCL_*``,
``TORCH_*``, ``CUDA_*``, ``GLOO_*``, ``OMP_NUM_THREADS``...), NCCL's configuration files and its
network plugin, compared between nodes as the job would see them.

The job's own variables (``--env``, ``--env-file``, ``[job_env]``) are applied over each node's,
as its launcher would. A difference names the odd nodes with the values on each side; values of
secret-looking names stay masked (compared by a digest keyed for the run). A value that differs
only by the node's own name or address (``NCCL_DEBUG_FILE=/logs/%h-node3.log``) is no difference.
An ``NCCL_IB_HCA`` entry that NCCL matches as a prefix of more of the node's HCAs than it names
(``mlx5_1`` beside ``mlx5_10``) warns, naming them.
Judged in :mod:`checks.environment.judge`, presented by :mod:`checks.environment.present`.
"""

from __future__ import annotations

from checks.environment.explain import EXPLAINS
from checks.environment.judge import NAME, effective_settings, judge_environment
from checks.environment.present import PRESENTATION
from checks.environment.settings import SETTINGS, EnvironmentSection
from preflight.check import Check, CheckContext
from preflight.model import CheckResult
from preflight.settings import PROFILES

__all__ = ["CHECK", "PRESENTATION", "effective_settings", "judge_environment"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    nodes = ctx.nodes()
    nccl_in_use = ctx.backend == "nccl" or (ctx.backend is None and any(n.uses_cuda for n in nodes.values()))
    cfg = ctx.config.section(EnvironmentSection)
    return judge_environment(
        nodes,
        ctx.config.job_env,
        ignore=cfg.ignore,
        must_match=cfg.must_match,
        nccl_in_use=nccl_in_use,
        addresses={s.spec.name: s.spec.address for s in ctx.sessions},
    )


CHECK = Check(
    name=NAME,
    title="NCCL, torch, CUDA and gloo variables, nccl.conf and the NCCL network plugin agree between nodes",
    run=_run,
    presentation=PRESENTATION,
    action="fix_config",
    settings=SETTINGS,
    profiles=PROFILES,
    explains=EXPLAINS,
)
