"""``preflight check`` end to end on the lab cluster: real sshd per node, real SSH, real probes.

Each test builds its own small cluster, injects one fault, runs the command line exactly as
an operator would, and reads the JSON report and the exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.lab import NODE_PYTHON, LabCluster, MakeLab, derive_env

pytestmark = pytest.mark.lab


def check_argv(
    lab: LabCluster, hosts: Path, report: Path, *extra: str, identity: Path | None = None
) -> list[str]:
    """``preflight check`` as an operator runs it against the lab: its key, its known_hosts."""
    argv = [
        sys.executable, "-m", "preflight", "check", str(hosts),
        "--python", NODE_PYTHON,
        "-i", str(identity or lab.key_path),
        "--ssh-config", os.devnull,
        "--json", str(report),
        *extra,
    ]  # fmt: skip
    if "--known-hosts" not in extra:
        argv += ["--known-hosts", str(lab.known_hosts_path)]
    return argv


def run_check(
    lab: LabCluster, tmp_path: Path, *extra: str, hosts: Path | None = None, timeout_s: float = 180
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    hosts = hosts or lab.hosts_file(tmp_path / "hosts.txt")
    report = tmp_path / "run.json"
    report.unlink(missing_ok=True)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    run = subprocess.run(
        check_argv(lab, hosts, report, *extra), capture_output=True, text=True, timeout=timeout_s, env=env
    )
    assert report.exists(), run.stdout + run.stderr
    return run, json.loads(report.read_text())


def results(data: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [r for r in data["results"] if r["check"] == check]


def assert_nothing_left_behind(lab: LabCluster) -> None:
    for node in lab.nodes:
        assert lab.processes(node) == [], f"{node.name} still runs something"
        assert lab.tmp_entries(node) == [], f"{node.name} has files left in /tmp"


def test_three_healthy_nodes_pass(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    run, data = run_check(lab, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert data["verdict"] == "pass"
    assert [h["hostname"] for h in data["hosts"]] == ["node1", "node2", "node3"]
    assert all(h["reachable"] for h in data["hosts"])
    for host in data["hosts"]:
        facts = host["facts"]
        assert facts["python"]["executable"].startswith("/opt/pflab/env")
        assert facts["torch"]["version"].startswith("2.")
        assert facts["packages"]["torch"] == facts["torch"]["version"]
        assert any(i["name"] == "eth0" for i in facts["net"]["interfaces"])
    assert [r["status"] for r in results(data, "versions")] == ["pass"]
    assert [r["status"] for r in results(data, "gpu_memory")] == ["skip"]
    assert "PASS" in run.stdout
    # Where the time went: every node's phases in the order it ran them, within the run.
    for host in data["hosts"]:
        lane = [s for s in data["timeline"] if s["lane"] == host["name"]]
        phases = [s["phase"] for s in lane]
        # The probes that need only the facts run side by side, in any order, before the job.
        assert phases[:2] == ["connection", "facts"] and phases[5] == "job start"
        assert sorted(phases[2:5]) == ["clocks", "names", "ports"]
        assert {"compute", "allreduce", "ddp"} <= set(phases[6:])
        assert all(0 <= s["start_s"] <= s["end_s"] <= data["duration_s"] for s in lane)
    assert "time: facts" in run.stdout and "the job" in run.stdout
    assert_nothing_left_behind(lab)


def test_package_drift_on_one_node_is_named_with_the_packages(make_lab: MakeLab, tmp_path: Path) -> None:
    drifted = derive_env(
        tmp_path / "drifted-env",
        Path(sys.prefix),
        packages={"rich": "12.0.0", "leftpad": "0.1.2"},
    )
    lab = make_lab(3, node_envs={3: drifted})
    run, data = run_check(lab, tmp_path)
    findings = [r for r in results(data, "versions") if r["status"] != "pass"]
    assert findings, data["results"]
    # Neither package is part of the training stack: a warning, and the run still passes.
    assert {r["status"] for r in findings} == {"warn"}
    assert run.returncode == 0, run.stdout + run.stderr
    assert {h for r in findings for h in r["hosts"]} == {lab.nodes[2].address}
    text = " ".join(r["summary"] for r in findings)
    assert "rich" in text and "leftpad" in text and "12.0.0" in text


def test_training_stack_drift_fails_the_run(make_lab: MakeLab, tmp_path: Path) -> None:
    base = Path(sys.prefix)
    ours = derive_env(tmp_path / "nccl-2.21", base, packages={"nvidia-nccl-cu12": "2.21.5"})
    theirs = derive_env(tmp_path / "nccl-2.20", base, packages={"nvidia-nccl-cu12": "2.20.5"})
    lab = make_lab(3, node_envs={1: ours, 2: theirs, 3: ours})
    run, data = run_check(lab, tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    failing = [r for r in results(data, "versions") if r["status"] == "fail"]
    assert [r["hosts"] for r in failing] == [[lab.nodes[1].address]]
    assert "nvidia-nccl-cu12" in failing[0]["summary"]
    assert "2.20.5" in failing[0]["summary"] and "2.21.5" in failing[0]["summary"]
    assert "FAIL" in run.stdout


def test_an_address_where_no_node_answers_is_named_and_the_rest_are_checked(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(2)
    ghost = lab.unused_address()
    hosts = lab.hosts_file(tmp_path / "hosts.txt", extra_lines=[f"root@{ghost}"])
    started = time.monotonic()
    run, data = run_check(lab, tmp_path, "--connect-timeout", "3", hosts=hosts)
    elapsed = time.monotonic() - started
    assert run.returncode == 3, run.stdout + run.stderr
    assert data["verdict"] == "error"
    unreached = [r for r in results(data, "connect") if r["status"] == "error"]
    assert [r["hosts"] for r in unreached] == [[ghost]]
    by_name = {h["name"]: h for h in data["hosts"]}
    assert by_name[ghost]["reachable"] is False
    assert by_name[ghost]["error"]["kind"] in ("timeout", "unreachable")
    assert all(by_name[n.address]["reachable"] for n in lab.nodes)
    assert elapsed < 60  # bounded by the connect timeout, not by TCP's own minutes


def test_an_unknown_host_key_is_refused_unless_accepted(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(2)
    partial = tmp_path / "known_hosts"
    partial.write_text(
        "".join(
            line + "\n"
            for line in lab.known_hosts_path.read_text().splitlines()
            if not line.startswith(lab.nodes[1].address + " ")
        )
    )
    run, data = run_check(lab, tmp_path, "--known-hosts", str(partial))
    assert run.returncode == 3, run.stdout + run.stderr
    refused = [r for r in results(data, "connect") if r["status"] == "error"]
    assert [r["hosts"] for r in refused] == [[lab.nodes[1].address]]
    assert refused[0]["details"]["cause"] == "host_key_unknown"
    assert "--accept-new-host-keys" in refused[0]["summary"]

    run, data = run_check(lab, tmp_path, "--known-hosts", str(partial), "--accept-new-host-keys")
    assert run.returncode == 0, run.stdout + run.stderr
    (passed,) = results(data, "connect")
    assert lab.nodes[1].address in passed["details"]["accepted_host_keys"]


def test_a_changed_host_key_is_always_refused(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(2)
    first, second = lab.nodes
    lines = lab.known_hosts_path.read_text().splitlines()
    first_key = next(line for line in lines if line.startswith(first.address + " ")).split(" ", 1)[1]
    forged = tmp_path / "known_hosts"
    forged.write_text(
        "".join(
            (f"{second.address} {first_key}" if line.startswith(second.address + " ") else line) + "\n"
            for line in lines
        )
    )
    run, data = run_check(lab, tmp_path, "--known-hosts", str(forged), "--accept-new-host-keys")
    assert run.returncode == 3, run.stdout + run.stderr
    (refused,) = [r for r in results(data, "connect") if r["status"] == "error"]
    assert refused["hosts"] == [second.address]
    assert refused["details"]["cause"] == "host_key_changed"


def test_a_node_behind_a_jump_host_is_reached_through_ssh_config(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(2)
    jump, target = lab.nodes
    # The controller's own way to the target's sshd is dropped: only the jump host gets through.
    lab.exec(
        target,
        ["iptables", "-A", "INPUT", "-p", "tcp", "--dport", "22", "-s", lab.bridge_address, "-j", "DROP"],
    )
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host bastion\n  HostName {jump.address}\n  User root\n\n"
        f"Host gpu-behind\n  HostName {target.address}\n  User root\n  ProxyJump bastion\n"
    )
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("gpu-behind\n")
    run, data = run_check(lab, tmp_path, "--only", "connect", "--ssh-config", str(config), hosts=hosts)
    assert run.returncode == 0, run.stdout + run.stderr
    (host,) = data["hosts"]
    assert (host["name"], host["address"], host["hostname"]) == ("gpu-behind", target.address, target.name)

    # The same node, named without the jump: not reachable from here (the drop is real).
    hosts.write_text(f"root@{target.address}\n")
    run, data = run_check(lab, tmp_path, "--only", "connect", "--connect-timeout", "3", hosts=hosts)
    assert run.returncode == 3, run.stdout + run.stderr
