"""A note is a finding that passes: every format shows it as a note, and it fails nothing, warns of
nothing and sends no node away."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

from rich.console import Console

from preflight.errors import ExitCode
from preflight.model import CheckResult, RunReport
from reports import html
from reports.json_report import load
from reports.lines import handback_of
from reports.summary import headline
from reports.terminal import print_report

HEALTHY = Path(__file__).parent / "data" / "reports" / "healthy.json"


def _with_note() -> tuple[RunReport, CheckResult]:
    report = load(HEALTHY)
    host = report.hosts[1].name
    note = CheckResult.note(
        "hardware",
        f"{host}: mlx5_0 port 1 has counted 3 symbol errors since its counters were cleared",
        (host,),
        {"item": "ib_counters", "counters": {"symbol_error": 3}},
    )
    return dataclasses.replace(report, results=(*report.results, note)), note


def test_a_note_passes_and_says_it_is_one() -> None:
    _, note = _with_note()
    assert note.status == "pass" and note.is_note
    assert note.to_dict()["details"]["note"] is True
    assert not CheckResult("hardware", "pass", "fine").is_note
    assert not CheckResult("hardware", "warn", "x", details={"note": True}).is_note


def test_a_run_with_a_note_passes_with_no_warning_and_keeps_every_node() -> None:
    report, note = _with_note()
    assert report.verdict == "pass" and report.exit_code == ExitCode.OK
    assert headline(report).startswith("PASS") and "warning" not in headline(report)
    handback = handback_of(report)
    assert note.hosts[0] in handback.good and not handback.bad


def test_every_format_shows_the_note_as_a_note() -> None:
    report, note = _with_note()
    out = io.StringIO()
    print_report(report, Console(file=out, width=200, no_color=True))
    row = next(line for line in out.getvalue().splitlines() if "symbol errors" in line)
    assert " note " in row and "PASS" not in row
    page = html.render(report)
    assert '<span class="pill st-note">NOTE</span> ' + note.summary in page
    written = json.loads(json.dumps(report.to_dict()))
    assert any(r["details"].get("note") is True and r["status"] == "pass" for r in written["results"])
