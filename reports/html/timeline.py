"""The report's timeline: where the run's time went, a lane for the controller and one for each
node, every phase a bar over one axis of seconds (:mod:`preflight.timeline`)."""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from preflight.model import RunReport
from preflight.timeline import CONTROLLER, job_phases
from reports import timeline_chart
from reports.html.text import text
from reports.summary import time_spent

# A span shorter than this (a check that only judged what was gathered) is not drawn.
DRAWN_S = 0.005
# What the controller's lane calls the time it waited for the job.
JOB = "the job"


@dataclass(frozen=True)
class TimelineView:
    sentence: str  # where the time went, in one line
    chart: Markup
    lanes: int


def timeline_view(report: RunReport) -> TimelineView | None:
    """The timeline of a run that kept one; None for one that did not (a report saved before)."""
    if not report.timeline:
        return None
    in_job = set(job_phases(report.timeline))
    lanes: dict[str, list[tuple[str, float, float]]] = {CONTROLLER: []}
    for span in report.timeline:
        if span.seconds < DRAWN_S:
            continue
        # The controller's check that launched the job waited for it: drawn as the job.
        phase = JOB if span.lane == CONTROLLER and span.phase in in_job else span.phase
        lanes.setdefault(span.lane, []).append((phase, span.start_s, span.end_s))
    # The nodes in the inventory's order, as the grid and the node list show them.
    order = {name: i for i, name in enumerate([CONTROLLER, *(h.name for h in report.hosts)])}
    named = sorted(lanes.items(), key=lambda lane: order.get(lane[0], len(order)))
    drawn = [timeline_chart.Lane(text(name), bars) for name, bars in named if bars]
    nodes = len(drawn) - 1
    label = f"where the run's {report.duration_s:.1f} s went, on the controller and on each of {nodes} nodes"
    return TimelineView(
        sentence=text(time_spent(report) or ""),
        chart=timeline_chart.timeline_chart(drawn, label=label),
        lanes=len(drawn),
    )
