"""CPU ranks re-test their slow pairs in turn, each pair alone: pairs whose ranks shared cores with
other pairs' (twelve lab nodes on two cores) are slow by the scheduler's luck, alone they are not;
a pair slow on its own stays slow alone. Judged on real lab runs (tests/data/pairs/SOURCES.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from checks.job.node.cpu_wait import CpuWait, waited_s
from checks.job.pairs import name_culprits

PAIRS = Path(__file__).parent / "data" / "pairs"
SLOW_RATIO = 0.5


def capture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAIRS / f"{name}.json").read_text())
    return data


def test_twelve_nodes_sharing_two_cores_name_nobody_once_their_slow_pairs_are_re_tested_alone() -> None:
    run = capture("lab_twelve_nodes_in_turn")
    retests = [p for p in run["pairs"] if p["retest"]]
    assert retests and all(p["alone"] for p in retests)
    culprits = name_culprits(run["pairs"], len(run["nodes"]), SLOW_RATIO)
    assert not culprits.confirmed
    assert culprits.unconfirmed and {u.reason for u in culprits.unconfirmed} == {"fast on re-test"}


def test_the_same_nodes_re_tested_beside_busy_peers_blamed_healthy_links() -> None:
    # The run the in-turn re-test was made for: the re-tests in rounds of six pairs at once.
    run = capture("lab_twelve_nodes_waves")
    assert not any(p.get("alone") for p in run["pairs"])
    assert name_culprits(run["pairs"], len(run["nodes"]), SLOW_RATIO).slow_links


def test_a_node_slow_on_its_own_stays_named_when_its_pairs_are_re_tested_alone() -> None:
    run = capture("lab_three_nodes_one_throttled")
    assert all(p["alone"] for p in run["pairs"] if p["retest"])
    culprits = name_culprits(run["pairs"], len(run["nodes"]), SLOW_RATIO)
    assert [s.node for s in culprits.slow_nodes] == [2] and not culprits.slow_links
    # Its ranks were blocked on their sockets, not waiting for a CPU.
    assert all(p["cpu_wait"] < 0.05 for p in run["pairs"] if 2 in p["nodes"])


def test_a_re_test_run_alone_counts_as_the_typical_pair_at_most() -> None:
    run = capture("lab_twelve_nodes_in_turn")
    culprits = name_culprits(run["pairs"], len(run["nodes"]), SLOW_RATIO)
    typical = culprits.typical_busbw_gbps
    best_first = max(p["busbw_gbps"] for p in run["pairs"] if not p["retest"]) / typical
    assert max(p["busbw_gbps"] for p in run["pairs"] if p["alone"]) / typical > best_first
    assert max(culprits.node_ratio.values()) <= best_first


def test_a_process_sharing_its_cpu_with_a_busy_one_is_seen_waiting_for_it() -> None:
    assert waited_s() is not None
    cpu = sorted(os.sched_getaffinity(0))[0]
    spin = (
        "import os, time\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "end = time.time() + 5\n"
        "while time.time() < end: pass"
    )
    rival = subprocess.Popen([sys.executable, "-c", spin])
    mask = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpu})
        time.sleep(0.3)  # the rival is running
        waiting, start = CpuWait(), time.perf_counter()
        while time.perf_counter() - start < 0.6:
            pass
        share = waiting.share(time.perf_counter() - start)
    finally:
        os.sched_setaffinity(0, mask)
        rival.kill()
        rival.wait()
    assert share is not None and share > 0.2
