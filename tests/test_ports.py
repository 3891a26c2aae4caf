"""The ports judge on observations recorded from the lab cluster (real listeners, real iptables)."""

from __future__ import annotations

import ipaddress
import itertools
import json
from pathlib import Path

import pytest

from checks.ports import PRESENTATION, PortsObservation, judge_neighbour_limits, judge_ports
from checks.ports.blocked import ProbedPort
from checks.ports.judge import GC_THRESH3
from preflight.facts import NodeFacts

DATA = Path(__file__).parent / "data" / "ports"


def load(name: str) -> PortsObservation:
    data = json.loads((DATA / f"{name}.json").read_text())
    return PortsObservation(**{**data, "extra_ports": tuple(data["extra_ports"])})


def test_open_ports_everywhere_pass_with_the_matrix() -> None:
    (result,) = judge_ports(load("healthy"))
    assert result.status == "pass"
    assert result.summary == "port 29500 and an ephemeral port open between all 3 nodes (12 probes)"
    matrix = result.details["matrix"]
    assert set(matrix) == {"node1", "node2", "node3"}
    assert matrix["node2"]["node1"] == {"rendezvous": "open", "ephemeral": "open"}


def test_a_dropped_master_port_is_named_with_its_sources_and_blocks_the_job() -> None:
    findings = judge_ports(load("master_rendezvous_dropped"))
    (blocked,) = [f for f in findings if f.status == "fail"]
    assert blocked.hosts == ("node1",)
    assert blocked.summary.startswith("node1:29500 (the master's rendezvous port) is dropped")
    assert blocked.summary.endswith("from every other node")
    assert blocked.details["item"] == "probe"
    assert blocked.details["sources"] == ["node2", "node3"]
    assert blocked.details["reached"] == []
    assert blocked.details["blocks_job"] is True


def test_the_master_port_dropped_between_two_nodes_is_on_the_master_saying_either_end_may_block() -> None:
    # One node probed it and no other could: its port and the other's way out look alike.
    (finding,) = judge_ports(load("two_nodes_master_rendezvous_dropped"))
    assert (finding.status, finding.hosts, finding.details["item"]) == ("fail", ("node1",), "probe")
    assert finding.summary.startswith("node1:29500 (the master's rendezvous port) is dropped")
    assert finding.summary.endswith(
        "from node2, the only node that probed it: the block may be on either end"
    )


@pytest.mark.parametrize(
    "recording",
    [
        "master_rendezvous_dropped_from_node3",  # node1's INPUT drops node3's address
        "node3_output_to_master_rendezvous_dropped",  # node3's OUTPUT drops node1:29500
    ],
)
def test_the_master_port_dropped_from_one_node_only_is_named_on_that_node(recording: str) -> None:
    (finding,) = judge_ports(load(recording))
    assert finding.status == "fail"
    assert finding.hosts == ("node3",)
    assert finding.summary == (
        "node3 cannot reach the master's rendezvous port node1:29500 (dropped); node2 reaches it: "
        "look at node3's outbound firewall or route to node1"
    )
    assert finding.details["item"] == "cannot_reach"
    assert finding.details["sources"] == ["node3"]
    assert finding.details["unreached"] == [
        {
            "to": "node1",
            "port": 29500,
            "kind": "rendezvous",
            "failed": {"node3": "dropped"},
            "reached": ["node2"],
        }
    ]
    assert finding.details["blocks_job"] is True
    assert [p["from"] for p in finding.details["blocked"]] == ["node3"]


def test_one_rejecting_pair_on_a_worker_is_a_warning_on_the_node_that_cannot_reach_it() -> None:
    # node3 refuses node2 only; node1 reaches node3's port: node2's connections are the odd ones.
    (finding,) = judge_ports(load("rendezvous_rejected_one_pair"))
    assert finding.status == "warn"
    assert finding.hosts == ("node2",)
    assert finding.summary.startswith("node2 cannot reach node3:29500 (refused); node1 reaches it")
    assert finding.details["blocks_job"] is False


def test_every_port_one_node_cannot_reach_is_one_finding_on_that_node() -> None:
    # node3's OUTPUT drops every connection it opens to node1 and node2; they reach each other.
    (finding,) = judge_ports(load("node3_output_dropped"))
    assert finding.status == "fail"
    assert finding.hosts == ("node3",)
    assert finding.summary == (
        "node3 cannot reach the master's rendezvous port node1:29500, node2:29500 and the ephemeral "
        "ports of node[1-2] (dropped); the other nodes reach them: look at node3's outbound firewall "
        "or route to node[1-2]"
    )
    unreached = finding.details["unreached"]
    assert [(u["to"], u["kind"]) for u in unreached] == [
        ("node1", "rendezvous"),
        ("node1", "ephemeral"),
        ("node2", "rendezvous"),
        ("node2", "ephemeral"),
    ]
    assert [u["reached"] for u in unreached] == [["node2"], ["node2"], ["node1"], ["node1"]]
    assert "outbound firewall (iptables -S OUTPUT)" in PRESENTATION.advice(finding)


