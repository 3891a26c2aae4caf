"""A node that goes silent in the middle of the job (its link cut, or every process of it stopped
as a hung kernel or GPU would leave it) is named with its last phase within seconds, whatever the
run's --timeout; once the node comes back, nothing of the job is left on it.

How soon is recorded, not asserted: the report says since when the node had been silent and for how
long when it was named (details "silent"), and each test prints the seconds from the fault to its
naming and to the end of the run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.lab import LabCluster, LabNode, MakeLab
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab

# Seconds after the victim's rank has connected to its peers (the process group formed): the
# all-reduce sweep is under way, and with the pair tests it lasts several seconds more.
INTO_THE_PHASE_S = 0.5


def joined(lab: LabCluster, victim: LabNode) -> bool:
    """Whether the victim has TCP connections to both other nodes (gloo's, not SSH's)."""
    peers = {n.address for n in lab.nodes if n is not victim}
    out = lab.exec(victim, ["ss", "-Htn", "state", "established"], check=False).stdout.decode()
    connected = {
        peer for peer in peers for line in out.splitlines() if f"{peer}:" in line and ":22 " not in line
    }
    return connected == peers


def fault_during_the_job(lab: LabCluster, victim: LabNode, fault: Callable[[], None]) -> dict[str, float]:
    """Starts a thread that waits for the job on ``victim`` to be in its all-reduce phase and then
    runs ``fault``; returns where the moment of the fault will be recorded."""
    when: dict[str, float] = {}

    def wait_then_fault() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if joined(lab, victim):
                time.sleep(INTO_THE_PHASE_S)
                fault()
                when["fault"] = time.monotonic()
                when["fault_at"] = time.time()
                return
            time.sleep(0.2)

    threading.Thread(target=wait_then_fault, daemon=True).start()
    return when


def named_after_s(silence: dict[str, Any], when: dict[str, float]) -> float:
    """Seconds from the fault to the moment the node was named: last heard, plus its silence."""
    since = datetime.fromisoformat(silence["since"].replace("Z", "+00:00")).timestamp()
    return since + float(silence["silent_s"]) - when["fault_at"]


def silent_finding(data: dict[str, Any], victim: LabNode) -> dict[str, Any]:
    failing = [r for r in results(data, "allreduce") if r["status"] == "fail"]
    assert failing, data["results"]
    first = failing[0]
    assert first["hosts"] == [victim.address], first
    return first


def test_a_cut_link_is_named_with_its_phase_and_nothing_is_left_once_it_is_back(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    victim = lab.nodes[2]
    when = fault_during_the_job(lab, victim, lambda: lab.cut(victim))
    run, data = run_check(lab, tmp_path, "--only", "allreduce", "--timeout", "600")
    ended = time.monotonic()
    assert run.returncode == 1, run.stdout + run.stderr
    finding = silent_finding(data, victim)
    assert finding["summary"].startswith(f"{victim.address} went silent in the allreduce phase: no heartbeat")
    silence = finding["details"]["silent"][victim.address]
    assert silence["last_phase"] == "allreduce"
    named = named_after_s(silence, when)
    print(f"cut link: named {named:.1f} s after the fault; the run ended {ended - when['fault']:.1f} s after")
    lab.restore(victim)
    for node in lab.nodes:
        assert lab.lingering_processes(node, grace_s=45) == [], f"{node.name} still runs part of the job"
        assert lab.tmp_entries(node) == [], f"{node.name} has files left in /tmp"


def test_a_stopped_node_is_named_with_its_phase_and_nothing_is_left_once_it_resumes(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    victim = lab.nodes[2]
    stopped: list[int] = []

    when = fault_during_the_job(lab, victim, lambda: stopped.extend(lab.freeze(victim)))
    try:
        run, data = run_check(lab, tmp_path, "--only", "allreduce", "--timeout", "600")
        ended = time.monotonic()
    finally:
        lab.thaw(stopped)
    assert run.returncode == 1, run.stdout + run.stderr
    finding = silent_finding(data, victim)
    assert finding["summary"].startswith(f"{victim.address} went silent in the allreduce phase: no heartbeat")
    silence = finding["details"]["silent"][victim.address]
    assert silence["last_phase"] == "allreduce"
    named = named_after_s(silence, when)
    print(f"stopped node: named {named:.1f} s after the fault; run ended {ended - when['fault']:.1f} s after")
    for node in lab.nodes:
        assert lab.lingering_processes(node, grace_s=45) == [], f"{node.name} still runs part of the job"
        assert lab.tmp_entries(node) == [], f"{node.name} has files left in /tmp"
