"""``preflight check`` inside a real Slurm allocation (tests/lab/slurm.py: munged and slurmctld
here, one slurmd per lab node): the nodes are reached with srun, not SSH; the hand-back file feeds
the next srun; the node-local mode gates jobs as Slurm's prolog."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.lab import NODE_PYTHON, LabCluster, MakeLab
from tests.lab.slurm import SlurmLab

pytestmark = pytest.mark.lab

PREFLIGHT = str(Path(sys.executable).with_name("preflight"))


def salloc_check(
    slurm: SlurmLab, nodes: int, report: Path, *extra: str, timeout_s: float = 240
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``salloc -N nodes preflight check ...`` from the controller, as a user on a login node."""
    # --no-kill: a node lost during the check must not end the whole allocation (and the check).
    argv = ["salloc", f"--nodes={nodes}", "--no-kill", "--", PREFLIGHT, "check", "--python", NODE_PYTHON,
            "--json", str(report), *extra]  # fmt: skip
    env = slurm.environ({"NO_COLOR": "1", "COLUMNS": "200"})
    run = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    assert report.exists(), run.stdout + run.stderr
    return run, json.loads(report.read_text())


def failing(data: Mapping[str, Any], check: str) -> list[dict[str, Any]]:
    return [r for r in data["results"] if r["check"] == check and r["status"] in ("fail", "error")]


def preflight_steps(slurm: SlurmLab) -> list[str]:
    """The job steps preflight started that Slurm still counts as running."""
    out = slurm.run(["squeue", "-h", "--steps", "-o", "%i %j %N"])
    return [line for line in out.splitlines() if line.split()[1:2] == ["preflight"]]


def assert_nothing_left_behind(lab: LabCluster, slurm: SlurmLab) -> None:
    deadline = time.monotonic() + 10  # a step's record outlives its srun by a moment
    while (steps := preflight_steps(slurm)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert steps == [], f"preflight steps still run: {steps}"
    for node in lab.nodes:
        left = [(pid, cmd) for pid, cmd in lab.lingering_processes(node) if not slurm.is_daemon(cmd)]
        assert left == [], f"{node.name} still runs something"
        assert lab.tmp_entries(node) == [], f"{node.name} has files left in /tmp"


def test_a_healthy_allocation_passes_through_srun_without_ssh(
    make_lab: MakeLab, slurm_on: Any, tmp_path: Path
) -> None:
    lab = make_lab(3)
    slurm = slurm_on(lab)
    for node in lab.nodes:
        lab.stop_sshd(node)  # no SSH anywhere: srun is the only way in
    run, data = salloc_check(slurm, 3, tmp_path / "run.json", "--timeout", "180")
    assert run.returncode == 0, run.stdout + run.stderr
    assert [h["name"] for h in data["hosts"]] == ["node1", "node2", "node3"]
    assert [h["hostname"] for h in data["hosts"]] == ["node1", "node2", "node3"]
    assert {h["facts"]["connection"]["transport"] for h in data["hosts"]} == {"srun"}
    assert {r["check"]: r["status"] for r in data["results"]} == {
        "connect": "pass",
        "versions": "pass",
        "ports": "pass",
        "gpu_memory": "skip",
        "hardware": "pass",
        "readings": "pass",
        "environment": "pass",
        "limits": "pass",
        "names": "pass",
        "clocks": "pass",
        "storage": "skip",  # no --data or --checkpoint-dir
        "compute": "pass",
        "intranode": "skip",  # one process per node
        "rails": "skip",  # one interface per node
        "allreduce": "pass",
        "ddp": "pass",
    }
    assert data["handback"]["good"] == ["node1", "node2", "node3"]
    assert_nothing_left_behind(lab, slurm)


def test_a_blocked_port_is_named_and_the_good_hosts_file_feeds_the_next_srun(
    make_lab: MakeLab, slurm_on: Any, tmp_path: Path
) -> None:
    lab = make_lab(3)
    slurm = slurm_on(lab)
    lab.block_port("node1", 29500, action="drop")
    good, bad = slurm.root / "good-hosts", slurm.root / "bad-hosts"
    run, data = salloc_check(
        slurm, 3, tmp_path / "run.json", "--only", "ports", "--good-hosts", str(good), "--bad-hosts", str(bad)
    )
    assert run.returncode == 1, run.stdout + run.stderr
    [blocked] = failing(data, "ports")
    assert blocked["hosts"] == ["node1"]
    assert "node1:29500" in blocked["summary"]
    assert good.read_text() == "node2\nnode3\n"
    assert bad.read_text() == "node1\n"
    assert "scontrol update nodename=node1 state=drain" in run.stdout
    # A launcher hands the file to srun as it is: a path with a '/' is a file of node names.
    ran = slurm.run(["srun", f"--nodes={len(good.read_text().split())}", f"--nodelist={good}", "hostname"])
    assert sorted(ran.split()) == ["node2", "node3"]
    assert_nothing_left_behind(lab, slurm)


def test_a_node_whose_slurmd_dies_mid_run_is_named_and_the_run_ends(
    make_lab: MakeLab, slurm_on: Any, tmp_path: Path
) -> None:
    lab = make_lab(3)
    slurm = slurm_on(lab)
    victim = lab.nodes[1]

    def kill_slurmd_during_the_facts_probe() -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if any(NODE_PYTHON in cmd for _, cmd in lab.processes(victim)):
                slurm.kill_slurmd(victim)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_slurmd_during_the_facts_probe)
    killer.start()
    run, data = salloc_check(slurm, 3, tmp_path / "run.json", "--only", "ports", "--timeout", "120")
    killer.join()
    assert run.returncode in (1, 3), run.stdout + run.stderr
    named = {h for check in ("connect", "ports") for r in failing(data, check) for h in r["hosts"]}
    assert named == {victim.name}, data["results"]
    assert [b["name"] for b in data["handback"]["bad"]] == [victim.name]
    assert data["handback"]["good"] == ["node1", "node3"]


