"""The environment judge: variables compared between nodes as the job sees them, named per node
with the values on each side; no difference where there is none that matters."""

from __future__ import annotations

import json
from typing import Any

from checks.environment import judge_environment
from checks.environment.settings import MUST_MATCH
from preflight.facts import NodeFacts


def node(
    hostname: str,
    env: dict[str, str] | None = None,
    *,
    conf: dict[str, str] | None = None,
    plugin: str | None = None,
    digests: dict[str, str] | None = None,
    address: str = "",
) -> NodeFacts:
    facts: dict[str, Any] = {
        "hostname": hostname,
        "env": env or {},
        "nccl": {
            "conf_files": [
                {"role": "user", "path": "/root/.nccl.conf", "present": False},
                {
                    "role": "system",
                    "path": "/etc/nccl.conf",
                    "present": conf is not None,
                    "settings": conf or {},
                    "unread": [],
                },
            ],
            "net_plugins": [],
            "net_plugin_wanted": ["libnccl-net.so"],
            "net_plugin": plugin,
        },
        "net": {"interfaces": [{"name": "eth0", "addresses": [f"{address}/24"] if address else []}]},
    }
    if digests:
        facts["env_secret_digests"] = digests
    return NodeFacts(facts)


def cluster(**nodes: NodeFacts) -> dict[str, NodeFacts]:
    return dict(nodes)


def judge(nodes: dict[str, NodeFacts], job_env: dict[str, str] | None = None, **kwargs: Any) -> list[Any]:
    return judge_environment(nodes, job_env or {}, must_match=MUST_MATCH, **kwargs)