def test_two_nodes_that_cannot_reach_each_other_among_four_are_one_finding_on_both() -> None:
    # node2 drops everything from node3, the answers to its own connections too.
    (finding,) = judge_ports(load("four_nodes_link_dropped"))
    assert finding.status == "fail"  # the ephemeral ports: the job's own connections
    assert finding.hosts == ("node2", "node3")
    assert finding.summary.startswith("node2 and node3 cannot reach each other: node3:29500 and node3's")
    assert finding.summary.endswith("the other nodes reach them: look at the firewall or route between them")
    assert {u["to"]: sorted(u["failed"]) for u in finding.details["unreached"]} == {
        "node2": ["node3"],
        "node3": ["node2"],
    }
    assert all(u["reached"] == ["node1", "node4"] for u in finding.details["unreached"])


def test_among_sixteen_one_failing_source_is_named_and_a_port_most_cannot_reach_is_on_its_node() -> None:
    # node9 drops node5 alone; node1 drops its port 29500 from all but node15 and node16.
    on_master, on_node5 = judge_ports(load("sixteen_nodes_dropped_from_one_and_from_most"))
    assert (on_master.status, on_master.hosts, on_master.details["item"]) == ("fail", ("node1",), "probe")
    assert on_master.summary.startswith("node1:29500 (the master's rendezvous port) is dropped")
    assert on_master.summary.endswith("from node[2-14]; node[15-16] reach it")
    assert on_master.details["reached"] == ["node15", "node16"]
    assert (on_node5.status, on_node5.hosts, on_node5.details["item"]) == ("warn", ("node5",), "cannot_reach")
    assert on_node5.summary == (
        "node5 cannot reach node9:29500 (dropped); node[1-4,6-8,10-16] reach it: "
        "look at node5's outbound firewall or route to node9"
    )


def with_status(
    obs: PortsObservation, status: str, sources: set[str], to: str, kind: str
) -> PortsObservation:
    """The observation with the probes of ``sources`` to ``to``'s ``kind`` port set to ``status``."""
    probes = [
        {**p, "status": status} if p["from"] in sources and p["to"] == to and p["kind"] == kind else p
        for p in obs.probes
    ]
    return PortsObservation(**{**obs.__dict__, "probes": probes})


def test_a_few_sources_failing_alike_are_one_finding_and_more_failing_than_reaching_name_the_port() -> None:
    sixteen = load("sixteen_nodes_dropped_from_one_and_from_most")
    two = with_status(sixteen, "dropped", {"node5", "node7"}, "node9", "rendezvous")
    (finding,) = [f for f in judge_ports(two) if f.details["item"] == "cannot_reach"]
    assert finding.hosts == ("node5", "node7")
    assert finding.summary.startswith(
        "node[5,7] cannot reach node9:29500 (dropped); node[1-4,6,8,10-16] reach it"
    )
    # Eight of the fifteen others fail node9's port (node5 as recorded, seven refused) and seven
    # reach it: more failing than reaching, so the port is named on node9.
    refusing = {"node2", "node3", "node4", "node6", "node7", "node8", "node10"}
    half = with_status(sixteen, "refused", refusing, "node9", "rendezvous")
    findings = [f for f in judge_ports(half) if f.details.get("to") == "node9"]
    assert [(f.hosts, f.details["item"], f.details["how"]) for f in findings] == [
        (("node9",), "probe", "dropped"),
        (("node9",), "probe", "refused"),
    ]
    assert findings[0].summary.endswith("from node5; node[1,11-16] reach it")
    assert findings[1].summary.endswith("from node[2-4,6-8,10]; node[1,11-16] reach it")


@pytest.mark.parametrize(
    ("failed", "reached", "on_sources"),
    [
        (1, 0, False),  # no other source to compare: on the port's node
        (1, 1, True),  # three nodes: one of the two sources fails
        (1, 14, True),
        (2, 2, False),  # as many fail as reach: the port's node is the one thing they share
        (2, 3, True),
        (8, 7, False),
        (15, 0, False),  # every source: the port is closed
    ],
)
def test_who_is_named_for_a_port_some_sources_failed(failed: int, reached: int, on_sources: bool) -> None:
    port = ProbedPort(
        "node1",
        29500,
        "rendezvous",
        {f"node{i}": "dropped" for i in range(2, 2 + failed)},
        tuple(f"node{i}" for i in range(2 + failed, 2 + failed + reached)),
    )
    assert port.sources_at_fault is on_sources


