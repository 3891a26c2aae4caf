"""``ports`` on the lab: what differs on one node's route is named on that node alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import MakeLab
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab


def test_one_node_with_another_mtu_is_named_alone_among_three(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    lab.exec(3, ["ip", "link", "set", "eth0", "mtu", "1400"])
    run, data = run_check(lab, tmp_path, "--only", "ports")
    assert run.returncode == 0, run.stdout + run.stderr  # a warning: the run still passes
    (finding,) = [r for r in results(data, "ports") if r["status"] == "warn"]
    assert finding["hosts"] == [lab.node(3).address]
    assert "different MTUs" in finding["summary"] and f"{lab.node(3).address}: 1400" in finding["summary"]
