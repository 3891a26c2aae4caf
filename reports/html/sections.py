"""A section per check: its heading and about line, its findings (culprits, advice, the blocks
the check presents under a finding, the raw details) and its evidence, all from the check's
own presentation; problems first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from preflight.explain import code_spans
from preflight.explained import explained_items, explanation_for
from preflight.model import CheckResult, RunReport
from preflight.nodeset import fold
from preflight.registry import presentation_of
from preflight.status import overall, severity
from preflight.view import Block
from reports.html.details import KV, generic_details
from reports.html.grid import check_anchor, checks_of, heading
from reports.html.text import Anchors, text


@dataclass(frozen=True)
class Culprit:
    name: str
    anchor: str


@dataclass(frozen=True)
class Finding:
    anchor: str
    check: str
    check_title: str
    status: str
    summary: str
    hosts: str  # folded
    host_count: int
    note: bool  # a finding that passes but that a reader should see (CheckResult.note)
    culprits: Sequence[Culprit]
    advice: str
    blocks: Sequence[Block]
    raw: Sequence[KV]
    # What the finding's item means (preflight explain): its key, then (heading, spans) per field,
    # a span being (is code, text).
    explain_key: str
    explanation: Sequence[tuple[str, Sequence[tuple[bool, str]]]]


@dataclass(frozen=True)
class Section:
    check: str
    anchor: str
    title: str
    about: str
    status: str
    headline: str
    findings: Sequence[Finding]
    blocks: Sequence[Block]


def finding_view(result: CheckResult, index: int, anchors: Anchors) -> Finding:
    culprits = [Culprit(text(h), anchors(h)) for h in result.hosts[:12]]
    presentation = presentation_of(result.check)
    explained = explanation_for(result.check, result.details, explained_items())
    return Finding(
        anchor=f"finding-{index}",
        check=result.check,
        check_title=heading(result.check),
        status=result.status,
        summary=text(result.summary),
        hosts=text(fold(result.hosts)),
        host_count=len(result.hosts),
        note=result.is_note,
        culprits=culprits,
        advice=presentation.advice(result) if presentation else "",
        blocks=list(presentation.finding(result)) if presentation else [],
        raw=generic_details(result.details),
        explain_key=explained.key if explained else "",
        explanation=[(h, code_spans(t)) for h, t in explained.fields()] if explained else [],
    )


def build_sections(report: RunReport, findings: Mapping[int, Finding]) -> list[Section]:
    sections: list[Section] = []
    for position, check in enumerate(checks_of(report)):
        presentation = presentation_of(check)
        indexed = [(i, r) for i, r in enumerate(report.results) if r.check == check]
        status = overall(r.status for _, r in indexed)
        ordered_findings = [findings[i] for i, _ in sorted(indexed, key=lambda ir: severity(ir[1].status))]
        blocks = list(presentation.evidence(report)) if presentation else []
        first = ordered_findings[0].summary if ordered_findings else ""
        sections.append(
            Section(
                check=check,
                anchor=check_anchor(check, position),
                title=presentation.heading if presentation else text(check),
                about=presentation.about if presentation else "",
                status=status,
                headline=first,
                findings=ordered_findings,
                blocks=blocks,
            )
        )
    # Problems first, then what passed; a skipped check says least.
    sections.sort(key=lambda s: (s.status == "skip", severity(s.status)))
    return sections
