"""Every path between two sets of lab nodes throttled (tc htb classes with u32 filters on each
node's veth): the report names the two sets once, not four slow links, and nothing is left behind.
And the sparse pair plan, drawn per run, kept in the report and replayed by its seed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checks.job.pairs import plan_rounds
from preflight.nodeset import fold
from tests.lab import MakeLab
from tests.test_check_lab import results, run_check
from tests.test_distributed_lab import assert_no_job_left

pytestmark = pytest.mark.lab


def test_slow_traffic_between_two_groups_is_one_finding_about_the_groups(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(4)
    left, right = lab.nodes[:2], lab.nodes[2:]
    for a in left:
        for b in right:
            lab.throttle_link(a, b, rate_mbit=40)
    run, data = run_check(lab, tmp_path, "--only", "allreduce")
    assert run.returncode == 1, run.stdout + run.stderr
    failing = [r for r in results(data, "allreduce") if r["status"] == "fail"]
    assert len(failing) == 1, [r["summary"] for r in failing]
    (cut,) = failing
    assert cut["summary"].startswith("traffic between ")
    assert "a switch uplink or route between them" in cut["summary"]
    groups = sorted(sorted(side) for side in cut["details"]["groups"])
    assert groups == sorted([sorted(n.address for n in left), sorted(n.address for n in right)])
    assert sorted(cut["hosts"]) == sorted(n.address for n in lab.nodes)
    assert_no_job_left(lab)


def test_a_drawn_pair_plan_is_kept_in_the_report_and_replayed_by_its_seed(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    # The sparse plan (drawn per run beyond 16 nodes) asked for on four nodes, with a seed: the
    # job tests the pairs that seed draws, and the report keeps the seed to replay them.
    lab = make_lab(4)
    config = tmp_path / "preflight.toml"
    config.write_text('[allreduce]\npair_plan = "sparse"\npairwise = "always"\npair_seed = 4242\n')
    run, data = run_check(lab, tmp_path, "--only", "allreduce", "--config", str(config))
    assert run.returncode == 0, run.stdout + run.stderr
    (result,) = results(data, "allreduce")
    details = result["details"]
    assert details["pair_seed"] == 4242
    first = sorted(tuple(p["node_ranks"]) for p in details["pairs"] if not p["retest"])
    assert first == [pair for pairs in plan_rounds(4, "sparse", None, 4242) for pair in pairs]
    assert_no_job_left(lab)


def test_a_group_cut_off_is_named_alone_by_a_drawn_sparse_plan(make_lab: MakeLab, tmp_path: Path) -> None:
    # Five nodes, the sparse plan drawn from a seed; two nodes the first round did not pair with
    # each other are slow with every other node. Each met one of the others first, then two
    # known-good nodes; only the job's test of the two with each other tells a group from two
    # slow nodes.
    lab = make_lab(5)
    seed = 7
    first, second = plan_rounds(5, "sparse", None, seed)[0][:2]
    group = [lab.nodes[first[0]], lab.nodes[second[0]]]
    for node in group:
        for other in lab.nodes:
            if other not in group:
                lab.throttle_link(node, other, rate_mbit=40)
    config = tmp_path / "preflight.toml"
    config.write_text(f'[allreduce]\npair_plan = "sparse"\npair_seed = {seed}\n')
    run, data = run_check(lab, tmp_path, "--only", "allreduce", "--config", str(config))
    assert run.returncode == 1, run.stdout + run.stderr
    failing = [r for r in results(data, "allreduce") if r["status"] == "fail"]
    assert len(failing) == 1, [r["summary"] for r in failing]
    (cut,) = failing
    names = sorted(n.address for n in group)
    assert cut["summary"].startswith(f"traffic between {fold(names)} and the other 3 nodes runs at ")
    assert sorted(cut["hosts"]) == names
    assert cut["details"]["cut_off"] is True
    assert_no_job_left(lab)
