"""What a finished job says about one of its phases, as every judge of a phase starts: the phase
was not run, the job's failed nodes, an error the phase raised, or the results rank 0 printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from checks.job.job_findings import job_results, phase_error_result
from checks.job.outcome import JobOutcome, phase_errors
from checks.job.phases import job_phase
from preflight.model import CheckResult


@dataclass(frozen=True)
class PhaseReport:
    """One phase of a job, for the check that judges it.

    ``section`` is the phase's results as rank 0 printed them; when it is None, ``findings``
    are the check's whole verdict (not run, the nodes that failed, the error, or why the phase
    measured nothing: its ``skipped``). Otherwise
    ``findings`` name the nodes that failed after the results were in (warnings), and the
    judge adds its own.
    """

    findings: list[CheckResult]
    section: Mapping[str, Any] | None = None
    document: Mapping[str, Any] = field(default_factory=dict)


def read_phase(check: str, outcome: JobOutcome, no_results: Mapping[str, Any] | None = None) -> PhaseReport:
    """The job's phase judged by ``check`` (a phase is named as its check is): its results, or the
    findings that stand in for them. ``no_results`` are details added (after each node's exit
    status) when the job printed none.
    """
    phase = check
    label = job_phase(phase).label  # what a person calls it: "all-reduce"
    if phase not in outcome.phases:
        summary = f"not run: the job ran without the {label} phase"
        return PhaseReport([CheckResult(check, "skip", summary, (), {"item": "phase_not_run"})])
    findings = job_results(check, outcome, phase)
    document = outcome.document or {}
    section = document.get(phase)
    if isinstance(section, Mapping) and section.get("skipped"):
        # The phase ran and measured nothing, for the reason it gives (one rank a node, one rail).
        skipped = CheckResult(
            check, "skip", f"not measured: {section['skipped']}", (), {"item": "phase_skipped"}
        )
        return PhaseReport([*findings, skipped])
    if isinstance(section, Mapping):
        return PhaseReport(findings, section, document)
    if findings:
        return PhaseReport(findings)
    errors = phase_errors(document)
    raised = errors.get(phase) or errors.get("init")
    if raised:
        return PhaseReport([phase_error_result(check, outcome, phase, raised)])
    details = {
        "item": "no_results",
        "exit_status": {n.host: n.exit_status for n in outcome.nodes},
        **(no_results or {}),
    }
    return PhaseReport([CheckResult(check, "error", f"the job printed no {label} results", (), details)])
