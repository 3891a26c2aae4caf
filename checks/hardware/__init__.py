"""``hardware``: GPU and fabric health audited from the facts every node reported (no root, nothing
run), nodes compared with each other. ``judge`` judges, ``present`` shows, ``xid`` classifies XIDs.
"""

from __future__ import annotations

from checks.hardware.explain import EXPLAINS
from checks.hardware.judge import NAME, judge_hardware
from checks.hardware.parts import parts_named
from checks.hardware.present import PRESENTATION
from checks.hardware.settings import SETTINGS
from preflight.check import Check, CheckContext
from preflight.model import CheckResult

__all__ = ["CHECK", "NAME", "PRESENTATION", "ROOT_CAUSES", "judge_hardware"]

# The item of this check's findings that is a node's root cause for the job's findings about the
# node's speed, and what it says of the node: NVLinks down slow every collective inside the node.
# A check outside the job declares its root causes here; the job's phases that refer to it
# (``refers_to``) place it among theirs (``checks.compute.root_cause``).
ROOT_CAUSES = {"gpu_nvlink": "having NVLinks down"}


def _run(ctx: CheckContext) -> list[CheckResult]:
    return judge_hardware(ctx.nodes(), ctx.config)


CHECK = Check(
    name=NAME,
    title="GPU and fabric health from the facts: PCIe links, slowdowns, InfiniBand ports, XID errors",
    run=_run,
    presentation=PRESENTATION,
    settings=SETTINGS,
    parts_named=parts_named,
    explains=EXPLAINS,
)
