"""The checks preflight runs, in the order it runs them and reports show them: :func:`registry`.

A check that reads another's findings (``Check.reads``) comes after it; what checks share
by I/O goes through probes (``CheckContext.probe``), which do not depend on the order.

Importing the package imports no check (the node scripts in ``checks.node`` are used on
their own, by the core too); the registry imports them when it is first asked.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from preflight.check import Check


@cache
def registry() -> tuple[Check, ...]:
    from checks import (
        allreduce,
        baseline,
        compute,
        connect,
        ddp,
        gpu_memory,
        hardware,
        intranode,
        ports,
        versions,
    )

    return (
        connect.CHECK,
        versions.CHECK,
        ports.CHECK,
        gpu_memory.CHECK,
        hardware.CHECK,
        compute.CHECK,
        intranode.CHECK,
        allreduce.CHECK,
        ddp.CHECK,
        baseline.CHECK,
    )
