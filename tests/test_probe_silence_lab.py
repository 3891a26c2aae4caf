"""A node that goes silent during the facts probe (its link cut, or every process of it stopped) is
named alone, as silent for the run's silence_s during the facts probe, whatever the probe's own
timeout; once it is back, nothing of the probe is left on it."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from preflight.deadline import Deadline
from preflight.inventory import HostSpec
from preflight.silence import SILENT_AS, NodeSilent, SilenceWatch, keepalive_of, write_watched
from preflight.transport.ssh import KnownHosts, SshSettings, SshTransport
from tests.lab import NODE_PYTHON, LabCluster, LabNode, MakeLab
from tests.test_check_lab import results, run_check
from tests.test_faults_lab import errors_by_host

pytestmark = pytest.mark.lab

SILENCE_S = 6  # the default [run] silence_s
# Seconds from the fault to the end of the run at most: the silence, and the other nodes' checks on
# a loaded machine (the lost connection is dropped, not closed: nothing waits on it).
RUN_END_S = SILENCE_S + 15
_SILENT_RE = re.compile(rf"silent for (\d+) s during the facts probe: {re.escape(SILENT_AS)}$")


def fault_during_the_probe(lab: LabCluster, victim: LabNode, fault: Callable[[], None]) -> dict[str, float]:
    """Starts a thread that runs ``fault`` as soon as the victim runs the facts probe (the node's
    Python is among its processes); returns where the moment of the fault will be recorded."""
    when: dict[str, float] = {}

    def wait_then_fault() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(NODE_PYTHON in cmd for _, cmd in lab.processes(victim)):
                fault()
                when["fault"] = time.monotonic()
                return
            time.sleep(0.02)

    threading.Thread(target=wait_then_fault, daemon=True).start()
    return when


def assert_named_alone_as_silent(data: dict[str, object], victim: LabNode, lab: LabCluster) -> None:
    assert errors_by_host(data) == {victim.address: "timeout"}  # type: ignore[arg-type]
    (finding,) = [r for r in results(data, "connect") if r["status"] == "error"]  # type: ignore[arg-type]
    assert finding["hosts"] == [victim.address]
    found = _SILENT_RE.search(finding["summary"])
    assert found, finding["summary"]
    assert SILENCE_S <= int(found.group(1)) <= SILENCE_S + 1
    reached = [r for r in results(data, "connect") if r["status"] == "pass"]  # type: ignore[arg-type]
    assert reached[0]["details"]["reached"] == [n.address for n in lab.nodes if n is not victim]


def assert_nothing_left(lab: LabCluster) -> None:
    for node in lab.nodes:
        assert lab.lingering_processes(node, grace_s=45) == [], f"{node.name} still runs the probe"
        assert lab.tmp_entries(node) == [], f"{node.name} has files left in /tmp"


def test_a_node_cut_during_the_facts_probe_is_named_as_silent(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    victim = lab.nodes[1]
    when = fault_during_the_probe(lab, victim, lambda: lab.cut(victim))
    try:
        run, data = run_check(lab, tmp_path, "--only", "environment", "--timeout", "600")
        ended = time.monotonic()
    finally:
        lab.restore(victim)
    assert run.returncode == 3, run.stdout + run.stderr
    assert_named_alone_as_silent(data, victim, lab)
    print(f"cut during the facts probe: the run ended {ended - when['fault']:.1f} s after the fault")
    assert ended - when["fault"] < RUN_END_S
    assert_nothing_left(lab)


def test_a_node_stopped_during_the_facts_probe_is_named_as_silent(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    victim = lab.nodes[2]
    stopped: list[int] = []

    when = fault_during_the_probe(lab, victim, lambda: stopped.extend(lab.freeze(victim)))
    try:
        run, data = run_check(lab, tmp_path, "--only", "environment", "--timeout", "600")
        ended = time.monotonic()
    finally:
        lab.thaw(stopped)
    assert run.returncode == 3, run.stdout + run.stderr
    assert_named_alone_as_silent(data, victim, lab)
    print(f"stopped during the facts probe: the run ended {ended - when['fault']:.1f} s after the fault")
    assert ended - when["fault"] < RUN_END_S
    assert_nothing_left(lab)


def test_a_write_that_waits_on_a_node_cut_meanwhile_names_it_silent_and_stops_waiting(
    make_lab: MakeLab,
) -> None:
    # A script on its way to a node whose link is cut: the write blocks in the connection (nothing
    # is acknowledged), keepalives with it. The watch names the node silent and drops the
    # connection, and the write ends, rather than holding the run until its deadline.
    lab = make_lab(2)
    victim = lab.nodes[1]
    settings = SshSettings(
        known_hosts=KnownHosts([lab.known_hosts_path]), identity_files=(str(lab.key_path),)
    )
    transports = {
        n.address: SshTransport(HostSpec(n.address, n.address, user="root"), settings) for n in lab.nodes
    }
    for transport in transports.values():
        transport.open(Deadline.after(30))
    process = transports[victim.address].start(["dd", "of=/dev/null", "bs=1M"], timeout_s=120)
    # The victim alone is watched: with no other node talking, its silence is its own.
    watch = SilenceWatch([victim.address], 2.0, keepalive_of(transports.get))
    try:
        lab.cut(victim)
        began = time.monotonic()
        with pytest.raises(NodeSilent, match=r"silent for \d s during the test's write"):
            write_watched(
                watch,
                victim.address,
                transports[victim.address],
                process,
                b"x" * (64 << 20),
                "the test's write",
            )
        assert time.monotonic() - began < 30  # named after the watch's 2 s, not the process's 120 s
    finally:
        watch.close()
        lab.restore(victim)
        for transport in transports.values():
            transport.close()
