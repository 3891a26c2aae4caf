"""Slow is not silent, on the lab: a node whose probe is stopped while its sshd still answers is
given the probe's whole timeout and named as slow, never as silent; a controller held to a sliver
of one core (every node's answer waiting on it) names nobody."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab import NODE_PYTHON, LabCluster, MakeLab
from tests.lab.cluster import CFS_PERIOD_US, CPU_CGROUP
from tests.test_check_lab import check_argv, results, run_check
from tests.test_faults_lab import errors_by_host
from tests.test_probe_silence_lab import fault_during_the_probe

pytestmark = pytest.mark.lab


def test_a_node_whose_probe_stops_but_whose_sshd_answers_is_slow_not_silent(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    victim = lab.nodes[1]
    stopped: list[int] = []

    def stop_the_probe_only() -> None:  # its Python and its heartbeat; sshd goes on answering
        for pid, command in lab.processes(victim):
            if NODE_PYTHON in command:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)

    config = tmp_path / "preflight.toml"
    config.write_text("[run]\nprobe_timeout_s = 25\n")
    fault_during_the_probe(lab, victim, stop_the_probe_only)
    try:
        run, data = run_check(lab, tmp_path, "--only", "connect", "--config", str(config))
    finally:
        lab.thaw(stopped)
    assert run.returncode == 3, run.stdout + run.stderr
    assert stopped
    assert errors_by_host(data) == {victim.address: "timeout"}
    message = next(h["error"]["message"] for h in data["hosts"] if h["error"])
    assert message == "the probe did not finish within 25 s", message  # slow, after its whole timeout


@contextlib.contextmanager
def controller_cpu(fraction: float) -> Iterator[Path]:
    """A cgroup v1 cpu group holding ``fraction`` of one core, for the controller to run in."""
    group = Path(CPU_CGROUP) / f"pfctl{os.getpid()}"
    group.mkdir(exist_ok=True)
    (group / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
    (group / "cpu.cfs_quota_us").write_text(str(round(fraction * CFS_PERIOD_US)))
    try:
        yield group
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (Path(CPU_CGROUP) / "cgroup.procs").write_text(pid)
        with contextlib.suppress(OSError):
            group.rmdir()


def starved_check(lab: LabCluster, tmp_path: Path, group: Path, *extra: str) -> tuple[int, dict[str, object]]:
    report = tmp_path / "run.json"
    procs = group / "cgroup.procs"
    run = subprocess.run(
        check_argv(lab, lab.hosts_file(tmp_path / "hosts.txt"), report, *extra),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
        preexec_fn=lambda: procs.write_text(str(os.getpid())),  # into the group before it runs
    )
    assert report.exists(), run.stdout + run.stderr
    return run.returncode, json.loads(report.read_text())


def test_a_controller_held_to_a_sliver_of_a_core_names_nobody(make_lab: MakeLab, tmp_path: Path) -> None:
    # 3% of one core: the controller's handshakes, reads and keepalive answers all wait on it, for
    # seconds at a time. Every node is healthy; none may be named silent or timed out.
    lab = make_lab(8)
    with controller_cpu(0.03) as group:
        started = time.monotonic()
        code, data = starved_check(lab, tmp_path, group, "--only", "connect,versions,environment")
        took = time.monotonic() - started
    print(f"8 nodes, the controller at 3% of a core: {took:.0f} s")
    assert errors_by_host(data) == {}, data["hosts"]
    assert code == 0, [r for r in data["results"] if r["status"] != "pass"]  # type: ignore[union-attr]
    assert all(r["status"] in ("pass", "skip") for r in results(data, "versions"))
