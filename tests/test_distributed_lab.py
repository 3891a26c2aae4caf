"""ports, allreduce and ddp end to end on the lab cluster: real torchrun across namespaces over gloo.

Faults are injected with tc (a slow node), iptables (a dropped rendezvous port) and ip
(a link cut while the job runs); each must end as a finding that names the node.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.lab import LabCluster, MakeLab
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab

FULL = ("--only", "ports,allreduce,ddp")


def statuses(data: dict[str, Any], check: str) -> list[str]:
    return [r["status"] for r in results(data, check)]


def assert_no_job_left(lab: LabCluster, nodes: list[Any] | None = None) -> None:
    for node in nodes or lab.nodes:
        assert lab.lingering_processes(node, grace_s=10) == [], f"{node.name} still runs part of the job"
        assert lab.tmp_entries(node) == [], f"{node.name} has files left in /tmp"


def test_a_healthy_cluster_trains_and_reports_bandwidth(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    run, data = run_check(lab, tmp_path, *FULL)
    assert run.returncode == 0, run.stdout + run.stderr
    assert statuses(data, "ports") == ["pass"]
    assert statuses(data, "allreduce") == ["pass"]
    assert statuses(data, "ddp") == ["pass"]
    (allreduce,) = results(data, "allreduce")
    sweep = allreduce["details"]["sweep"]
    assert len(sweep) >= 4
    assert all(row["busbw_gbps"] > 0 for row in sweep)
    assert [row["size_bytes"] for row in sweep] == sorted(row["size_bytes"] for row in sweep)
    pairs = {tuple(sorted(p["nodes"])) for p in allreduce["details"]["pairs"]}
    names = [n.address for n in lab.nodes]
    assert pairs == {(a, b) for i, a in enumerate(sorted(names)) for b in sorted(names)[i + 1 :]}
    assert_no_job_left(lab)


def test_a_slow_node_is_named_not_its_partners(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    slow = lab.nodes[2]
    lab.throttle(slow, rate_mbit=40)
    started = time.monotonic()
    run, data = run_check(lab, tmp_path, "--only", "allreduce")
    assert run.returncode == 1, run.stdout + run.stderr
    failing = [r for r in results(data, "allreduce") if r["status"] == "fail"]
    assert failing, data["results"]
    assert {h for r in failing for h in r["hosts"]} == {slow.address}
    assert any("slow" in r["summary"] for r in failing)
    assert time.monotonic() - started < 120
    assert_no_job_left(lab)


def test_a_dropped_rendezvous_port_skips_the_job_and_names_the_port(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    master = lab.nodes[0]
    lab.block_port(master, 29500, action="drop")
    started = time.monotonic()
    run, data = run_check(lab, tmp_path, *FULL, "--timeout", "120")
    elapsed = time.monotonic() - started
    assert run.returncode == 1, run.stdout + run.stderr
    (blocked,) = [r for r in results(data, "ports") if r["status"] == "fail"]
    assert blocked["hosts"] == [master.address]
    assert f"{master.address}:29500" in blocked["summary"]
    assert statuses(data, "allreduce") == ["skip"]
    assert statuses(data, "ddp") == ["skip"]
    assert "29500" in results(data, "allreduce")[0]["summary"]
    assert elapsed < 60  # no waiting for torchrun to time out
    assert_no_job_left(lab)


def test_a_link_cut_during_the_job_names_the_node_and_leaves_nothing_running(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    victim = lab.nodes[2]

    cutter = lab.when_the_job_runs(victim, lambda: lab.cut(victim))
    started = time.monotonic()
    run, data = run_check(lab, tmp_path, "--only", "allreduce,ddp", "--timeout", "150")
    elapsed = time.monotonic() - started
    cutter.join(5)
    assert run.returncode == 1, run.stdout + run.stderr
    failing = [r for r in data["results"] if r["check"] in ("allreduce", "ddp") and r["status"] == "fail"]
    assert failing, data["results"]
    assert victim.address in {h for r in failing for h in r["hosts"]}
    assert elapsed < 150
    survivors = [n for n in lab.nodes if n is not victim]
    assert_no_job_left(lab, survivors)
    lab.restore(victim)


def test_a_link_slower_than_in_the_baseline_run_is_named(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    first, second, _ = lab.nodes
    run, _ = run_check(lab, tmp_path, "--only", "allreduce")
    assert run.returncode == 0, run.stdout + run.stderr
    baseline = tmp_path / "baseline.json"
    (tmp_path / "run.json").rename(baseline)
    lab.throttle_link(first, second, rate_mbit=40)
    run, data = run_check(lab, tmp_path, "--only", "allreduce", "--baseline", str(baseline))
    assert run.returncode == 1, run.stdout + run.stderr
    dropped = [r for r in results(data, "baseline") if r["status"] == "fail"]
    assert [sorted(r["hosts"]) for r in dropped if r["details"]["item"] == "pair"] == [
        sorted([first.address, second.address])
    ]
    assert "dropped to" in dropped[0]["summary"]


def test_a_read_only_tmp_on_a_node_is_named(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    victim = lab.nodes[1]
    lab.exec(victim, ["mount", "-o", "remount,ro", "/tmp"])
    run, data = run_check(lab, tmp_path, "--only", "allreduce", "--timeout", "120")
    assert run.returncode == 1, run.stdout + run.stderr
    failing = [r for r in results(data, "allreduce") if r["status"] in ("fail", "error")]
    assert victim.address in {h for r in failing for h in r["hosts"]}
    assert any("temporary directory" in r["summary"] for r in failing)
    lab.exec(victim, ["mount", "-o", "remount,rw", "/tmp"])
    assert_no_job_left(lab)
