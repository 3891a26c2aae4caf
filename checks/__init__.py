"""The checks preflight runs, in the order it runs them and reports show them: :func:`registry`.

A check that reads another's findings (``Check.reads``) comes after it; what checks share
by I/O goes through probes (``CheckContext.probe``), which do not depend on the order.

Importing the package imports no check (a check's node script, ``checks/<check>/node.py``, is
sent to nodes on its own); the registry imports them when it is first asked.
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
        clocks,
        compute,
        connect,
        ddp,
        environment,
        gpu_memory,
        hardware,
        intranode,
        limits,
        names,
        ports,
        rails,
        readings,
        storage,
        versions,
    )

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
        compute.CHECK,
        intranode.CHECK,
        rails.CHECK,
        allreduce.CHECK,
        ddp.CHECK,
        baseline.CHECK,
    )
