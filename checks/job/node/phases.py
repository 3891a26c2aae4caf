"""The job's phases, in the order they run: each a function of the harness (``harness.Job``) that
returns its part of rank 0's document. The harness knows the phases by this table only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checks.job.node import allreduce, compute, ddp, intranode, rails

if TYPE_CHECKING:
    from collections.abc import Callable

    from checks.job.node.harness import Job

PHASES: dict[str, Callable[[Job], dict[str, Any]]] = {
    "compute": compute.run,
    "intranode": intranode.run,
    "allreduce": allreduce.run,
    "rails": rails.run,
    "ddp": ddp.run,
}