def test_a_throttled_node_is_named_as_over_ssh(make_lab: MakeLab, slurm_on: Any, tmp_path: Path) -> None:
    lab = make_lab(3)
    slurm = slurm_on(lab)
    lab.throttle("node3", rate_mbit=40)
    run, data = salloc_check(slurm, 3, tmp_path / "run.json", "--only", "allreduce", "--timeout", "150")
    assert run.returncode == 1, run.stdout + run.stderr
    [slow] = failing(data, "allreduce")
    assert slow["hosts"] == ["node3"]
    assert "slow with every partner" in slow["summary"]
    assert [b["name"] for b in data["handback"]["bad"]] == ["node3"]
    assert_nothing_left_behind(lab, slurm)


def test_a_node_cut_during_the_job_is_named_and_its_stuck_step_does_not_hang_the_run(
    make_lab: MakeLab, slurm_on: Any, tmp_path: Path
) -> None:
    lab = make_lab(3)
    slurm = slurm_on(lab)
    victim = lab.nodes[2]

    cutter = lab.when_the_job_runs(victim, lambda: lab.cut(victim))
    run, data = salloc_check(slurm, 3, tmp_path / "run.json", "--only", "allreduce,ddp", "--timeout", "150")
    cutter.join(5)
    assert run.returncode == 1, run.stdout + run.stderr
    named = {h for check in ("allreduce", "ddp") for r in failing(data, check) for h in r["hosts"]}
    assert victim.name in named, data["results"]
    assert victim.name in [b["name"] for b in data["handback"]["bad"]]
    lab.restore(victim)


def broken_env(root: Path) -> Path:
    """A Python environment whose interpreter cannot start (its shared library is gone)."""
    env = root / "broken-env"
    (env / "bin").mkdir(parents=True)
    python = env / "bin" / "python"
    python.write_text(
        "#!/bin/sh\necho 'python: error while loading shared libraries: libpython3.11.so.1.0: "
        "cannot open shared object file: No such file or directory' >&2\nexit 127\n"
    )
    python.chmod(0o755)
    return env


def test_a_node_with_a_broken_environment_is_named_with_its_own_error_through_srun(
    make_lab: MakeLab, slurm_on: Any, tmp_path: Path
) -> None:
    lab = make_lab(2, node_envs={2: broken_env(tmp_path)})
    slurm = slurm_on(lab)
    run, data = salloc_check(slurm, 2, tmp_path / "run.json", "--only", "versions")
    assert run.returncode == 3, run.stdout + run.stderr
    [broken] = failing(data, "connect")
    assert broken["hosts"] == ["node2"]
    assert "libpython3.11.so.1.0" in broken["summary"]  # the node's words, not srun's "exit code 127"
    assert data["handback"]["bad"][0]["action"] == "fix_config"


