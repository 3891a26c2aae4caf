"""The limits judge: /dev/shm, locked memory and open files against the job's needs and against
the other nodes; healthy nodes that merely differ are not named."""

from __future__ import annotations

from typing import Any

from checks.limits import judge_limits
from preflight.config import Config
from preflight.facts import NodeFacts

GIB = 1 << 30
UNLIMITED = "unlimited"


def node(
    shm: int = 64 * GIB,
    *,
    free: int | None = None,
    memlock: int | str = UNLIMITED,
    nofile: int = 1 << 20,
    nofile_hard: int = 1 << 20,
    rdma: bool = False,
) -> NodeFacts:
    facts: dict[str, Any] = {
        "shm": {"path": "/dev/shm", "size_bytes": shm, "free_bytes": shm if free is None else free},
        "limits": {
            "memlock": {"soft": memlock, "hard": memlock},
            "nofile": {"soft": nofile, "hard": nofile_hard},
        },
        "net": {
            "interfaces": [],
            "ib_devices": [{"name": "mlx5_0", "port": 1, "state": "ACTIVE"}] if rdma else [],
        },
    }
    return NodeFacts(facts)


def judge(**nodes: NodeFacts) -> list[Any]:
    return judge_limits(nodes, Config())


def test_healthy_nodes_pass_with_what_they_have() -> None:
    (result,) = judge(node1=node(), node2=node(), node3=node())
    assert result.status == "pass"
    assert result.summary == (
        "/dev/shm 64 GiB or more, locked memory unlimited, open files 1,048,576 or more on all 3 nodes"
    )


def test_a_tiny_dev_shm_fails_naming_only_that_node() -> None:
    (finding,) = judge(node1=node(), node2=node(shm=1 << 20), node3=node())
    assert finding.status == "fail"
    assert finding.hosts == ("node2",)
    assert finding.summary.startswith("node2: /dev/shm is 1 MiB, below the 1 GiB a job needs")


def test_a_containers_default_dev_shm_fails_on_every_node_in_one_finding() -> None:
    (finding,) = judge(node1=node(shm=64 << 20), node2=node(shm=64 << 20))
    assert finding.hosts == ("node1", "node2")
    assert finding.summary.startswith("node[1-2]: /dev/shm is 64 MiB")


def test_nodes_with_different_memory_have_different_dev_shm_and_that_is_fine() -> None:
    (result,) = judge(node1=node(shm=250 * GIB), node2=node(shm=500 * GIB), node3=node(shm=500 * GIB))
    assert result.status == "pass"


def test_a_dev_shm_far_smaller_than_the_others_warns_even_above_the_need() -> None:
    (finding,) = judge(node1=node(shm=2 * GIB), node2=node(shm=250 * GIB), node3=node(shm=250 * GIB))
    assert (finding.status, finding.hosts) == ("warn", ("node1",))


def test_a_dev_shm_filled_by_leftovers_warns() -> None:
    (finding,) = judge(node1=node(free=100 << 20), node2=node())
    assert (finding.status, finding.hosts) == ("warn", ("node1",))
    assert "only 100 MiB of /dev/shm is free" in finding.summary


def test_rdma_needs_unlimited_locked_memory() -> None:
    (finding,) = judge(node1=node(rdma=True), node2=node(memlock=64 << 10, rdma=True))
    assert finding.status == "fail"
    assert finding.hosts == ("node2",)
    assert "locked-memory limit is 64 KiB, and RDMA needs unlimited" in finding.summary


def test_without_rdma_a_locked_memory_limit_is_judged_against_the_other_nodes() -> None:
    (finding,) = judge(node1=node(memlock=8 << 20), node2=node(memlock=8 << 20), node3=node(memlock=64 << 10))
    assert (finding.status, finding.hosts) == ("warn", ("node3",))
    assert "node[1-2]: 8 MiB; node3: 64 KiB" in finding.summary


def test_a_low_open_files_limit_warns_and_says_when_the_hard_limit_allows_more() -> None:
    (finding,) = judge(node1=node(nofile=1024, nofile_hard=524288), node2=node())
    assert (finding.status, finding.hosts) == ("warn", ("node1",))
    assert "open files are limited to 1,024, below 4,096" in finding.summary
    assert "hard limit allows raising it" in finding.summary


def test_a_node_that_reported_nothing_is_said_not_judged() -> None:
    (result,) = judge(node1=node(), node2=NodeFacts({}))
    assert result.status == "pass"
    assert result.summary.endswith("(node2 did not report them)")
