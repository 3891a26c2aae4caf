"""Every recorded run renders the same verdict and the same culprits in every format.

``tests/data/renderings.json`` was written from the renderers as they were when it
was recorded (``python -m tests.test_recorded_renderings`` writes it again); a change to
the code that moves a verdict, a headline or a culprit in any format fails here. The runs
are the lab recordings of ``tests/data/reports`` and the runs built with the checks' own
judges (``make_synthetic``, ``make_faults``, the recorded jobs of ``tests/data/jobs`` and
``tests/data/rails``): the judges are covered as well as the renderers.
Between them, every registered check shows a finding other than a pass in some run.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from rich.console import Console

from checks import registry
from preflight.model import RunReport
from reports import html, junit
from reports.json_report import load
from reports.terminal import EXPLAIN_LINE, print_explain_line, print_report
from tests.data.reports import make_faults, make_synthetic

DATA = Path(__file__).parent / "data"
EXPECTED = DATA / "renderings.json"


def _runs() -> dict[str, Callable[[], RunReport]]:
    runs: dict[str, Callable[[], RunReport]] = {
        p.stem: (lambda p=p: load(p)) for p in sorted((DATA / "reports").glob("*.json"))
    }
    runs["synthetic_1000"] = make_synthetic.build
    runs["small_bandwidth"] = make_synthetic.small_bandwidth_run
    runs["faults"] = make_faults.faults_run
    for p in sorted((DATA / "jobs").glob("*.json")):
        runs[f"job_{p.stem}"] = lambda p=p: make_synthetic.recorded_job_run(p)
    for p in sorted((DATA / "rails").glob("*.json")):
        runs[f"rails_{p.stem}"] = lambda p=p: make_synthetic.recorded_job_run(p)
    return runs


class _Page(HTMLParser):
    """The verdict badge, the sentence and each finding's culprit chips, as a reader sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.badge = ""
        self.sentence = ""
        self.culprits: list[list[str]] = []
        self._into: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if "verdict-badge" in classes:
            self._into = "badge"
        elif tag == "h1" and "sentence" in classes:
            self._into = "sentence"
        elif tag == "p" and "culprits" in classes:
            self.culprits.append([])
        elif "node-chip" in classes and self.culprits:
            self._into = "chip"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("span", "h1", "a"):
            self._into = None

    def handle_data(self, data: str) -> None:
        if self._into == "badge":
            self.badge += data
        elif self._into == "sentence":
            self.sentence += data
        elif self._into == "chip":
            self.culprits[-1].append(data)


def rendered(report: RunReport) -> dict[str, Any]:
    page = _Page()
    page.feed(html.render(report))
    cases = ElementTree.fromstring(junit.render(report)).iter("testcase")
    outcome = {
        f"{c.get('classname')}/{c.get('name')}": next(
            (child.tag for child in c if child.tag in ("failure", "error", "skipped")), "pass"
        )
        for c in cases
    }
    screen = io.StringIO()
    console = Console(file=screen, width=200, no_color=True, force_terminal=False)
    print_report(report, console)
    print_explain_line(report, console)
    lines = [line.rstrip() for line in screen.getvalue().splitlines() if line.strip()]
    return {
        "verdict": report.verdict,
        "exit_code": int(report.exit_code),
        "results": [[r.check, r.status, list(r.hosts), r.summary] for r in report.results],
        "html": {"badge": page.badge.strip(), "sentence": page.sentence.strip(), "culprits": page.culprits},
        "junit": outcome,
        "terminal_verdict": next(
            (re.sub(r"\s+", " ", line) for line in lines if line.startswith("exit ")), ""
        ),
        "terminal_explain": next((line for line in lines if line.startswith(EXPLAIN_LINE)), ""),
    }


@pytest.mark.parametrize("name", sorted(_runs()))
def test_recorded_run_renders_its_verdict_and_culprits(name: str) -> None:
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))[name]
    assert rendered(_runs()[name]()) == expected


def test_every_recorded_run_is_pinned() -> None:
    assert sorted(json.loads(EXPECTED.read_text(encoding="utf-8"))) == sorted(_runs())


def test_every_check_has_a_recorded_finding_that_is_not_a_pass() -> None:
    """Each check's warnings, failures or errors are rendered in some recorded run, so a new
    check comes with a run that shows one (a skip does not count: every check can do more)."""
    recorded = json.loads(EXPECTED.read_text(encoding="utf-8"))
    found = {
        check
        for run in recorded.values()
        for check, status, _, _ in run["results"]
        if status in ("warn", "fail", "error")
    }
    assert [c.name for c in registry() if c.name not in found] == []


if __name__ == "__main__":
    document = {name: rendered(build()) for name, build in sorted(_runs().items())}
    EXPECTED.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    sys.stdout.write(f"{len(document)} runs written to {EXPECTED}\n")
