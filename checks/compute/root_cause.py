"""One root cause, one finding: a node that ``compute`` found slow is slow in every collective too,
so the network checks' findings about that node's speed (a slow node or link, a pair under the
floor, a DDP straggler) are turned into references to the compute finding instead of sending the
user to the node's NIC; so are they for a node slow inside itself (``intranode``) or with NVLinks
down (``hardware``), and ``intranode``'s own for the latter; and for a node with a slow card on one
rail (``rails``), which names the card. Pure: findings in, findings out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import import_module

from checks.compute.details import NAME as COMPUTE
from preflight.model import CheckResult
from preflight.nodeset import fold

ITEM = "see_compute"
ADVICE = (
    "Fix what the finding it points to names for this node first (a slow GPU or CPU, NVLinks down), "
    "then rerun: its network was not the cause."
)


def _declared() -> tuple[tuple[str, Mapping[str, str]], ...]:
    """Each check whose findings can be a node's root cause, with their items and what each says of
    the node, in the order they take precedence: the job's phases in the order it runs them, each
    after the checks its findings refer to (``refers_to``). So a slow GPU (compute, the first
    phase) comes first; NVLinks down (hardware) before a node slow inside itself (intranode), which
    refers to it; and all three before a slow rail card (rails), which refers to them.

    A job phase declares its causes in its ``PHASE`` (``root_causes``); a check outside the job, in
    its package (``ROOT_CAUSES``: ``checks.hardware``). Read when first needed: the checks that
    declare them import this module."""
    from checks.job.phases import job_phases

    phases = {phase.name: phase for phase in job_phases()}
    ordered: dict[str, Mapping[str, str]] = {}
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        phase = phases.get(name)
        if phase is None:
            ordered[name] = _outside_the_job(name)
            return
        for referred in phase.refers_to:
            visit(referred)
        if phase.root_causes:
            ordered[name] = phase.root_causes

    for name in phases:
        visit(name)
    return tuple(ordered.items())


def _outside_the_job(check: str) -> Mapping[str, str]:
    """The root causes a check that is not judged in the job declares (its package's
    ``ROOT_CAUSES``), as a job phase refers to them."""
    causes = getattr(import_module(f"checks.{check}"), "ROOT_CAUSES", None)
    if not isinstance(causes, Mapping) or not causes:
        raise TypeError(f"a job phase refers to {check!r}, whose package declares no ROOT_CAUSES")
    return causes


def _in_network(item: str) -> bool:
    """Whether a root cause is in the node's network itself: a rail's, whose ratio is against the
    rail's healthy tests, not the median node."""
    from checks.rails.phase import PHASE as RAILS_PHASE

    return item in RAILS_PHASE.root_causes


@cache
def root_causes() -> dict[str, str]:
    """Each root-cause item the network checks refer to, and what it says of the node."""
    return {item: being for _, items in _declared() for item, being in items.items()}


@cache
def cause_checks() -> tuple[str, ...]:
    """The checks whose findings can be a node's root cause, in the order they take precedence."""
    return tuple(check for check, _ in _declared())


def causes_in(findings: Mapping[str, Sequence[CheckResult]]) -> list[CheckResult]:
    """The findings of :func:`cause_checks` among a check's ``findings``, compute's first."""
    return [result for name in cause_checks() for result in findings.get(name, ())]


def slow_at_compute(compute: Sequence[CheckResult]) -> dict[str, CheckResult]:
    """Host -> the finding (compute, or inside the node) that names it slow."""
    found: dict[str, CheckResult] = {}
    for result in compute:
        if result.status == "fail" and result.details.get("item") in root_causes():
            for host in result.hosts:
                found.setdefault(host, result)
    return found


def refer_to_compute(
    results: Sequence[CheckResult],
    compute: Sequence[CheckResult],
    speed_keys: Sequence[str],
    not_by: str | None = "the network",
) -> list[CheckResult]:
    """``results`` of a network check, each finding about the speed of a node (one whose details
    hold one of the check's declared ``speed_keys``: ``JobPhase.speed_keys``) that is slow at
    compute (or has another root cause of ``compute``, the findings of the checks it reads)
    turned into a warning that refers to that finding; ``not_by``: what it clears."""
    slow = slow_at_compute(compute)
    if not slow:
        return list(results)
    referred: list[CheckResult] = []
    for result in results:
        named = [h for h in result.hosts if h in slow]
        about_speed = any(key in result.details for key in speed_keys)
        if result.status not in ("fail", "warn") or not named or not about_speed:
            referred.append(result)
            continue
        cause = slow[named[0]]
        ratio = cause.details.get("ratio")
        unit = "rank" if cause.check == COMPUTE else "node"
        in_network = _in_network(str(cause.details.get("item")))
        how = f" at {ratio:.2g}x the median {unit}" if isinstance(ratio, float) and not in_network else ""
        being = root_causes()[str(cause.details.get("item"))]
        summary = f"{result.summary.rstrip('.')}; caused by {fold(named)} {being}{how}"
        summary += f" (see the {cause.check} finding)"
        if not_by and not in_network:
            summary += f", not by {not_by}"
        details = {**result.details, "item": ITEM, "refers_to": cause.check, "slow_at_compute": named}
        referred.append(dataclasses.replace(result, status="warn", summary=summary, details=details))
    return referred
