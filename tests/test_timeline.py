"""Where a run's time goes (:mod:`preflight.timeline`): the spans a run keeps for the controller and
every node, the line that says it in the terminal, and the HTML lanes, judged on real lab runs
(tests/data/reports/timeline.json: three nodes, every check; timeline_quick_64.json: 64 nodes,
``--quick``; SOURCES.md there)."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

import pytest

from preflight.model import RunReport
from preflight.timeline import CONTROLLER, JOB_START, Span, Timeline, job_phases, phase_seconds
from reports.html import render
from reports.summary import time_spent

REPORTS = Path(__file__).parent / "data" / "reports"


def _recorded(name: str) -> RunReport:
    return RunReport.from_dict(json.loads((REPORTS / f"{name}.json").read_text()))


def _lane(report: RunReport, lane: str) -> list[Span]:
    return [s for s in report.timeline if s.lane == lane]


def test_spans_are_kept_however_their_block_ends_and_come_out_by_lane_then_start() -> None:
    timeline = Timeline(time.monotonic() - 1.0)
    with pytest.raises(RuntimeError), timeline.span("node2", "facts"):
        raise RuntimeError("the probe failed")
    timeline.add("node1", "connection", timeline.origin, timeline.origin + 0.25)
    timeline.add(CONTROLLER, "facts", timeline.origin + 0.5, timeline.origin + 0.75)
    spans = timeline.spans()
    assert [(s.lane, s.phase) for s in spans] == [
        (CONTROLLER, "facts"),
        ("node1", "connection"),
        ("node2", "facts"),
    ]
    assert (spans[1].start_s, spans[1].end_s) == (0.0, 0.25)
    assert spans[2].start_s >= 1.0  # the failed block's span, from when it began


def test_a_recorded_run_keeps_each_nodes_phases_in_order_and_the_job_in_lock_step() -> None:
    report = _recorded("timeline")
    names = [h.name for h in report.hosts]
    job = job_phases(report.timeline)
    assert job[0] == JOB_START and {"compute", "allreduce", "ddp"} <= set(job)
    for name in names:
        lane = _lane(report, name)
        assert [s.phase for s in lane][:5] == ["connection", "facts", "ports", "names", "clocks"]
        # One thing at a time on a node: each span starts where or after the one before ended.
        assert all(b.start_s >= a.end_s - 0.001 for a, b in itertools.pairwise(lane))
        assert all(0 <= s.start_s <= s.end_s <= report.duration_s for s in lane)
    for phase in job[1:]:  # the ranks agree at the end of each phase: every node enters it together
        starts = [s.start_s for s in report.timeline if s.phase == phase and s.lane != CONTROLLER]
        assert len(starts) == len(names) and max(starts) - min(starts) < 0.25, phase


def test_the_terminal_line_names_the_phases_that_took_time_and_the_jobs_own() -> None:
    report = _recorded("timeline")
    line = time_spent(report)
    assert line is not None
    assert line.startswith("facts ")
    assert re.search(r"the job \d+\.\d s \(start \d+\.\d s, compute \d+\.\d s, .*allreduce \d+\.\d s", line)
    # The job's seconds are the controller's: the checks judged in it waited that long.
    job_s = sum(s for p, s in phase_seconds(report.timeline).items() if p in job_phases(report.timeline))
    assert f"the job {job_s:.1f} s" in line
    assert "versions" not in line  # a check that only judged the facts took no time worth naming


def test_a_report_saved_without_a_timeline_reads_and_writes_as_before() -> None:
    data = json.loads((REPORTS / "healthy.json").read_text())
    assert "timeline" not in data
    report = RunReport.from_dict(data)
    assert report.timeline == () and time_spent(report) is None
    assert "timeline" not in report.to_dict()
    assert 'id="timeline"' not in render(report)
    recorded = _recorded("timeline")
    assert RunReport.from_dict(recorded.to_dict()).timeline == recorded.timeline


@pytest.mark.parametrize(("name", "nodes"), [("timeline", 3), ("timeline_quick_64", 64)])
def test_the_html_draws_a_lane_for_the_controller_and_each_node_in_inventory_order(
    name: str, nodes: int
) -> None:
    report = _recorded(name)
    page = render(report)
    section = page[
        page.index('<section id="timeline"') : page.index("</section>", page.index('id="timeline"'))
    ]
    labels = re.findall(r'class="node-label[^"]*"[^>]*>([^<]+)</text>', section)
    assert labels == [CONTROLLER, *(h.name for h in report.hosts)]
    assert len(labels) == nodes + 1
    bars = re.findall(r"<title>([^<]+): ([^<]+) (\d+\.\d\d) s \(", section)
    drawn = {(lane, phase) for lane, phase, _ in bars}
    assert all((h.name, "facts") in drawn for h in report.hosts)
    assert (CONTROLLER, "the job") in drawn
    height = float(re.search(r'<svg[^>]*class="chart timeline"[^>]*height="([\d.]+)"', section).group(1))  # type: ignore[union-attr]
    assert height < 1000  # 64 lanes stay on one screen
