"""The ports judge on observations recorded from the lab cluster (real listeners, real iptables)."""

from __future__ import annotations

import ipaddress
import itertools
import json
from pathlib import Path

import pytest

from checks.ports import PortsObservation, judge_neighbour_limits, judge_ports
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
    assert blocked.details["sources"] == ["node2", "node3"]
    assert blocked.details["blocks_job"] is True


def test_one_rejecting_pair_on_a_worker_is_a_warning_naming_both_ends() -> None:
    (finding,) = judge_ports(load("rendezvous_rejected_one_pair"))
    assert finding.status == "warn"
    assert finding.hosts == ("node3",)
    assert "node3:29500 (the rendezvous port) is refused" in finding.summary
    assert finding.summary.endswith("from node2")
    assert finding.details["blocks_job"] is False


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
