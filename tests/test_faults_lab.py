"""Faults on the lab cluster: each ends within the deadline as a finding naming the node and the
cause, the report is still written, the exit code follows docs/exit-codes.md, and nothing is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.lab import NODE_PYTHON, LabCluster, MakeLab, derive_env
from tests.test_check_lab import check_argv, results, run_check

pytestmark = pytest.mark.lab


def assert_nothing_left_behind(lab: LabCluster) -> None:
    for node in lab.nodes:
        assert lab.lingering_processes(node, grace_s=10) == [], f"{node.name} still runs something"
        assert lab.tmp_entries(node) == [], f"{node.name} has files left in /tmp"


def errors_by_host(data: dict[str, Any]) -> dict[str, str]:
    hosts: list[dict[str, Any]] = data["hosts"]
    return {h["name"]: h["error"]["kind"] for h in hosts if h["error"]}


def test_a_key_the_nodes_do_not_know_is_auth_refused(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(2)
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    hosts = lab.hosts_file(tmp_path / "hosts.txt")
    argv = check_argv(lab, hosts, tmp_path / "r.json", identity=stranger)
    env = {**os.environ, "SSH_AUTH_SOCK": ""}  # no agent offering other keys
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 3, run.stdout + run.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert errors_by_host(data) == {n.address: "auth_refused" for n in lab.nodes}
    (finding,) = [r for r in results(data, "connect") if r["status"] == "error"]
    assert "authentication refused" in finding["summary"]


def test_sshd_killed_while_the_probe_runs_names_the_node(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    victim = lab.nodes[1]

    def kill_sshd_during_the_probe() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(NODE_PYTHON in cmd for _, cmd in lab.processes(victim)):
                lab.stop_sshd(victim)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_sshd_during_the_probe, daemon=True)
    killer.start()
    run, data = run_check(lab, tmp_path)
    killer.join(5)
    assert run.returncode == 3, run.stdout + run.stderr
    assert errors_by_host(data) == {victim.address: "unreachable"}
    (finding,) = [r for r in results(data, "connect") if r["status"] == "error"]
    assert finding["hosts"] == [victim.address]
    assert "connection was lost" in finding["summary"]
    assert [h["reachable"] for h in data["hosts"]] == [True, False, True]
    assert_nothing_left_behind(lab)


def test_a_node_without_the_python_is_named(make_lab: MakeLab, tmp_path: Path) -> None:
    broken = derive_env(tmp_path / "broken-env", Path(sys.prefix))
    lab = make_lab(3, node_envs={3: broken})
    for python in (broken / "bin").glob("python*"):
        python.unlink()  # the interpreter is gone from node3 only
    run, data = run_check(lab, tmp_path)
    assert run.returncode == 3, run.stdout + run.stderr
    assert errors_by_host(data) == {lab.nodes[2].address: "python_missing"}
    (finding,) = [r for r in results(data, "connect") if r["status"] == "error"]
    assert NODE_PYTHON in finding["summary"]
    assert "--python" in finding["summary"]


def test_torch_missing_on_one_node_is_named(make_lab: MakeLab, tmp_path: Path) -> None:
    no_torch = derive_env(tmp_path / "no-torch", Path(sys.prefix), hide=["torch"])
    lab = make_lab(3, node_envs={2: no_torch})
    run, data = run_check(lab, tmp_path, "--only", "versions")
    assert run.returncode == 1, run.stdout + run.stderr
    failing = [r for r in results(data, "versions") if r["status"] == "fail"]
    assert {h for r in failing for h in r["hosts"]} == {lab.nodes[1].address}
    assert any("torch" in r["summary"] and "not found" in r["summary"] for r in failing)


@pytest.mark.parametrize("during", ["facts", "job"])
def test_ctrl_c_ends_the_run_writes_the_report_and_leaves_nothing(
    make_lab: MakeLab, tmp_path: Path, during: str
) -> None:
    lab = make_lab(2)
    hosts = lab.hosts_file(tmp_path / "hosts.txt")
    report = tmp_path / "run.json"
    # As from a terminal, whatever started the tests: a suite started in the background by a
    # non-interactive shell passes SIGINT on ignored, and Python then leaves it ignored.
    argv = ["env", "--default-signal=INT", *check_argv(lab, hosts, report)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The facts probe runs the node's Python on stdin; the job's ranks name themselves.
    deadline = time.monotonic() + 90
    first = lab.nodes[0]

    def started() -> bool:
        if during == "facts":
            return any(NODE_PYTHON in c for _, c in lab.processes(first))
        return bool(lab.job_ranks(first))

    while time.monotonic() < deadline and not started():
        time.sleep(0.05)
    if during == "job":
        time.sleep(2)  # well into it: workers started
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert time.monotonic() - started < 20
    data = json.loads(report.read_text())
    assert data["interrupted"] is True
    assert data["exit_code"] == 130
    assert_nothing_left_behind(lab)
