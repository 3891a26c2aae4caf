"""A healthy cluster checked again and again passes every time, with no warning that comes and goes.

A check that cries wolf on a healthy cluster wastes a team's morning; this runs the whole
check ten times in a row on the same healthy lab nodes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import MakeLab
from tests.test_check_lab import run_check

pytestmark = pytest.mark.lab

RUNS = 10


def test_ten_runs_on_a_healthy_cluster_pass_without_warnings(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    outcomes = []
    for _ in range(RUNS):
        run, data = run_check(lab, tmp_path)
        noisy = [
            f"{r['check']} {r['status']}: {r['summary']}"
            for r in data["results"]
            if r["status"] in ("warn", "fail", "error")
        ]
        outcomes.append((run.returncode, noisy))
    assert outcomes == [(0, [])] * RUNS
