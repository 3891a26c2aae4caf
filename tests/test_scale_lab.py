"""32 lab nodes: the check completes, every node is reached, and the one odd node is named.

All nodes share this machine's two cores, so the run is dominated by 32 nodes importing
torch at once; the distributed job at this size is left to the benchmarks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.lab import MakeLab, derive_env
from tests.test_check_lab import results, run_check

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
    (blocked,) = [r for r in results(data, "ports") if r["status"] != "pass"]
    assert blocked["hosts"] == [lab.nodes[24].address]
    assert blocked["details"]["sources"] == [lab.nodes[3].address]
    assert len([p for p in results(data, "ports")[0]["details"]["blocked"]]) == 1
