"""The checks preflight runs, in the order it runs them and reports show them: :func:`registry`.

A check that reads another's findings (``Check.reads``) comes after it; what checks share
by I/O goes through probes (``CheckContext.probe``), which do not depend on the order. The checks
judged in the job come in the order the job runs their phases, where the phases are registered
(``checks.job.phases``).

Importing the package imports no check (a check's node script, ``checks/<check>/node.py``, is
sent to nodes on its own); the registry imports them when it is first asked.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from preflight.check import Check
    from preflight.explain import SharedExplanations


@cache
def registry() -> tuple[Check, ...]:
    from checks import (
        baseline,
        clocks,
        connect,
        environment,
        gpu_memory,
        hardware,
        limits,
        names,
        ports,
        readings,
        storage,
        versions,
    )
    from checks.job.phases import JOB_PHASES

    return (
        connect.CHECK,
        versions.CHECK,
        ports.CHECK,
        gpu_memory.CHECK,
        hardware.CHECK,
        readings.CHECK,
        environment.CHECK,
        limits.CHECK,
        names.CHECK,
        clocks.CHECK,
        storage.CHECK,
        # Each check judged in the job is the package named after its phase.
        *(import_module(f"checks.{name}").CHECK for name in JOB_PHASES),
        baseline.CHECK,
    )


def shared_explanations() -> tuple[SharedExplanations, ...]:
    """The items any check judged in the job may carry (the job could not start, a node failed in
    it): explained once, under ``job``, for every one of those checks."""
    from checks.job.explain import EXPLAINS
    from checks.job.phases import JOB_PHASES
    from preflight.explain import SharedExplanations

    return (SharedExplanations("job", tuple(JOB_PHASES), EXPLAINS),)
