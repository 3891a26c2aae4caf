"""The names judge: every node resolves the master's, its own and its peers' names to the address
the controller reaches that node at; a node whose own name is on loopback is named."""

from __future__ import annotations

import json
from pathlib import Path

from checks.names import Answer, NamedNode, NamesObservation, judge_names, names_to_ask, node_names
from checks.names.judge import verdict
from preflight.check import HostSession
from preflight.inventory import HostSpec
from preflight.model import HostReport

DATA = Path(__file__).parent / "data" / "names"
ADDRESS = {f"node{i}": f"10.0.0.{10 + i}" for i in range(1, 5)}


def named(nodes: int = 4) -> dict[str, NamedNode]:
    return {
        f"node{i}": NamedNode(f"node{i}", ADDRESS[f"node{i}"], (ADDRESS[f"node{i}"],))
        for i in range(1, nodes + 1)
    }


def healthy(nodes: int = 4) -> dict[str, dict[str, Answer]]:
    return {
        f"node{r}": {f"node{i}": Answer((ADDRESS[f"node{i}"],)) for i in range(1, nodes + 1)}
        for r in range(1, nodes + 1)
    }


def recorded(name: str) -> dict[str, Answer]:
    document = json.loads((DATA / name).read_text())
    return {
        n: Answer(tuple(a.get("addresses") or ()), a.get("error")) for n, a in document["answers"].items()
    }


def test_nodes_that_agree_with_the_controller_pass() -> None:
    (result,) = judge_names(NamesObservation(named(), healthy(), master="node1"))
    assert result.status == "pass"
    assert "all 4 nodes resolve" in result.summary
    assert result.details["nodes"]["node3"]["own"] == "node3 -> 10.0.0.13"
    assert result.details["nodes"]["node3"]["master"] == "node1 -> 10.0.0.11"


def test_a_node_whose_own_name_is_on_loopback_is_named_once() -> None:
    answers = healthy()
    answers["node2"]["node2"] = Answer(("127.0.1.1", "10.0.0.12"))
    (result,) = judge_names(NamesObservation(named(), answers, master="node1"))
    assert result.status == "fail"
    assert result.hosts == ("node2",)
    assert result.details["item"] == "own_loopback"
    assert result.summary.startswith(
        "node2: the node's own name resolves to a loopback address (node2 -> 127.0.1.1)"
    )


def test_the_recorded_sandbox_resolves_its_own_name_to_loopback() -> None:
    """A real capture: alone it is fine (the ranks meet on that machine); as one of two nodes
    its peers would be sent 127.0.0.1."""
    own = recorded("gvisor_vm_own_name_loopback.json")
    names = {"vm": NamedNode("vm", "10.0.0.11", ("10.0.0.11",))}
    (alone,) = judge_names(NamesObservation(names, {"vm": own}, master="vm"))
    assert alone.status == "pass"
    names["peer"] = NamedNode("peer", "10.0.0.12", ("10.0.0.12",))
    answers = {"vm": {**own, "peer": Answer(("10.0.0.12",))}, "peer": {"vm": Answer(("10.0.0.11",))}}
    (pair,) = judge_names(NamesObservation(names, answers, master="vm"))
    assert (pair.status, pair.hosts, pair.details["item"]) == ("fail", ("vm",), "own_loopback")
    assert verdict("vm", names["vm"], own["no-such-host.invalid"]) == (
        "unresolvable",
        "Name or service not known",
    )


def test_one_node_with_a_stale_hosts_entry_for_the_master_is_that_nodes_fault() -> None:
    answers = healthy()
    answers["node3"]["node1"] = Answer(("10.0.0.99",))
    (result,) = judge_names(NamesObservation(named(), answers, master="node1"))
    assert result.status == "fail"
    assert result.hosts == ("node3",)
    assert (
        "node1 (the master) resolves to 10.0.0.99, an address it does not have, not 10.0.0.11"
        in result.summary
    )


def test_a_name_wrong_everywhere_is_the_names_own_record() -> None:
    answers = healthy()
    for resolver in answers:
        answers[resolver]["node4"] = Answer(error="Name or service not known")
    (result,) = judge_names(NamesObservation(named(), answers, master="node1"))
    assert result.status == "fail"
    assert result.hosts == ("node4",)
    assert result.summary == "node4: node4 does not resolve (Name or service not known) on node[1-4]"


def test_another_interface_of_the_node_warns() -> None:
    names = named()
    names["node2"] = NamedNode("node2", "10.0.0.12", ("10.0.0.12", "192.168.0.12"))
    answers = healthy()
    answers["node4"]["node2"] = Answer(("192.168.0.12",))
    (result,) = judge_names(NamesObservation(names, answers, master="node1"))
    assert (result.status, result.hosts, result.details["item"]) == ("warn", ("node4",), "other_interface")


def test_without_an_expected_address_the_nodes_own_addresses_decide() -> None:
    names = named()
    names["node2"] = NamedNode("node2", None, ("10.0.0.12",))
    answers = healthy()
    answers["node3"]["node2"] = Answer(("10.0.0.50",))
    (result,) = judge_names(NamesObservation(names, answers, master="node1"))
    assert (result.status, result.hosts) == ("fail", ("node3",))


def test_each_node_asks_the_masters_names_its_own_and_its_next_peers() -> None:
    sessions = [
        HostSession(
            HostSpec(f"alias{i}", f"gpu{i}"), HostReport(f"alias{i}", f"gpu{i}", hostname=f"gpu{i}.lan")
        )
        for i in range(1, 5)
    ]
    sessions.append(
        HostSession(HostSpec("10.0.0.5", "10.0.0.5"), HostReport("10.0.0.5", "10.0.0.5", hostname="gpu5"))
    )
    # An ssh_config alias is the controller's own name for a host: no node is asked it.
    assert node_names(sessions[0]) == ["gpu1", "gpu1.lan"]
    assert node_names(sessions[4]) == ["gpu5"]
    asked = names_to_ask(sessions, "alias1", max_peers=2)
    assert asked["alias1"] == ["gpu1", "gpu1.lan", "gpu2", "gpu2.lan", "gpu3", "gpu3.lan"]
    assert asked["10.0.0.5"] == ["gpu1", "gpu1.lan", "gpu5", "gpu2", "gpu2.lan"]


def test_a_node_whose_resolver_fails_is_one_finding_however_many_names() -> None:
    answers = healthy()
    answers["node3"] = {n: Answer(error="Temporary failure in name resolution") for n in answers["node3"]}
    (result,) = judge_names(NamesObservation(named(), answers, master="node1"))
    assert (result.status, result.hosts) == ("fail", ("node3",))
    assert result.summary.endswith("; and 1 more there, unlike on the other nodes")
    assert len(result.details["names"]) == 4
