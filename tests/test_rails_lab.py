"""Each rail on its own, end to end on the lab cluster: every node gets two more interfaces, each on
a bridge of its own (the stand-in for a rail-optimised fabric's NICs), and one node's second rail
is throttled. The pair tests, over the nodes' control interface, see nothing; ``rails`` names that
node's interface and no other node. Without a list of interfaces the check says why it skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import MakeLab
from tests.test_check_lab import results, run_check
from tests.test_distributed_lab import assert_no_job_left

pytestmark = pytest.mark.lab


def test_a_nodes_slow_interface_is_named_by_its_rail_where_the_pair_tests_see_nothing(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    run, data = run_check(lab, tmp_path, "--only", "rails")
    assert run.returncode == 0, run.stdout + run.stderr
    (skipped,) = results(data, "rails")
    assert skipped["status"] == "skip"
    assert "reaches its peers through one interface" in skipped["summary"]

    rails = lab.add_rails(2)
    slow = lab.nodes[1]
    lab.throttle_rail(slow, rails[1], rate_mbit=2000)
    config = tmp_path / "preflight.toml"
    config.write_text(f"[rails]\ninterfaces = {rails!r}\n".replace("'", '"'))
    run, data = run_check(lab, tmp_path, "--only", "rails,allreduce", "--config", str(config), timeout_s=300)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [r for r in data["results"] if r["status"] in ("fail", "warn")]
    assert finding["check"] == "rails"
    assert finding["hosts"] == [slow.address]
    assert finding["details"]["item"] == "slow_rail"
    assert finding["summary"].startswith(f"{slow.address}'s rail 1 (rail2) is slow with both its neighbours")
    assert [r["status"] for r in results(data, "allreduce")] == ["pass"]
    assert_no_job_left(lab)

    # Two ranks a node: rail r is local rank r, the rails tested at once (as GPU nodes run them).
    hosts = lab.hosts_file(tmp_path / "two-ranks.txt", slots=2)
    run, data = run_check(
        lab, tmp_path, "--only", "rails", "--config", str(config), hosts=hosts, timeout_s=300
    )
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [r for r in data["results"] if r["status"] in ("fail", "warn")]
    assert (finding["hosts"], finding["details"]["item"]) == ([slow.address], "slow_rail")
    first_tests = [t for t in finding["details"]["tests"] if not t["retest"] and not t["latency"]]
    assert len(first_tests) == 6  # three ring pairs, two rails each
    # Node i's ranks are 2i and 2i+1: rail r is carried by local rank r on both sides.
    assert all(rank % 2 == t["rail"] for t in first_tests for rank in t["ranks"])
    assert_no_job_left(lab)
