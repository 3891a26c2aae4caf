"""The path inside a node, end to end on the lab cluster with two processes per node: a node whose
loopback is throttled (the stand-in for a slow NVLink or PCIe path) is named by ``intranode`` for
that path, and no other node is blamed; with one process per node the part is skipped with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import GpuNode, MakeLab
from tests.test_check_lab import results, run_check
from tests.test_distributed_lab import assert_no_job_left

pytestmark = pytest.mark.lab


def test_a_node_with_a_slow_loopback_is_named_for_its_inside_path_and_no_other_node(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    slow = lab.nodes[1]
    lab.throttle_loopback(slow, rate_mbit=40)
    hosts = lab.hosts_file(tmp_path / "hosts.txt", slots=2)
    run, data = run_check(lab, tmp_path, "--only", "intranode,allreduce,ddp", hosts=hosts, timeout_s=300)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [r for r in results(data, "intranode") if r["status"] == "fail"]
    assert finding["hosts"] == [slow.address]
    assert finding["details"]["item"] == "slow_inside_node"
    assert finding["summary"].startswith(
        f"{slow.address} is slow inside itself: the all-reduce among its own ranks"
    )
    assert set(finding["details"]["node_busbw_gbps"]) == {n.address for n in lab.nodes}
    # No other node is blamed, and the network checks refer to the finding about this node.
    blamed = {h for r in data["results"] if r["status"] == "fail" for h in r["hosts"]}
    assert blamed == {slow.address}, [(r["check"], r["summary"]) for r in data["results"]]
    for check in ("allreduce", "ddp"):
        for result in results(data, check):
            if slow.address in result["hosts"]:
                assert result["details"].get("item") == "see_compute", result
    assert_no_job_left(lab)


def test_a_node_slow_inside_itself_with_nvlinks_down_is_one_hardware_finding(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    """One root cause, one finding: the node's GPU has NVLinks down (hardware names them), and its
    slow inside path (intranode) and its slowness with partners (allreduce, ddp) point there."""
    lab = make_lab(3)
    slow = lab.nodes[1]
    lab.make_gpu_node(slow, GpuNode(inactive_links={5: (3, 7)}))
    lab.throttle_loopback(slow, rate_mbit=40)
    hosts = lab.hosts_file(tmp_path / "hosts.txt", slots=2)
    run, data = run_check(
        lab, tmp_path, "--only", "hardware,intranode,allreduce,ddp", hosts=hosts, timeout_s=300
    )
    assert run.returncode == 1, run.stdout + run.stderr
    failed = [
        (r["check"], r["details"].get("item"), r["hosts"]) for r in data["results"] if r["status"] == "fail"
    ]
    assert failed == [("hardware", "gpu_nvlink", [slow.address])], failed
    (inside,) = [r for r in results(data, "intranode") if slow.address in r["hosts"]]
    assert inside["status"] == "warn" and inside["details"]["refers_to"] == "hardware"
    assert inside["summary"].endswith(
        f"; caused by {slow.address} having NVLinks down (see the hardware finding)"
    )
    for check in ("allreduce", "ddp"):
        for result in results(data, check):
            if slow.address in result["hosts"]:
                assert (result["status"], result["details"].get("refers_to")) == ("warn", "hardware"), result
    assert_no_job_left(lab)
