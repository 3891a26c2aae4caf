"""Scratch space: where the job and its libraries write on a node, found as they find it (the job's
own variables over the node's), measured once per filesystem; and the ``limits`` judge of it,
against the need and against the same places on the other nodes. Healthy nodes that merely differ
are not named."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from checks.limits import PRESENTATION, judge_limits
from checks.limits.settings import LimitsSection
from preflight.config import Config
from preflight.errors import ConfigError
from preflight.facts import NodeFacts
from preflight.gather import facts_probe_args
from preflight.model import CheckResult
from preflight.node import scratch
from preflight.node.gathering import Sink

GIB = 1 << 30
MIB = 1 << 20
DATA = Path(__file__).resolve().parent / "data" / "facts"
# A lab-like node as the probe reported it: /tmp (and TorchInductor's cache) on a tmpfs of its own,
# the other caches under /root on the root filesystem.
RECORDED: dict[str, Any] = json.loads((DATA / "scratch_tmpfs_tmp.json").read_text())
TMPFS = RECORDED["tmp"]["device"]
ROOTFS = RECORDED["torch"]["device"]
HEALTHY = {TMPFS: 500 * GIB, ROOTFS: 900 * GIB}

# ------------------------------------------------------------------ where each place is


def places(environ: dict[str, str], user: str = "alice") -> dict[str, tuple[str, str]]:
    return {p: (path, source) for p, path, source in scratch.scratch_places(environ, "/home/alice", user)}


def test_without_variables_each_place_is_its_librarys_default() -> None:
    assert places({}) == {
        "tmp": ("/tmp", "default"),
        "torch": ("/home/alice/.cache/torch", "default"),
        "inductor": ("/tmp/torchinductor_alice", "default"),
        "triton": ("/home/alice/.triton/cache", "default"),
        "huggingface": ("/home/alice/.cache/huggingface", "default"),
    }


def test_each_variable_moves_its_place_and_what_is_under_it() -> None:
    found = places(
        {
            "TMPDIR": "/scratch/tmp",
            "XDG_CACHE_HOME": "~/cache",
            "TRITON_HOME": "/scratch",
            "HF_DATASETS_CACHE": "/data/hf",
        }
    )
    assert found == {
        "tmp": ("/scratch/tmp", "TMPDIR"),
        "torch": ("/home/alice/cache/torch", "XDG_CACHE_HOME"),
        "inductor": ("/scratch/tmp/torchinductor_alice", "TMPDIR"),
        "triton": ("/scratch/.triton/cache", "TRITON_HOME"),
        "huggingface": ("/home/alice/cache/huggingface", "XDG_CACHE_HOME"),
        "hf_datasets": ("/data/hf", "HF_DATASETS_CACHE"),
    }


def test_a_cache_variable_wins_over_the_directory_it_would_be_under() -> None:
    found = places(
        {
            "TMPDIR": "/scratch/tmp",
            "XDG_CACHE_HOME": "/cache",
            "TORCH_HOME": "~/torch",
            "TORCHINDUCTOR_CACHE_DIR": "/nvme/inductor",
            "TRITON_CACHE_DIR": "/nvme/triton",
            "TRITON_HOME": "/ignored",
            "HF_HOME": "/shared/hf",
        }
    )
    assert found["torch"] == ("/home/alice/torch", "TORCH_HOME")
    assert found["inductor"] == ("/nvme/inductor", "TORCHINDUCTOR_CACHE_DIR")
    assert found["triton"] == ("/nvme/triton", "TRITON_CACHE_DIR")
    assert found["huggingface"] == ("/shared/hf", "HF_HOME")


def test_an_empty_variable_is_unset_as_the_libraries_read_it() -> None:
    assert places({"TMPDIR": "", "HF_HOME": "", "HF_DATASETS_CACHE": ""}) == places({})


def test_torchinductor_names_its_directory_after_a_user_name_made_safe() -> None:
    assert places({}, user="CORP\\alice")["inductor"] == ("/tmp/torchinductor_CORP_alice", "default")


def test_the_controller_sends_the_jobs_scratch_variables_and_nothing_else() -> None:
    (options,) = facts_probe_args({"TMPDIR": "/scratch", "HF_HOME": "/hf", "WANDB_API_KEY": "secret"})
    assert json.loads(options)["job_env"] == {"TMPDIR": "/scratch", "HF_HOME": "/hf"}


# ------------------------------------------------------------------ measuring them


def test_a_place_not_made_yet_is_measured_where_it_would_be_made(tmp_path: Path) -> None:
    seen: dict[int, Any] = {}
    found = scratch.measure(str(tmp_path / "not" / "yet"), "TMPDIR", seen)
    assert found["measured"] == str(tmp_path)
    assert found["writable"] is True
    device = os.stat(tmp_path).st_dev
    assert found["device"] == f"{os.major(device)}:{os.minor(device)}"
    assert found["mount"] == scratch.mount_point(str(tmp_path))
    assert os.path.ismount(found["mount"])


def test_places_on_one_filesystem_are_measured_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = os.statvfs

    def statvfs(path: str) -> os.statvfs_result:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(scratch.os, "statvfs", statvfs)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in scratch.SCRATCH_ENV:
        monkeypatch.delenv(name, raising=False)
    sink = Sink({"job_env": {"TMPDIR": str(tmp_path / "tmp"), "NCCL_DEBUG": "INFO"}})
    scratch.gather_scratch(sink)
    found = sink.facts["scratch"]
    assert list(found) == ["tmp", "torch", "inductor", "triton", "huggingface"]
    assert found["tmp"]["path"] == str(tmp_path / "tmp")
    assert found["tmp"]["source"] == "TMPDIR"  # the job's value, not the node's
    assert {f["measured"] for f in found.values()} == {str(tmp_path)}
    assert calls == [str(tmp_path)]  # five places, one filesystem
    assert len({f["free_bytes"] for f in found.values()}) == 1


def statvfs(blocks: int, bavail: int, files: int, favail: int) -> os.statvfs_result:
    return os.statvfs_result((4096, 4096, blocks, bavail, bavail, files, favail, favail, 0, 255))


def test_room_is_what_an_unprivileged_user_may_use() -> None:
    # ext4 keeps 5 % of its blocks for root: f_bavail, not f_bfree.
    assert scratch.filesystem_room(statvfs(1000, 900, 64, 60)) == {
        "total_bytes": 1000 * 4096,
        "free_bytes": 900 * 4096,
        "total_inodes": 64,
        "free_inodes": 60,
    }


def test_a_filesystem_without_a_limit_reads_as_none_not_as_full() -> None:
    # A tmpfs mounted with size=0 reports 0 blocks; btrfs reports 0 inodes of 0.
    room = scratch.filesystem_room(statvfs(0, 0, 0, 0))
    assert room == {"total_bytes": None, "free_bytes": None, "total_inodes": None, "free_inodes": None}


def test_the_view_reads_each_place_and_passes_over_garbage() -> None:
    node = NodeFacts({"scratch": {**RECORDED, "bogus": {"free_bytes": 3}, "worse": "x"}})
    assert list(node.scratch) == ["tmp", "torch", "inductor", "triton", "huggingface"]
    tmp = node.scratch["tmp"]
    assert (tmp.place, tmp.path, tmp.mount, tmp.free_bytes, tmp.writable) == (
        "tmp",
        "/tmp",
        "/tmp",
        12638253056,
        True,
    )
    assert node.scratch["torch"].measured == "/root"
    assert NodeFacts({"scratch": ["not", "a", "mapping"]}).scratch == {}


# ------------------------------------------------------------------ the judge


def node(
    free: dict[str, int] | None = None, *, inodes: dict[str, int] | None = None, **changed: Any
) -> NodeFacts:
    """The recorded node with the free space (and inodes) of its filesystems, by device, and any
    place's fields changed."""
    document = copy.deepcopy(RECORDED)
    for place in document.values():
        place["free_bytes"] = {**HEALTHY, **(free or {})}[place["device"]]
        place["total_bytes"] = max(place["total_bytes"], place["free_bytes"])
        if inodes and place["device"] in inodes:
            place["free_inodes"] = inodes[place["device"]]
    for name, fields in changed.items():
        document[name].update(fields)
    return NodeFacts({"scratch": document})


