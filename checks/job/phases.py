"""The job's phases: registered here, one line each, in the order the job runs them, and declared
beside the checks that judge them (``checks/<check>/phase.py``, its ``PHASE``: a
:class:`~checks.job.declaration.JobPhase`). The launcher's arguments and budget, the node's table
of phases (what the launcher sends), the registry's order of the checks and the expected duration
are all read from these declarations.

The checks' packages import the job package; the job reads their declarations by name, once every
module is imported, and nothing else of them.
"""

from __future__ import annotations

from importlib import import_module

from checks.job.declaration import JobPhase

# The checks judged in the job, one phase each, in the order the job runs the phases and the
# registry lists the checks. A check that reads another's findings comes after it (allreduce and
# ddp refer slow nodes to compute, intranode and rails); no phase depends on another having run
# (each reads only its own settings and makes its own groups).
JOB_PHASES: tuple[str, ...] = ("compute", "intranode", "rails", "allreduce", "ddp")


def job_phase(name: str) -> JobPhase:
    """The phase ``name`` as its check declares it."""
    declared = getattr(import_module(f"checks.{name}.phase"), "PHASE", None)
    if not isinstance(declared, JobPhase) or declared.name != name:
        raise TypeError(f"checks/{name}/phase.py declares no PHASE named {name!r}")
    return declared


def job_phases() -> tuple[JobPhase, ...]:
    """Every phase of the job, in the order it runs them."""
    return tuple(job_phase(name) for name in JOB_PHASES)