BASE = {"NCCL_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "8"}


def test_alike_nodes_pass_listing_what_they_agree_on() -> None:
    (result,) = judge(
        cluster(node1=node("node1", BASE), node2=node("node2", BASE), node3=node("node3", BASE))
    )
    assert result.status == "pass"
    assert result.summary.startswith(
        "2 variables agree (NCCL_SOCKET_IFNAME=eth0, OMP_NUM_THREADS=8) on all 3 nodes"
    )
    assert result.hosts == ()


def test_a_variable_set_differently_on_one_node_names_it_with_the_values_on_each_side() -> None:
    nodes = cluster(
        node1=node("node1", BASE),
        node2=node("node2", {"OMP_NUM_THREADS": "8"}, conf={"NCCL_SOCKET_IFNAME": "ib0"}),
        node3=node("node3", BASE),
    )
    (finding,) = judge(nodes)
    assert finding.status == "warn"
    assert finding.hosts == ("node2",)
    assert finding.summary == (
        "NCCL_SOCKET_IFNAME differs between nodes: node[1,3]: eth0; node2: ib0 (from /etc/nccl.conf)"
    )
    values = finding.details["variables"]["NCCL_SOCKET_IFNAME"]
    assert values["sources"]["node2"] == "/etc/nccl.conf"


def test_a_variable_the_ranks_must_agree_on_fails() -> None:
    nodes = cluster(
        node1=node("node1", {"NCCL_ALGO": "Ring"}),
        node2=node("node2", {"NCCL_ALGO": "Ring"}),
        node3=node("node3", {}),
    )
    (finding,) = judge(nodes)
    assert finding.status == "fail"
    assert finding.hosts == ("node3",)
    assert "node3: (unset)" in finding.summary and "node[1-2]: Ring" in finding.summary
    # A gloo-only job does not read NCCL's: the same difference only warns.
    (gloo,) = judge(nodes, nccl_in_use=False)
    assert gloo.status == "warn"


def test_the_jobs_own_environment_is_what_is_compared() -> None:
    nodes = cluster(
        node1=node("node1", BASE),
        node2=node("node2", {**BASE, "NCCL_SOCKET_IFNAME": "ib0"}),
        node3=node("node3", BASE),
    )
    (result,) = judge(nodes, {"NCCL_SOCKET_IFNAME": "bond0", "HF_HOME": "/cache"})
    assert result.status == "pass"
    assert result.details["agreed"]["NCCL_SOCKET_IFNAME"] == "bond0"
    assert result.details["job_env"] == ["NCCL_SOCKET_IFNAME"]


def test_values_that_differ_only_by_the_nodes_own_name_or_address_are_alike() -> None:
    def env(host: str, address: str) -> dict[str, str]:
        return {
            "NCCL_DEBUG_FILE": f"/logs/nccl-{host}.%p.log",
            "GLOO_SOCKET_IFNAME": "eth0",
            "MASTER_ADDR": "10.0.0.11",  # the master's own address on the master: not a difference
            "TORCH_NODE_TAG": f"{address}:rack1",
        }

    nodes = {
        f"10.0.0.1{i}": node(f"node{i}", env(f"node{i}", f"10.0.0.1{i}"), address=f"10.0.0.1{i}")
        for i in (1, 2, 3)
    }
    (result,) = judge(nodes)
    assert result.status == "pass", result.summary


def test_a_node_with_a_whole_other_environment_is_one_finding() -> None:
    other = {"NCCL_SOCKET_IFNAME": "ib0", "OMP_NUM_THREADS": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    nodes = cluster(
        node1=node("node1", BASE),
        node2=node("node2", BASE),
        node3=node("node3", BASE),
        node4=node("node4", other),
    )
    (finding,) = judge(nodes)
    assert finding.hosts == ("node4",)
    assert finding.summary.startswith("node4 differs in 3 variables: ")
    assert "NCCL_SOCKET_IFNAME=ib0 (others: eth0)" in finding.summary
    assert "CUDA_DEVICE_MAX_CONNECTIONS=1 (others: (unset))" in finding.summary


def test_secrets_are_compared_by_digest_and_never_shown() -> None:
    nodes = cluster(
        node1=node("node1", {"NCCL_IB_TOKEN": "***"}, digests={"NCCL_IB_TOKEN": "aaaa"}),
        node2=node("node2", {"NCCL_IB_TOKEN": "***"}, digests={"NCCL_IB_TOKEN": "aaaa"}),
        node3=node("node3", {"NCCL_IB_TOKEN": "***"}, digests={"NCCL_IB_TOKEN": "bbbb"}),
    )
    (finding,) = judge(nodes)
    assert finding.hosts == ("node3",)
    assert "aaaa" not in json.dumps(finding.to_dict()) and "bbbb" not in finding.summary
    assert "NCCL_IB_TOKEN" in finding.summary and "***" in finding.summary


def test_with_two_nodes_and_no_majority_both_are_named() -> None:
    (finding,) = judge(cluster(node1=node("node1", {"OMP_NUM_THREADS": "4"}), node2=node("node2", BASE)))
    assert set(finding.hosts) == {"node1", "node2"}


def test_a_network_plugin_on_some_nodes_only_fails_naming_the_others() -> None:
    plugin = "/opt/amazon/ofi-nccl/lib/libnccl-net.so"
    nodes = cluster(
        node1=node("node1", plugin=plugin),
        node2=node("node2", plugin=plugin),
        node3=node("node3", plugin=None),
    )
    (finding,) = judge(nodes)
    assert finding.status == "fail"
    assert finding.hosts == ("node3",)
    assert (
        "node3: none found" in finding.summary and f"node[1-2]: libnccl-net.so ({plugin})" in finding.summary
    )


def test_a_setting_nccl_never_reads_is_named() -> None:
    facts = node("node1").raw
    facts["nccl"]["conf_files"][1].update(present=True, settings={}, unread=["NCCL_DEBUG "])
    (finding,) = judge({"node1": NodeFacts(facts)})
    assert finding.status == "warn"
    assert finding.summary.startswith("/etc/nccl.conf on node1 sets 'NCCL_DEBUG '")


def test_ignored_variables_are_not_compared() -> None:
    nodes = cluster(
        node1=node("node1", {"NCCL_DEBUG": "INFO"}), node2=node("node2", {}), node3=node("node3", {})
    )
    assert judge(nodes)[0].status == "warn"
    assert judge(nodes, ignore=("NCCL_DEBUG*",))[0].status == "pass"
