"""The job's surroundings through real SSH on the lab cluster: one 4-node lab with a fault on
each odd node, checked once through the command line as an operator would; each test reads what
one fault became in the report.

- node2: a tiny /dev/shm, and its own name on 127.0.1.1 in its own /etc/hosts
- node3: NCCL_SOCKET_NTHREADS set in its SSH sessions only, and a stale /etc/hosts line for
  the master (node1)
- node4: its clock two minutes ahead (libfaketime preloaded in its SSH sessions)

Storage: ``copies/set`` is a separate copy on each node (a tmpfs in each node's own mount
namespace): alike on node1 and node2, missing on node3, stale on node4 (a file short, three days
older); ``shared/set`` and ``ckpt`` are one filesystem that every node sees, but ``ckpt`` is
read-only on node2 and a tiny filesystem of its own on node4.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _require_lab
from tests.lab import NODE_PYTHON, LabCluster

pytestmark = pytest.mark.lab

CHECKS = "environment,limits,names,clocks,storage"
SHARDS = 4
NOWHERE = "/srv/no-such-dataset"
STALE_MASTER = "10.199.254.99"  # where node3's own /etc/hosts says the master is
DAY_S = 86_400
SKEW_S = 120


@dataclass
class Run:
    lab: LabCluster
    returncode: int
    output: str
    report: dict[str, Any]

    def results(self, check: str) -> list[dict[str, Any]]:
        return [r for r in self.report["results"] if r["check"] == check]

    def at(self, *indices: int) -> list[str]:
        """Hosts as the report names them (the hosts file lists addresses)."""
        return [self.lab.node(i).address for i in indices]


def libfaketime() -> str:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if not found:
        pytest.fail("libfaketime is missing (Debian package faketime)", pytrace=False)
    return found[0]


def preflight(
    lab: LabCluster, tmp: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    hosts = lab.hosts_file(tmp / "hosts.txt")
    report = tmp / "run.json"
    report.unlink(missing_ok=True)
    argv = [
        sys.executable, "-m", "preflight", "check", str(hosts),
        "--python", NODE_PYTHON, "-i", str(lab.key_path), "--ssh-config", os.devnull,
        "--known-hosts", str(lab.known_hosts_path), "--json", str(report), *extra,
    ]  # fmt: skip
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    run = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env)
    assert report.exists(), run.stdout + run.stderr
    return run, json.loads(report.read_text())


def write_set(lab: LabCluster, node: int, root: Path, shards: int, *, days_old: int = 0) -> None:
    """A small data set under root/set, written in the node (its own mounts), with fixed times."""
    stamp = f"@{1_800_000_000 - days_old * DAY_S}"
    lines = [f"mkdir -p {root}/set/train"]
    for i in range(shards):
        lines.append(
            f"head -c {4096 + i} /dev/zero | tr '\\0' '{chr(97 + i)}' > {root}/set/train/shard-{i}.bin"
        )
    lines.append(f"touch -d {stamp} {root}/set/train/*.bin")
    lab.exec(node, ["sh", "-c", " && ".join(lines)])


def make_storage(lab: LabCluster) -> tuple[Path, Path, Path]:
    copies, shared, ckpt = lab.root / "copies", lab.root / "shared", lab.root / "ckpt"
    for path in (copies, shared, ckpt):
        path.mkdir()
    for node in lab.nodes:
        lab.exec(node, ["mount", "-t", "tmpfs", "pflab-data", str(copies)])
    for node in (1, 2):
        write_set(lab, node, copies, SHARDS)
    write_set(lab, 4, copies, SHARDS - 1, days_old=3)
    write_set(lab, 1, shared, SHARDS)
    lab.exec(2, ["sh", "-c", f"mount --bind {ckpt} {ckpt} && mount -o remount,ro,bind {ckpt}"])
    lab.exec(4, ["mount", "-t", "tmpfs", "-o", "size=512k", "pflab-ckpt", str(ckpt)])
    return copies, shared, ckpt


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    _require_lab()
    with LabCluster(4, env=Path(sys.prefix)) as lab:
        lab.exec(2, ["mount", "-o", "remount,size=1m", "/dev/shm"])
        hosts = lab.exec(2, ["cat", "/etc/hosts"]).stdout.decode()
        lab.node_file(2, "/etc/hosts", "127.0.1.1\tnode2\n" + hosts)
        lab.set_session_env(3, {"NCCL_SOCKET_NTHREADS": "8"})
        others = "".join(line + "\n" for line in hosts.splitlines() if not line.endswith("\tnode1"))
        lab.node_file(3, "/etc/hosts", f"{STALE_MASTER}\tnode1\n" + others)
        lab.set_session_env(
            4, {"LD_PRELOAD": libfaketime(), "FAKETIME": f"+{SKEW_S}", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        )
        copies, shared, ckpt = make_storage(lab)
        tmp = tmp_path_factory.mktemp("surroundings")
        done, report = preflight(
            lab, tmp, "--only", CHECKS, "--data", f"{copies}/set", "--data", f"{shared}/set",
            "--data", NOWHERE,
            "--checkpoint-dir", str(ckpt), "--checkpoint-size", "1MiB",
        )  # fmt: skip
        yield Run(lab, done.returncode, done.stdout + done.stderr, report)
        for node in lab.nodes:
            assert lab.lingering_processes(node) == [], f"{node.name} still runs something"
            assert lab.tmp_entries(node) == [], f"{node.name} has files left in /tmp"
            markers = lab.exec(node, ["find", str(copies), str(shared), str(ckpt), "-name", ".preflight-*"])
            assert markers.stdout == b"", f"{node.name} has markers left"


def test_the_faults_fail_the_run(run: Run) -> None:
    assert run.returncode == 1, run.output
    assert all(h["reachable"] for h in run.report["hosts"])


def test_a_tiny_dev_shm_is_named(run: Run) -> None:
    shm = [r for r in run.results("limits") if r["details"].get("item") == "shm"]
    assert [(r["status"], r["hosts"]) for r in shm] == [("fail", run.at(2))]
    assert f"{run.at(2)[0]}: /dev/shm is 1 MiB, below the 1 GiB a job needs" in shm[0]["summary"]


def test_a_variable_set_on_one_node_only_is_named_with_both_sides(run: Run) -> None:
    found = [r for r in run.results("environment") if "NCCL_SOCKET_NTHREADS" in r["summary"]]
    assert len(found) == 1, run.results("environment")
    assert found[0]["hosts"] == run.at(3)
    values = found[0]["details"]["variables"]["NCCL_SOCKET_NTHREADS"]["values"]
    assert values == {"8": run.at(3), "(unset)": run.at(1, 2, 4)}


def test_a_node_with_a_stale_hosts_line_for_the_master_is_named(run: Run) -> None:
    (found,) = [r for r in run.results("names") if r["details"]["item"] == "wrong"]
    assert (found["status"], found["hosts"]) == ("fail", run.at(3))
    master = run.lab.node(1).address
    assert (
        f"node1 (the master, {master}) resolves to {STALE_MASTER}, an address it does not have, not {master}"
        in (found["summary"])
    )


def test_a_node_whose_own_name_is_on_loopback_is_named(run: Run) -> None:
    (found,) = [r for r in run.results("names") if r["details"]["item"] == "own_loopback"]
    assert (found["status"], found["hosts"], found["details"]["item"]) == ("fail", run.at(2), "own_loopback")
    assert "node2 -> 127.0.1.1" in found["summary"]
    # The peers resolve node2 to its address: the fault is node2's own view only.
    assert found["details"]["nodes"][run.at(1)[0]]["own"] == f"node1 -> {run.lab.node(1).address}"


def test_a_skewed_clock_is_named_with_its_offset_and_uncertainty(run: Run) -> None:
    offsets = [r for r in run.results("clocks") if r["details"].get("item") == "offset"]
    assert [(r["status"], r["hosts"]) for r in offsets] == [("warn", run.at(4))]
    measured = offsets[0]["details"]["offset_s"]
    uncertainty = offsets[0]["details"]["uncertainty_s"]
    assert abs(measured - SKEW_S) < 1 + uncertainty
    assert f"{run.at(4)[0]}: its clock is +" in offsets[0]["summary"]


def storage(run: Run, item: str) -> list[dict[str, Any]]:
    return [r for r in run.results("storage") if r["details"].get("item") == item]


def test_a_copy_missing_on_one_node_and_stale_on_another_are_each_named(run: Run) -> None:
    missing, nowhere = storage(run, "missing")
    assert (missing["status"], missing["hosts"]) == ("fail", run.at(3))
    assert "/copies/set does not exist there, unlike on the other nodes" in missing["summary"]
    (stale,) = storage(run, "differs")
    assert (stale["status"], stale["hosts"]) == ("fail", run.at(4))
    assert f"{SHARDS - 1} files, not {SHARDS}" in stale["summary"]
    assert "older than" in stale["summary"]
    assert stale["details"]["layout"] == "separate"
    # A path on no node at all (a typo?) names every node in one finding.
    assert nowhere["hosts"] == run.at(1, 2, 3, 4)
    assert f"the data path {NOWHERE} does not exist on any node" in nowhere["summary"]


def test_a_shared_data_path_is_told_shared_by_a_file_seen_from_every_node(run: Run) -> None:
    (shared,) = [r for r in run.results("storage") if r["details"].get("path", "").endswith("/shared/set")]
    assert shared["status"] == "pass"
    assert (shared["details"]["layout"], shared["details"]["shared_by"]) == ("shared", "marker")
    assert f"alike on all 4 nodes: {SHARDS} files" in shared["summary"]


def test_a_checkpoint_directory_read_only_on_one_node_is_named(run: Run) -> None:
    (found,) = storage(run, "not_writable")
    assert (found["status"], found["hosts"]) == ("fail", run.at(2))
    assert "Read-only file system" in found["summary"]
    # node2 still sees the others' markers: the filesystem they share, read-only there.
    assert found["details"]["layout"] == "mixed"
    assert run.at(1, 2, 3) in found["details"]["groups"]


def test_a_checkpoint_directory_too_small_and_not_shared_is_named(run: Run) -> None:
    (small,) = storage(run, "space")
    assert (small["status"], small["hosts"]) == ("fail", run.at(4))
    assert "512 KiB free in" in small["summary"]
    assert small["summary"].endswith("below the 1 MiB a checkpoint needs")
    (alone,) = storage(run, "not_shared")
    assert (alone["status"], alone["hosts"]) == ("warn", run.at(4))
