"""The lab at the sizes this machine holds: 32 nodes with torch and 48 without are each reached
whole and the one odd node named; the whole check on 12 healthy nodes names nothing; one of 16
nodes frozen during the facts probe is named alone.

All nodes share this machine's two cores with the controller, so every node is slow and the
controller is starved: nothing here may be read as a node's silence, and no measurement slowed by
the other nodes' ranks as a node's fault. The distributed job past 12 nodes is left to the
benchmarks (benchmarks/scale.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lab import MakeLab, derive_env
from tests.test_check_lab import assert_nothing_left_behind, check_argv, results, run_check
from tests.test_faults_lab import errors_by_host
from tests.test_probe_silence_lab import assert_named_alone_as_silent, fault_during_the_probe

pytestmark = pytest.mark.lab

NODES = 32


def test_thirty_two_nodes_are_checked_and_the_odd_one_named(make_lab: MakeLab, tmp_path: Path) -> None:
    odd = 17
    drifted = derive_env(tmp_path / "drifted", Path(sys.prefix), packages={"nvidia-nccl-cu12": "2.20.5"})
    lab = make_lab(NODES, node_envs={odd: drifted})
    lab.block_port(lab.nodes[24], 29500, action="reject", from_node=lab.nodes[3])
    run, data = run_check(lab, tmp_path, "--only", "connect,versions,gpu_memory,ports", timeout_s=300)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert sum(h["reachable"] for h in data["hosts"]) == NODES
    (drift,) = [r for r in results(data, "versions") if r["status"] != "pass"]
    assert drift["hosts"] == [lab.nodes[odd - 1].address]
    # Refused from node4 alone while the 30 others reach it: named on node4, the node cut off.
    (blocked,) = [r for r in results(data, "ports") if r["status"] != "pass"]
    assert blocked["details"]["item"] == "cannot_reach"
    assert blocked["hosts"] == [lab.nodes[3].address]
    assert blocked["details"]["sources"] == [lab.nodes[3].address]
    assert len([p for p in results(data, "ports")[0]["details"]["blocked"]]) == 1


# The controller as it is at a few hundred hosts: more than 1,024 files open (a socket per host,
# a pipe per channel), past the numbers select() can wait on.
CROWDED_CONTROLLER = """
import os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4096), max(hard, 4096)))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
from preflight.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_controller_holding_a_thousand_files_still_reaches_and_checks_every_node(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(2)
    report = tmp_path / "run.json"
    argv = check_argv(lab, lab.hosts_file(tmp_path / "hosts.txt"), report)
    assert argv[1:3] == ["-m", "preflight"]
    run = subprocess.run(
        [sys.executable, "-c", CROWDED_CONTROLLER, *argv[3:]],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    data = json.loads(report.read_text())
    assert all(h["reachable"] for h in data["hosts"])
    assert [r["status"] for r in results(data, "ddp")] == ["pass"]
    assert_nothing_left_behind(lab)


def test_forty_eight_nodes_without_torch_are_each_reached_and_nothing_is_named(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    bare = derive_env(tmp_path / "bare", Path(sys.prefix), hide=["torch"])
    lab = make_lab(48, node_envs=dict.fromkeys(range(1, 49), bare))
    checks = "connect,versions,gpu_memory,environment,limits,names,clocks"
    run, data = run_check(lab, tmp_path, "--only", checks, timeout_s=400)
    assert errors_by_host(data) == {}
    assert run.returncode == 0, [r for r in data["results"] if r["status"] not in ("pass", "skip")]


def test_one_of_sixteen_nodes_frozen_during_the_facts_probe_is_named_alone(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(16)
    victim = lab.nodes[9]
    stopped: list[int] = []
    when = fault_during_the_probe(lab, victim, lambda: stopped.extend(lab.freeze(victim)))
    try:
        run, data = run_check(lab, tmp_path, "--only", "connect,versions", timeout_s=300)
        ended = time.monotonic()
    finally:
        lab.thaw(stopped)
    assert run.returncode == 3, run.stdout[-3000:] + run.stderr[-3000:]
    assert_named_alone_as_silent(data, victim, lab)
    print(f"16 nodes, one frozen in the facts probe: the run ended {ended - when['fault']:.1f} s after")


def test_the_whole_check_on_twelve_healthy_nodes_sharing_two_cores_names_nothing(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(12)
    run, data = run_check(lab, tmp_path, timeout_s=400)
    named = [(r["check"], r["summary"]) for r in data["results"] if r["status"] not in ("pass", "skip")]
    assert run.returncode == 0 and named == [], named
    (allreduce,) = results(data, "allreduce")
    assert len([p for p in allreduce["details"]["pairs"] if not p["retest"]]) == 66
    assert [r["status"] for r in results(data, "ddp")] == ["pass"]
    assert_nothing_left_behind(lab)