def test_the_local_mode_as_prolog_drains_the_node_with_a_broken_environment(
    make_lab: MakeLab, slurm_on: Any, tmp_path: Path
) -> None:
    lab = make_lab(2, node_envs={2: broken_env(tmp_path)})
    metrics = f"{lab.root}/prolog-$SLURMD_NODENAME.prom"
    prolog = lab.root / "prolog.sh"
    prolog.write_text(
        f"#!/bin/sh\nexec {PREFLIGHT} check --local --python {NODE_PYTHON} --prometheus {metrics}\n"
    )
    prolog.chmod(0o755)
    slurm = slurm_on(lab, prolog=prolog)
    # Batch output goes to the lab's directory (the nodes see it), not the working tree.
    out = f"--output={lab.root}/slurm-%j.out", f"--chdir={lab.root}"
    healthy = slurm.run(["sbatch", "--parsable", *out, "--nodelist=node1", "--wrap", "hostname"]).strip()
    assert slurm.wait_job(healthy) == "COMPLETED"
    gated = slurm.run(["sbatch", "--parsable", *out, "--nodelist=node2", "--wrap", "hostname"]).strip()
    _, reason = slurm.wait_node_state("node2", "drain")
    assert reason == "Prolog error"
    assert slurm.job_state(gated) != "COMPLETED"
    # The prolog said why, in the one file it was asked for.
    text = (lab.root / "prolog-node2.prom").read_text()
    assert 'preflight_node_ok{node="node2"} 0' in text
    assert 'preflight_node_ok{node="node1"}' not in text
    assert 'preflight_node_ok{node="node1"} 1' in (lab.root / "prolog-node1.prom").read_text()
    assert lab.tmp_entries("node2") == []


def test_the_local_mode_in_a_step_prints_one_line_naming_the_node_and_exits_below_126(
    make_lab: MakeLab, slurm_on: Any, tmp_path: Path
) -> None:
    lab = make_lab(2, node_envs={2: broken_env(tmp_path)})
    slurm = slurm_on(lab)
    argv = ["srun", "--nodes=1", "--nodelist={}", PREFLIGHT, "check", "--local", "--python", NODE_PYTHON]
    ok = subprocess.run(
        [a.format("node1") for a in argv], capture_output=True, text=True, env=slurm.environ()
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.splitlines()[-1].startswith("preflight: pass on node1")
    bad = subprocess.run(
        [a.format("node2") for a in argv], capture_output=True, text=True, env=slurm.environ()
    )
    assert bad.returncode == 3, bad.stdout + bad.stderr
    first = bad.stdout.splitlines()[0]
    assert first.startswith("preflight: ERROR connect: node2") and "libpython3.11.so.1.0" in first
    assert lab.tmp_entries("node2") == []


def test_a_batch_job_gates_on_preflight_and_runs_on_the_nodes_that_passed(
    make_lab: MakeLab, slurm_on: Any, tmp_path: Path
) -> None:
    """The README's sbatch example, with hostname in place of the training."""
    lab = make_lab(3, node_envs={3: broken_env(tmp_path)})
    slurm = slurm_on(lab)
    work = lab.root / "job"
    work.mkdir()
    script = work / "train.sh"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --nodes=3 --no-kill\n"
        "set -euo pipefail\n"
        f"{PREFLIGHT} check --python {NODE_PYTHON} --min-nodes 2 --only versions \\\n"
        '    --good-hosts "$PWD/good.txt" --json "preflight-$SLURM_JOB_ID.json"\n'
        "head -n 2 good.txt > nodes.txt\n"
        'srun --nodes=2 --ntasks-per-node=1 --nodelist="$PWD/nodes.txt" hostname > trained-on.txt\n'
    )
    submit = ["sbatch", "--parsable", f"--chdir={work}", f"--output={work}/out.txt", str(script)]
    job = slurm.run(submit).strip()
    assert slurm.wait_job(job) == "COMPLETED", (work / "out.txt").read_text()
    assert sorted((work / "trained-on.txt").read_text().split()) == ["node1", "node2"]
    report = json.loads((work / f"preflight-{job}.json").read_text())
    assert report["exit_code"] == 0
    assert [b["name"] for b in report["handback"]["bad"]] == ["node3"]
    out = (work / "out.txt").read_text()
    assert "--min-nodes 2: met" in out
    assert "scontrol update nodename=node3 state=drain" in out
