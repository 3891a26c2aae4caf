"""``versions``: the NVIDIA driver, CUDA, cuDNN, NCCL, Python, torch and every package agree
across nodes and meet ``[expect]``. Drift names the minority nodes and the values on each
side, folded by node set (``gpu31: 550.54.15 (majority gpu[01-30]: 535.104.05)``).

``[expect]`` names a fact or a package. Facts: ``driver`` (driver.version), ``cuda`` (the
driver's CUDA), ``torch``, ``torch_cuda``, ``cudnn`` and ``nccl`` (as torch reports them),
``nccl_system``, ``cudnn_system``, ``nvcc``, ``python``, ``kernel`` and ``os`` (the OS name).
Any other name is a package as pip lists it (``numpy``, ``nvidia-nccl-cu12``).

The GPUs' firmware is compared too: the VBIOS and InfoROM image versions of like GPUs between
nodes, and a corrupted InfoROM fails its node (:mod:`checks.versions.gpu_firmware`).

The judge is in :mod:`checks.versions.judge`, the matching of ``[expect]`` entries in
:mod:`checks.versions.expectations`, the version matrix and advice in :mod:`checks.versions.present`.
"""

from __future__ import annotations

from checks.versions.explain import EXPLAINS
from checks.versions.judge import ITEMS, NAME, canonical_package, judge_versions, lookup
from checks.versions.present import PRESENTATION, version_matrix
from checks.versions.settings import SETTINGS
from preflight.check import Check, CheckContext
from preflight.model import CheckResult
from preflight.settings import PROFILES

__all__ = [
    "CHECK",
    "ITEMS",
    "PRESENTATION",
    "canonical_package",
    "judge_versions",
    "lookup",
    "version_matrix",
]


def _run(ctx: CheckContext) -> list[CheckResult]:
    return judge_versions(ctx.nodes(), ctx.config)


CHECK = Check(
    name=NAME,
    title="driver, CUDA, cuDNN, NCCL, Python, torch and package versions agree and meet [expect]",
    run=_run,
    presentation=PRESENTATION,
    action="fix_config",
    node_local=True,
    settings=SETTINGS,
    profiles=PROFILES,
    explains=EXPLAINS,
)
