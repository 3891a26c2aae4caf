"""Slow traffic between two sets of nodes is one finding about the sets (and the switch, given a
Slurm topology file), judged on a recorded job widened to four nodes; the topology file's parsing."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from checks.allreduce import judge_allreduce
from preflight.config import Config
from preflight.errors import InputError
from preflight.topology import load_topology, parse_topology
from tests.test_allreduce import HEALTHY, failing, with_document, with_pairs
from tests.test_culprits import cut_off

TOPOLOGY = Path(__file__).parent / "data" / "topology" / "two_leaves.conf"


def widened(n_nodes: int) -> Any:
    """The recorded three-node job with more nodes like the third."""
    third = HEALTHY.nodes[-1]
    more = tuple(dataclasses.replace(third, host=f"node{i + 1}", node_rank=i) for i in range(3, n_nodes))
    job = dataclasses.replace(HEALTHY, nodes=(*HEALTHY.nodes, *more))

    def change(document: dict[str, Any]) -> None:
        document["nodes"] = [f"node{i + 1}" for i in range(n_nodes)]

    return with_document(job, change)


def four_nodes() -> Any:
    return widened(4)


CUT = {(0, 2): 0.01, (0, 3): 0.012, (1, 2): 0.011, (1, 3): 0.01}


def test_every_pair_slow_between_two_sets_is_one_finding_about_the_sets() -> None:
    (result,) = failing(judge_allreduce(with_pairs(four_nodes(), CUT), Config(), {}))
    assert result.summary.startswith(
        "traffic between node[1-2] and node[3-4] runs at 0.011x the typical pair "
        "(0.0105 vs 1 GB/s busbw over 4 pairs, confirmed by a re-test)"
    )
    assert result.summary.endswith(
        "inside each group it is normal (1 GB/s): a switch uplink or route between them"
    )
    assert result.hosts == ("node1", "node2", "node3", "node4")
    assert result.details["groups"] == [["node1", "node2"], ["node3", "node4"]]


def test_a_group_cut_off_from_every_other_node_is_named_alone() -> None:
    # node3 and node4 slow with each of the six others, fast with each other: their uplink.
    (result,) = failing(judge_allreduce(with_pairs(widened(8), cut_off({2, 3}, 8, 0.01)), Config(), {}))
    assert result.summary.startswith(
        "traffic between node[3-4] and the other 6 nodes runs at 0.01x the typical pair "
        "(0.01 vs 1 GB/s busbw over 12 pairs, confirmed by a re-test)"
    )
    assert result.hosts == ("node3", "node4")
    assert result.details["cut_off"] is True


def test_a_topology_file_names_the_switch() -> None:
    config = dataclasses.replace(Config(), switch_of=load_topology(TOPOLOGY))
    (result,) = failing(judge_allreduce(with_pairs(four_nodes(), CUT), config, {}))
    assert result.summary.endswith("the uplink of switch leaf1 or the route from it")
    assert result.details["switches"] == [["leaf1"], ["leaf2"]]


def test_the_topology_maps_each_node_to_its_leaf_switch() -> None:
    assert load_topology(TOPOLOGY) == {"node1": "leaf1", "node2": "leaf1", "node3": "leaf2", "node4": "leaf2"}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n[1-2]\n", "topo.conf:2: n1 is under both a and b"),
        ("SwitchName=a Nodes=n1\nNodes=n2\n", "topo.conf:2: a line without SwitchName="),
        ("SwitchName=a Speed=1\n", "topo.conf:1: unknown field Speed= (known: SwitchName, Nodes, Switches)"),
        ("SwitchName=a Nodes=n1 junk\n", "topo.conf:1: cannot read 'junk': expected Key=Value fields"),
        ("SwitchName=a\nSwitchName=a\n", "topo.conf:2: switch a is defined twice"),
    ],
)
def test_a_bad_topology_line_is_named(text: str, error: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_topology(text, "topo.conf")
    assert str(raised.value) == error


def test_a_missing_topology_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such topology file"):
        load_topology(tmp_path / "nope.conf")
