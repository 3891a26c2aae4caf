"""Small clusters on the lab: a node moderately slow with both its partners among three is named
alone, and two nodes, one pair, are held to their own past.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import MakeLab
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab


def test_a_node_at_two_thirds_of_its_partners_among_three_is_named_alone(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    slow = lab.nodes[2]
    lab.throttle(slow, rate_mbit=6500)
    _run, data = run_check(lab, tmp_path, "--only", "allreduce")
    named = [r for r in results(data, "allreduce") if r["status"] in ("warn", "fail")]
    assert [(r["hosts"], r["details"].get("item")) for r in named] == [([slow.address], "straggler")], named
    (straggler,) = named
    assert straggler["details"]["ratio"] < 0.8
    assert "the pairs without it" in straggler["summary"] and "tested 3 times" in straggler["summary"]


def test_two_nodes_are_held_to_their_own_past(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(2)
    config = tmp_path / "preflight.toml"
    config.write_text(f'[history]\nstore = "{tmp_path / "history.sqlite"}"\n')
    for _ in range(10):
        run, data = run_check(lab, tmp_path, "--only", "allreduce", "--config", str(config))
        assert run.returncode == 0, run.stdout[-2000:]
        (passed,) = results(data, "allreduce")
        assert "two nodes are one pair, so which of them is slow cannot be told" in passed["summary"]
    lab.throttle_link(lab.nodes[0], lab.nodes[1], rate_mbit=1000)
    run, data = run_check(lab, tmp_path, "--only", "allreduce", "--config", str(config))
    slower = [r for r in results(data, "history") if r["details"].get("item") == "slower_than_own_past"]
    assert sorted(h for r in slower for h in r["hosts"]) == sorted(n.address for n in lab.nodes), data[
        "results"
    ]
    assert all("below its own median" in r["summary"] and "over 10 runs" in r["summary"] for r in slower)
