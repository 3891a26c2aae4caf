"""A node that stalls the job is named alone, whoever reports the timeout: a node whose inside
path (its loopback, two processes per node) is throttled so hard that the phase times out, and a
node that drops a share of the segments it receives (iptables' statistic match on its INPUT).
The loss runs are repeated: each prints how many of its runs named the lossy node alone.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.lab import LabCluster, LabNode, MakeLab
from tests.test_check_lab import run_check
from tests.test_distributed_lab import assert_no_job_left

pytestmark = pytest.mark.lab

LOSS_RUNS = 3


def failed_hosts(data: dict[str, Any]) -> set[str]:
    return {h for r in data["results"] if r["status"] in ("fail", "error") for h in r["hosts"]}


def failures(data: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [
        (r["check"], r["summary"], r["hosts"]) for r in data["results"] if r["status"] in ("fail", "error")
    ]


def test_a_node_whose_inside_path_stalls_the_phase_is_named_not_rank_0s(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    slow = lab.nodes[1]
    # 4 MiB among its two ranks at 0.2 Mbit/s: minutes, far past the phase's 20 s deadline.
    lab.throttle_loopback(slow, rate_mbit=0.2)
    hosts = lab.hosts_file(tmp_path / "hosts.txt", slots=2)
    run, data = run_check(lab, tmp_path, "--only", "intranode,allreduce", hosts=hosts, timeout_s=300)
    print(failures(data))
    assert run.returncode == 1, run.stdout + run.stderr
    assert failed_hosts(data) == {slow.address}, failures(data)
    assert_no_job_left(lab)


def drop_incoming(lab: LabCluster, node: LabNode, probability: float) -> None:
    subprocess.run(
        ["ip", "netns", "exec", node.netns, "iptables", "-w", "-A", "INPUT", "-m", "statistic",
         "--mode", "random", "--probability", str(probability), "-j", "DROP"],
        check=True,
    )  # fmt: skip


@pytest.mark.parametrize("probability", [0.10, 0.25])
def test_a_node_losing_its_incoming_segments_is_named_alone(
    make_lab: MakeLab, tmp_path: Path, probability: float
) -> None:
    lab = make_lab(3)
    lossy = lab.nodes[2]
    drop_incoming(lab, lossy, probability)
    outcomes = []
    try:
        for attempt in range(LOSS_RUNS):
            (where := tmp_path / str(attempt)).mkdir()
            run, data = run_check(lab, where, "--only", "allreduce", timeout_s=300)
            outcomes.append((run.returncode, failed_hosts(data), failures(data)))
    finally:
        lab.unblock_ports(lossy)
    alone = sum(1 for _, hosts, _ in outcomes if hosts == {lossy.address})
    print(f"{probability:.0%} loss: named alone in {alone} of {LOSS_RUNS} runs")
    for outcome in outcomes:
        print(outcome)
    # A wrong culprit costs more than none: no other node is ever failed.
    assert all(hosts <= {lossy.address} for _, hosts, _ in outcomes), outcomes
    assert alone >= LOSS_RUNS - 1, outcomes
    assert_no_job_left(lab)


def test_a_node_cut_as_its_ranks_join_is_named_alone_and_the_others_stay_good(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    victim = lab.nodes[2]
    when: dict[str, float] = {}

    def cut_as_the_ranks_start() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if lab.job_ranks(victim):
                lab.cut(victim)
                when["fault"] = time.monotonic()
                return
            time.sleep(0.02)

    threading.Thread(target=cut_as_the_ranks_start, daemon=True).start()
    try:
        run, data = run_check(lab, tmp_path, "--only", "allreduce", "--timeout", "600")
        ended = time.monotonic()
    finally:
        lab.restore(victim)
    print(failures(data))
    print(f"cut as its ranks joined: the run ended {ended - when['fault']:.1f} s after the fault")
    assert run.returncode == 1, run.stdout + run.stderr
    assert failed_hosts(data) == {victim.address}, failures(data)
    assert data["handback"]["good"] == [n.address for n in lab.nodes if n is not victim]
    for node in lab.nodes:
        assert lab.lingering_processes(node, grace_s=45) == [], f"{node.name} still runs part of the job"
        assert lab.tmp_entries(node) == [], f"{node.name} has files left in /tmp"
