"""``ports`` on the lab: what differs on one node's route is named on that node alone, and so is a
port that node alone cannot reach, whichever end drops it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.lab import LabCluster, MakeLab
from tests.test_check_lab import results, run_check

pytestmark = pytest.mark.lab


def test_one_node_with_another_mtu_is_named_alone_among_three(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(3)
    lab.exec(3, ["ip", "link", "set", "eth0", "mtu", "1400"])
    run, data = run_check(lab, tmp_path, "--only", "ports")
    assert run.returncode == 0, run.stdout + run.stderr  # a warning: the run still passes
    (finding,) = [r for r in results(data, "ports") if r["status"] == "warn"]
    assert finding["hosts"] == [lab.node(3).address]
    assert "different MTUs" in finding["summary"] and f"{lab.node(3).address}: 1400" in finding["summary"]


def _drop_on_the_master_from_node3(lab: LabCluster) -> None:
    lab.block_port(1, 29500, action="drop", from_node=3)


def _drop_on_the_way_out_of_node3(lab: LabCluster) -> None:
    rule = ["OUTPUT", "-p", "tcp", "-d", lab.node(1).address, "--dport", "29500", "-j", "DROP"]
    lab.exec(3, ["iptables", "-w", "-A", *rule])


@pytest.mark.parametrize("drop", [_drop_on_the_master_from_node3, _drop_on_the_way_out_of_node3])
def test_the_rendezvous_port_dropped_from_one_node_only_is_named_on_that_node(
    make_lab: MakeLab, tmp_path: Path, drop: Callable[[LabCluster], None]
) -> None:
    lab = make_lab(3)
    drop(lab)
    run, data = run_check(lab, tmp_path, "--only", "ports")
    assert run.returncode == 1, run.stdout + run.stderr
    master, other, dropped = (lab.node(i).address for i in (1, 2, 3))
    (finding,) = [r for r in results(data, "ports") if r["status"] != "pass"]
    assert finding["status"] == "fail"
    assert finding["hosts"] == [dropped]
    assert finding["summary"].startswith(
        f"{dropped} cannot reach the master's rendezvous port {master}:29500 (dropped); {other} reaches it"
    )
    assert finding["details"]["unreached"] == [
        {
            "to": master,
            "port": 29500,
            "kind": "rendezvous",
            "failed": {dropped: "dropped"},
            "reached": [other],
        }
    ]
