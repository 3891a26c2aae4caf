"""The storage check's node script (run here for real, on real directories) and its judge: which
nodes share a filesystem, copies compared by their manifests, the checkpoint directory's room."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from checks.storage import StorageObservation, judge_storage, sharing
from checks.storage import node as storage_node
from checks.storage.present import storage_blocks
from checks.storage.probe import peers_to_look_at
from checks.storage.settings import StorageSection
from preflight.handback import hand_back
from preflight.model import HostReport, RunReport

DATA = Path(__file__).parent / "data" / "facts"
SCRIPT = Path(storage_node.__file__)
DAY_S = 86_400


def make_copy(root: Path, files: dict[str, bytes], mtime: float = 1_700_000_000) -> Path:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
        os.utime(root / name, (mtime, mtime))
    return root


SHARDS = {f"train/shard-{i:03d}.bin": bytes([i]) * (1000 + i) for i in range(20)} | {"meta.json": b"{}"}


class Talk:
    """The node script started as the probe starts it, talked to by lines."""

    def __init__(self, **options: Any) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(SCRIPT), json.dumps(options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def read(self, tag: str) -> Any:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith(tag + " "), line
        return json.loads(line[len(tag) + 1 :])

    def say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()


def test_the_mount_holding_a_path_is_read_from_a_recorded_pod_mount_table() -> None:
    table = (DATA / "mountinfo_k8s_pod_nfs4.txt").read_text()
    found = storage_node.mount_of("/kaiwudb/certs/ca.crt", table)
    assert found["type"] == "nfs4"
    assert found["source"].startswith("20.20.20.43:/data/k8s/nfs_share/pvc-")
    assert storage_node.mount_of("/dev/shm/x", table)["type"] == "tmpfs"
    assert storage_node.mount_of("/usr/lib", table)["type"] == "overlay"


def test_the_script_writes_its_marker_sees_it_walks_and_leaves_nothing(tmp_path: Path) -> None:
    data = make_copy(tmp_path / "data", SHARDS)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    talk = Talk(data=[str(data)], checkpoint=str(ckpt), marker="run-0")
    ready = talk.read("READY")
    assert ready[str(ckpt)]["writable"] is True
    assert ready[str(ckpt)]["marker"] == ".preflight-run-0"
    assert ready[str(ckpt)]["filesystem"]["free_bytes"] > 0
    assert (ckpt / ".preflight-run-0").stat().st_size == 64 << 10
    talk.say(
        json.dumps({}).join(["LOOK ", ""])
        if False
        else "LOOK " + json.dumps({str(ckpt): [".preflight-run-0", ".preflight-other"]})
    )
    assert talk.read("SEEN") == {str(ckpt): [".preflight-run-0"]}
    talk.say("WALK " + json.dumps([str(data)]))
    manifest = talk.read("MANIFEST")[str(data)]
    assert (manifest["files"], manifest["bytes"]) == (21, sum(len(v) for v in SHARDS.values()))
    assert len(manifest["samples"]) == 16
    talk.say("DONE")
    assert talk.read("CLEAN") == {"left": []}
    assert talk.process.wait(10) == 0
    assert sorted(p.name for p in ckpt.iterdir()) == []
    assert not list(data.glob(".preflight-*"))


def test_an_ended_script_removes_its_markers(tmp_path: Path) -> None:
    talk = Talk(checkpoint=str(tmp_path), marker="run-1")
    talk.read("READY")
    assert (tmp_path / ".preflight-run-1").exists()
    talk.process.send_signal(signal.SIGTERM)
    talk.process.wait(10)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_checkpoint_directory_says_why(tmp_path: Path) -> None:
    ckpt = tmp_path / "missing-parent" / "ckpt"
    talk = Talk(checkpoint=str(ckpt), marker="run-2")
    ready = talk.read("READY")
    talk.say("DONE")
    talk.read("CLEAN")
    talk.process.wait(10)
    assert ready[str(ckpt)] == {"role": "checkpoint", "exists": False, "error": "No such file or directory"}


def manifest_of(root: Path) -> dict[str, Any]:
    return storage_node.manifest(str(root), 100_000, 30, 16)


def observation(copies: dict[str, Path | None], **extra: Any) -> StorageObservation:
    inspected: dict[str, Any] = {}
    manifests: dict[str, Any] = {}
    for host, root in copies.items():
        path = "/data/set"
        if root is None:
            inspected[host] = {path: {"role": "data", "exists": False, "error": "No such file or directory"}}
            continue
        inspected[host] = {
            path: {"role": "data", "exists": True, "kind": "dir", "filesystem": {"type": "ext4"}}
        }
        manifests.setdefault(path, {})[host] = manifest_of(root)
    return StorageObservation(("/data/set",), "", inspected, manifests=manifests, **extra)


def test_separate_alike_copies_pass_and_say_so(tmp_path: Path) -> None:
    copies = {f"node{i}": make_copy(tmp_path / str(i), SHARDS) for i in range(1, 4)}
    (result,) = judge_storage(observation(copies), StorageSection(data=("/data/set",)))
    assert result.status == "pass"
    assert result.details["layout"] == "separate"
    assert "a separate copy on each node; alike on all 3 nodes: 21 files" in result.summary


def test_a_missing_and_a_stale_copy_are_each_named_with_what_differs(tmp_path: Path) -> None:
    copies: dict[str, Path | None] = {f"node{i}": make_copy(tmp_path / str(i), SHARDS) for i in (1, 2)}
    copies["node3"] = None
    stale = dict(SHARDS)
    del stale["train/shard-019.bin"]
    copies["node4"] = make_copy(tmp_path / "4", stale, mtime=1_700_000_000 - 3 * DAY_S)
    findings = judge_storage(observation(copies), StorageSection(data=("/data/set",)))
    by_item = {r.details["item"]: r for r in findings}
    assert by_item["missing"].hosts == ("node3",)
    assert by_item["missing"].summary == (
        "node3: the data path /data/set does not exist there, unlike on the other nodes "
        "(No such file or directory)"
    )
    assert by_item["differs"].hosts == ("node4",)
    assert "20 files, not 21" in by_item["differs"].summary
    assert (
        "newest file 2023-11-11 22:13:20 UTC, older than 2023-11-14 22:13:20 UTC"
        in by_item["differs"].summary
    )


def test_copies_with_no_majority_name_every_side_and_none_is_handed_back_as_good(tmp_path: Path) -> None:
    # Missing on node2; node1 and node3 hold copies that differ: nothing says which one is right.
    changed = dict(SHARDS)
    changed["meta.json"] = b"[]"
    copies = {
        "node1": make_copy(tmp_path / "1", SHARDS),
        "node2": None,
        "node3": make_copy(tmp_path / "3", changed),
    }
    findings = judge_storage(observation(copies), StorageSection(data=("/data/set",)))
    (differs,) = [r for r in findings if r.details["item"] == "differs"]
    assert differs.summary.startswith("the copies of /data/set differ and no copy is on most nodes")
    assert sorted(differs.hosts) == ["node1", "node3"]
    hosts = [HostReport(name, name, reachable=True) for name in copies]
    handback = hand_back(hosts, findings, {"storage": "fix_config"}, unreached_check="connect")
    assert handback.good == ()
    assert sorted(b.name for b in handback.bad) == ["node1", "node2", "node3"]


def test_changed_content_of_the_same_size_is_found_by_the_sample(tmp_path: Path) -> None:
    changed = dict(SHARDS)
    changed["meta.json"] = b"[]"
    copies = {"node1": make_copy(tmp_path / "1", SHARDS), "node2": make_copy(tmp_path / "2", SHARDS)}
    copies["node3"] = make_copy(tmp_path / "3", changed)
    (result,) = judge_storage(observation(copies), StorageSection(data=("/data/set",)))
    assert (result.status, result.hosts) == ("fail", ("node3",))
    assert "content differs in meta.json" in result.summary


def test_copies_with_other_times_only_warn(tmp_path: Path) -> None:
    copies = {f"node{i}": make_copy(tmp_path / str(i), SHARDS) for i in (1, 2)}
    copies["node3"] = make_copy(tmp_path / "3", SHARDS, mtime=time.time())
    (result,) = judge_storage(observation(copies), StorageSection(data=("/data/set",)))
    assert (result.status, result.hosts, result.details["item"]) == ("warn", ("node3",), "mtime")


def checkpoint_node(
    free: int, *, marker: str | None, writable: bool = True, network: bool = False
) -> dict[str, Any]:
    fs = {"type": "nfs4" if network else "ext4", "source": "nas:/ckpt", "fsid": "1", "network": network}
    found: dict[str, Any] = {
        "role": "checkpoint",
        "exists": True,
        "kind": "dir",
        "writable": writable,
        "marker": marker,
    }
    found["filesystem"] = {**fs, "free_bytes": free, "free_inodes": 10**6}
    if not writable:
        found["write_error"] = "Read-only file system"
    return {"/ckpt": found}


def test_a_shared_checkpoint_directory_told_by_markers_with_one_read_only_node() -> None:
    inspected = {f"node{i}": checkpoint_node(1 << 40, marker=f".preflight-r-{i}") for i in (1, 2, 3)}
    inspected["node2"] = checkpoint_node(1 << 40, marker=None, writable=False)
    seen = {h: {"/ckpt": [".preflight-r-1", ".preflight-r-3"]} for h in inspected}
    owners = {".preflight-r-1": "node1", ".preflight-r-3": "node3"}
    obs = StorageObservation((), "/ckpt", inspected, seen, owners)
    assert sharing("/ckpt", obs).layout == "shared"
    (result,) = judge_storage(obs, StorageSection(checkpoint_dir="/ckpt"))
    assert (result.status, result.hosts, result.details["item"]) == ("fail", ("node2",), "not_writable")
    assert result.summary == "node2: cannot write to the checkpoint directory /ckpt (Read-only file system)"
    assert result.details["layout"] == "shared"


def test_room_for_a_checkpoint_and_network_ids_tell_sharing_without_markers() -> None:
    inspected = {f"node{i}": checkpoint_node(200 << 30, marker=None, network=True) for i in (1, 2, 3)}
    obs = StorageObservation((), "/ckpt", inspected)
    share = sharing("/ckpt", obs)
    assert (share.layout, share.by) == ("shared", "ids")
    (result,) = judge_storage(obs, StorageSection(checkpoint_dir="/ckpt", checkpoint_size="140GiB"))
    assert result.status == "pass"
    assert "one shared filesystem (nfs4 nas:/ckpt; same filesystem ids)" in result.summary
    ok = {h: checkpoint_node(200 << 30, marker=f".m{h}") for h in ("node1", "node2")}
    (passed,) = judge_storage(
        StorageObservation((), "/ckpt", ok), StorageSection(checkpoint_dir="/ckpt", checkpoint_size="140GiB")
    )
    assert passed.status == "pass"
    assert "a separate copy on each node; 200 GiB free or more (a checkpoint needs 140 GiB)" in passed.summary
    (short,) = judge_storage(
        StorageObservation((), "/ckpt", ok), StorageSection(checkpoint_dir="/ckpt", checkpoint_size="1TiB")
    )
    assert (short.status, short.details["item"]) == ("fail", "space")
    assert short.summary == "node[1-2]: 200 GiB free in /ckpt, below the 1 TiB a checkpoint needs"


def test_the_report_shows_one_row_per_path_with_its_copies(tmp_path: Path) -> None:
    copies: dict[str, Path | None] = {f"node{i}": make_copy(tmp_path / str(i), SHARDS) for i in (1, 2)}
    stale = dict(SHARDS)
    del stale["meta.json"]
    copies["node3"] = make_copy(tmp_path / "3", stale)
    results = judge_storage(observation(copies), StorageSection(data=("/data/set",)))
    report = RunReport.build(tool_version="0", started_at="", duration_s=0, hosts=[], results=results)
    (table,) = storage_blocks(report)
    (row,) = table.rows
    assert [c.text for c in row[:3]] == ["/data/set", "data", "separate"]
    assert row[4].text.startswith("node[1-2]: 21 files")
    assert "; node3: 20 files" in row[4].text


def test_each_node_looks_for_a_bounded_chain_of_markers() -> None:
    writers = [f"node{i}" for i in range(1, 101)]
    assert peers_to_look_at("node50", writers, 3) == ["node1", "node51", "node52", "node53"]
    assert peers_to_look_at("node100", writers, 2) == ["node1", "node2"]
    assert peers_to_look_at("node1", writers[:2], 16) == ["node2"]
    # A node that wrote no marker (read-only) still looks for the others'.
    assert peers_to_look_at("ro", writers[:3], 16) == writers[:3]
