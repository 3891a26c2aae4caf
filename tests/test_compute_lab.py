"""The compute burn end to end on the lab cluster: a node whose processes get a small CPU quota (a
cgroup, the stand-in for a slow GPU) is named by ``compute`` with its ratio, and the network checks
refer to that finding instead of sending the user to the node's NIC; healthy nodes of two ranks
each, all sharing the machine's cores, pass run after run (a rank the scheduler slows once is
re-tested, and noted)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab import LabCluster, LabNode, MakeLab
from tests.test_check_lab import results, run_check
from tests.test_distributed_lab import assert_no_job_left

pytestmark = pytest.mark.lab


@contextlib.contextmanager
def quota_watched(lab: LabCluster, node: LabNode) -> Iterator[list[tuple[int, str, str]]]:
    """Every process of ``node`` seen outside its CPU quota's group while the block runs (sampled
    every 0.1 s): a run in which the quota did not hold says so, rather than as a missed culprit."""
    escaped: list[tuple[int, str, str]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            escaped.extend(found for found in lab.outside_cpu_limit(node) if found not in escaped)
            stop.wait(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield escaped
    finally:
        stop.set()
        watcher.join(5)


def _ranks(data: dict[str, object]) -> list[tuple[str, float]]:
    """Each compute rank's host and ratio, to say what a failed assertion saw."""
    rows = [row for r in results(data, "compute") for row in r["details"].get("ranks") or []]  # type: ignore[union-attr]
    return [(str(row["host"]), float(row.get("ratio") or 0.0)) for row in rows]


def test_a_node_with_a_small_cpu_quota_is_named_by_compute_not_sent_to_its_nic(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    slow = lab.nodes[1]
    lab.limit_cpu(slow, 0.1)
    with quota_watched(lab, slow) as escaped:
        run, data = run_check(lab, tmp_path, "--only", "compute,allreduce,ddp", timeout_s=300)
    assert not escaped, f"processes of {slow.address} ran outside its CPU quota: {escaped}"
    assert run.returncode == 1, f"ranks {_ranks(data)}\n{run.stdout}{run.stderr}"
    (finding,) = [r for r in results(data, "compute") if r["status"] == "fail"]
    assert finding["hosts"] == [slow.address]
    assert finding["details"]["item"] == "slow_compute"
    ratio = finding["details"]["ratio"]
    assert 0 < ratio < 0.5  # the default margin for CPU ranks
    assert f"{ratio:.2g}x the median rank" in finding["summary"]
    assert finding["details"]["slow_hosts"] == [slow.address]
    rows = {row["host"]: row for row in finding["details"]["ranks"]}
    assert set(rows) == {n.address for n in lab.nodes}
    assert all(rows[n.address]["ratio"] >= 0.5 for n in lab.nodes if n is not slow)
    # One root cause, one finding: the network checks refer to the compute finding.
    for check in ("allreduce", "ddp"):
        for result in results(data, check):
            if slow.address in result["hosts"]:
                assert result["status"] != "fail", result
                assert result["details"].get("item") == "see_compute", result
                assert "NIC" not in result["summary"]
    assert "check the NIC" not in run.stdout.lower()
    assert_no_job_left(lab)


HEALTHY_RUNS = 5


def test_healthy_nodes_of_two_cpu_ranks_pass_compute_run_after_run(make_lab: MakeLab, tmp_path: Path) -> None:
    """The lab's six CPU ranks share this machine's two cores with the controller and every node's
    sshd: a rank's share of a core in the burn moves far more than on real nodes (a healthy rank
    has burned at 0.12x the median). Its re-test, each rank alone in turn, clears it at the
    default margin; the quota test below is held at the same margin."""
    lab = make_lab(3)
    hosts = lab.hosts_file(tmp_path / "hosts.txt", slots=2)
    retested = 0
    for _ in range(HEALTHY_RUNS):
        run, data = run_check(lab, tmp_path, "--only", "compute", hosts=hosts, timeout_s=300)
        found = results(data, "compute")
        assert all(r["status"] == "pass" for r in found), [(r["status"], r["summary"]) for r in found]
        assert run.returncode == 0, run.stdout + run.stderr
        details = found[0]["details"]
        assert len(details["ranks"]) == 6
        if details["retest"] is not None:
            retested += 1
            assert details["retest"]["in_turn"] is True
            notes = [r for r in found if r["details"].get("item") == "slow_once"]
            assert notes and all(r["details"]["note"] for r in notes)
    print(f"{retested} of {HEALTHY_RUNS} healthy runs re-tested a slow rank")
    assert_no_job_left(lab)


def test_a_node_of_two_ranks_under_a_cpu_quota_fails_after_its_retest(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    slow = lab.nodes[1]
    lab.limit_cpu(slow, 0.1)
    hosts = lab.hosts_file(tmp_path / "hosts.txt", slots=2)
    with quota_watched(lab, slow) as escaped:
        run, data = run_check(lab, tmp_path, "--only", "compute", hosts=hosts, timeout_s=300)
    assert not escaped, f"processes of {slow.address} ran outside its CPU quota: {escaped}"
    assert run.returncode == 1, f"ranks {_ranks(data)}\n{run.stdout}{run.stderr}"
    (finding,) = [r for r in results(data, "compute") if r["status"] == "fail"]
    assert finding["hosts"] == [slow.address] and finding["details"]["item"] == "slow_compute"
    assert sorted(finding["details"]["slow_ranks"]) == [2, 3]  # both of its ranks share the quota
    assert 0 < finding["details"]["retest_ratio"] < 0.5
    assert "on re-test" in finding["summary"]
    assert sorted(finding["details"]["retest"]["suspects"]) == [2, 3]
    assert not set(finding["details"]["retest"]["controls"]) & {2, 3}
    assert_no_job_left(lab)