def judge(config: Config | None = None, **nodes: NodeFacts) -> list[CheckResult]:
    return judge_limits(nodes, config or Config())


def named(results: list[CheckResult]) -> list[tuple[str, tuple[str, ...], str]]:
    return [(r.status, r.hosts, str(r.details.get("item"))) for r in results if r.status != "pass"]


def test_nodes_with_room_pass_and_say_the_least_they_have() -> None:
    (result,) = judge(node1=node(), node2=node(), node3=node({ROOTFS: 700 * GIB}))
    assert result.status == "pass"
    assert result.summary == "500 GiB or more free where the job writes on all 3 nodes"
    assert result.details["nodes"]["node1"]["scratch_free_bytes"]["inductor"] == 500 * GIB


def test_a_full_tmp_fails_on_that_node_only_naming_tmp_and_what_writes_there() -> None:
    results = judge(node1=node(), node2=node({TMPFS: 1 * MIB}), node3=node())
    assert named(results) == [("fail", ("node2",), "scratch_space")]
    (full,) = results
    assert full.summary == (
        "node2: only 1 MiB free on /tmp, below the 10 GiB a job needs where it writes: "
        "the temporary directory /tmp, TorchInductor's cache /tmp/torchinductor_root"
    )
    assert full.details["places"] == ["tmp", "inductor"]
    assert full.details["free_bytes"] == {"node2": 1 * MIB}
    assert full.details["need_bytes"] == 10 * GIB
    assert "node1" in full.details["nodes"]  # every node's row rides on the first finding