def test_the_master_port_already_in_use_fails_and_blocks_the_job() -> None:
    (finding,) = judge_ports(load("master_port_in_use"))
    assert finding.status == "fail"
    assert finding.hosts == ("node1",)
    assert finding.summary.startswith("the master's rendezvous port is already in use on node1")
    assert finding.details["blocks_job"] is True


@pytest.mark.parametrize(("key", "what"), [("dev", "interfaces"), ("mtu", "MTUs")])
def test_routes_to_the_master_that_differ_are_named(key: str, what: str) -> None:
    obs = load("healthy")
    nodes = {name: dict(node) for name, node in obs.nodes.items()}
    nodes["node4"] = dict(nodes["node2"])  # a third worker, so that there is a majority
    odd = {"dev": "ib0", "mtu": 9000}[key]
    nodes["node3"]["route"] = {**nodes["node3"]["route"], key: odd}
    findings = judge_ports(PortsObservation(**{**obs.__dict__, "nodes": nodes}))
    (finding,) = [f for f in findings if f.status == "warn"]
    assert finding.hosts == ("node3",)
    assert f"different {what}" in finding.summary
    assert f"node3: {odd}" in finding.summary


def test_an_odd_mtu_among_three_nodes_names_that_node_only_the_master_counting_too() -> None:
    obs = load("healthy")
    nodes = {name: dict(node) for name, node in obs.nodes.items()}
    # As the probe reports the master now: the interface holding its address, not loopback.
    nodes["node1"]["route"] = {**nodes["node1"]["route"], "dev": "eth0", "mtu": 1500}
    nodes["node3"]["route"] = {**nodes["node3"]["route"], "mtu": 9000}
    (finding,) = [
        f for f in judge_ports(PortsObservation(**{**obs.__dict__, "nodes": nodes})) if f.status == "warn"
    ]
    assert finding.hosts == ("node3",)
    assert "node[1-2]: 1500" in finding.summary and "node3: 9000" in finding.summary


def test_a_master_that_does_not_resolve_fails_on_the_nodes_that_tried() -> None:
    obs = load("healthy")
    nodes = {name: dict(node) for name, node in obs.nodes.items()}
    for name in ("node2", "node3"):
        nodes[name]["route"] = {
            "master": "gpu-master",
            "error": "cannot resolve gpu-master: Name or service not known",
        }
    findings = judge_ports(PortsObservation(**{**obs.__dict__, "nodes": nodes}))
    (finding,) = [f for f in findings if f.status == "fail"]
    assert finding.hosts == ("node2", "node3")
    assert finding.summary == "node[2-3]: cannot resolve gpu-master: Name or service not known"


# --------------------------------------------------------------------------- neighbour tables

NODE = json.loads((Path(__file__).parent / "data" / "runs" / "cpu_node.json").read_text())


def flat_cluster(subnets: dict[str, int], gc_thresh3: int = 1024) -> dict[str, NodeFacts]:
    """Nodes built from a recorded node's facts, numbered across the given /16 or /24 subnets."""
    facts: dict[str, NodeFacts] = {}
    for subnet, count in subnets.items():
        network = ipaddress.ip_network(subnet)
        for address in itertools.islice(network.hosts(), count):
            name = f"gpu{len(facts) + 1:04d}"
            interface = {"name": "eth0", "addresses": [f"{address}/{network.prefixlen}"]}
            sysctl = {GC_THRESH3: gc_thresh3}
            facts[name] = NodeFacts({**NODE, "net": {"interfaces": [interface]}, "sysctl": sysctl})
    return facts


def test_more_peers_on_one_subnet_than_the_arp_table_keeps_is_named() -> None:
    (finding,) = judge_neighbour_limits(flat_cluster({"10.10.0.0/16": 1100}))
    assert finding.status == "warn"
    assert len(finding.hosts) == 1100
    assert finding.summary.startswith("gpu[0001-1100]: 1,099 peers on the same subnet, more than")
    assert "gc_thresh3 = 1,024" in finding.summary


def test_a_cluster_within_the_limit_or_split_into_subnets_is_fine() -> None:
    assert judge_neighbour_limits(flat_cluster({"10.10.0.0/16": 1000})) == []
    assert (
        judge_neighbour_limits(flat_cluster({"10.10.1.0/24": 250, "10.10.2.0/24": 250}, gc_thresh3=300)) == []
    )
    assert judge_neighbour_limits(flat_cluster({"10.10.0.0/16": 1100}, gc_thresh3=4096)) == []
