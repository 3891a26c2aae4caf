"""``readings``: every reading the facts hold for a part (each GPU, InfiniBand/RoCE port, network
card, and the node itself) compared with the like parts of every node, by the nature each field
declares (:mod:`checks.readings.fields`), so that a part that stands out is named even where no
rule of its own looks at that field. ``compare`` compares, ``judge`` names, ``present`` shows.
"""

from __future__ import annotations

from checks.readings.details import NAME
from checks.readings.explain import EXPLAINS
from checks.readings.judge import judge_readings
from checks.readings.parts import parts_named
from checks.readings.present import PRESENTATION
from preflight.check import Check, CheckContext
from preflight.model import CheckResult

__all__ = ["CHECK", "NAME", "PRESENTATION", "judge_readings"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    return judge_readings(ctx.nodes())


CHECK = Check(
    name=NAME,
    title="Every reading of like parts compared: the GPU, port, card or node that stands out",
    run=_run,
    presentation=PRESENTATION,
    parts_named=parts_named,
    explains=EXPLAINS,
)
