"""The checks preflight runs, in the order it runs them: :func:`registry`.

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
    from checks import allreduce, baseline, connect, ddp, gpu_memory, ports, versions

    return (
        connect.CHECK,
        versions.CHECK,
        gpu_memory.CHECK,
        # Before the distributed job: a blocked rendezvous port skips it instead of waiting it out.
        ports.CHECK,
        # One torchrun launch serves both.
        allreduce.CHECK,
        ddp.CHECK,
        # Compares what the checks above found with a previous run: it comes last.
        baseline.CHECK,
    )