def test_two_nodes_are_judged_as_surely_as_many() -> None:
    assert named(judge(node1=node({TMPFS: 1 * MIB}), node2=node())) == [("fail", ("node1",), "scratch_space")]
    assert named(judge(node1=node(), node2=node({TMPFS: 15 * GIB}))) == [
        ("warn", ("node2",), "scratch_peers")
    ]


def test_every_node_short_is_one_finding_with_the_range_they_have() -> None:
    (finding,) = judge(**{f"node{i}": node({TMPFS: i * GIB}) for i in range(1, 5)})
    assert finding.hosts == ("node1", "node2", "node3", "node4")
    assert finding.summary.startswith("node[1-4]: 1 GiB to 4 GiB free on /tmp, below the 10 GiB")


def test_a_node_with_far_less_than_the_others_warns_above_the_need() -> None:
    results = judge(node1=node(), node2=node({TMPFS: 12 * GIB}), node3=node())
    assert named(results) == [("warn", ("node2",), "scratch_peers")]
    assert results[0].summary.startswith(
        "node2: 12 GiB free on /tmp, under a tenth of what the other nodes have there (500 GiB median): "
        "the temporary directory /tmp"
    )


def test_a_big_tmp_simply_fuller_than_the_others_is_not_named() -> None:
    # 60 GiB free where the others have 900: under a tenth of theirs, but six times the need.
    (result,) = judge(
        node1=node({TMPFS: 900 * GIB}), node2=node({TMPFS: 60 * GIB}), node3=node({TMPFS: 900 * GIB})
    )
    assert result.status == "pass"


def test_too_few_free_inodes_fail() -> None:
    results = judge(node1=node(), node2=node(inodes={ROOTFS: 5_000}))
    assert named(results) == [("fail", ("node2",), "scratch_inodes")]
    assert results[0].summary.startswith("node2: 5,000 free inodes on /, below the 100,000 a job needs")
    assert results[0].details["places"] == ["torch", "triton", "huggingface"]


def test_a_place_the_user_cannot_write_fails_naming_the_directory_that_refused() -> None:
    refused = {"writable": False}
    results = judge(node1=node(), node2=node(torch=refused, triton=refused, huggingface=refused))
    assert named(results) == [("fail", ("node2",), "scratch_not_writable")]
    assert results[0].summary == (
        "node2: /root is not writable by the job's user, and the job writes there: torch's cache "
        "/root/.cache/torch, Triton's cache /root/.triton/cache, Hugging Face's cache "
        "/root/.cache/huggingface (not made yet: it would be made there)"
    )
    assert results[0].details["measured"] == "/root"


def test_numbers_a_node_could_not_give_are_not_judged() -> None:
    unlimited = {"free_bytes": None, "total_bytes": None, "free_inodes": None, "total_inodes": None}
    (result,) = judge(node1=node(tmp=unlimited, inductor=unlimited), node2=node({TMPFS: 20 * GIB}))
    assert result.status == "pass"


def test_a_node_without_scratch_facts_is_passed_over() -> None:
    (result,) = judge(node1=node(), node2=NodeFacts({}))
    assert result.status == "pass"
    assert result.summary.endswith("(node2 did not report them)")


def test_the_need_comes_from_the_limits_section() -> None:
    config = Config(sections={LimitsSection: LimitsSection(min_scratch_free="1 GiB", min_scratch_inodes=0)})
    assert named(judge(config, node1=node({TMPFS: 2 * GIB}), node2=node({TMPFS: 2 * GIB}))) == []
    (short,) = judge(config, node1=node({TMPFS: 512 * MIB}), node2=node())
    assert "below the 1 GiB a job needs" in short.summary


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"min_scratch_free": "lots"}, "limits.min_scratch_free: 'lots' is not a size"),
        ({"min_scratch_inodes": -1}, "limits.min_scratch_inodes must be 0 or more"),
    ],
)
def test_a_bad_need_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LimitsSection(**fields)


def test_every_scratch_finding_has_advice() -> None:
    results = [
        *judge(node1=node({TMPFS: 1 * MIB}), node2=node(inodes={ROOTFS: 1})),
        *judge(node1=node(torch={"writable": False}), node2=node(), node3=node({ROOTFS: 12 * GIB})),
    ]
    items = {str(r.details["item"]) for r in results}
    assert items == {"scratch_space", "scratch_inodes", "scratch_not_writable", "scratch_peers"}
    assert all(PRESENTATION.advice(r) for r in results)
