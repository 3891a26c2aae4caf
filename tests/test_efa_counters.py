"""AWS EFA devices' own error counters (``hw_counters``, an EFA port has no InfiniBand ``counters``),
read by the node's probe from sysfs trees written from real listings and judged like the InfiniBand
counters: nodes against each other, a counter every node counts is no fault, traffic never judged.
The listings (tests/data/hardware/efa, SOURCES.md there): the AWS EC2 user guide's
``more .../ports/1/hw_counters/* | cat`` of ``rdmap0s31`` on a current driver, and perftest issue
#113's two nodes on a 2020 driver that listed its device counters under the port. No public listing
of a failing EFA device was found: a fault is a healthy listing with one counter raised, as each
test says."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from checks.hardware import judge_hardware
from checks.hardware.counters import ALONE_COUNTERS, growth_results
from checks.job.node.counters import sample
from checks.job.outcome import JobOutcome, NodeOutcome
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.node import net, sysfs_counters

EFA = Path(__file__).parent / "data" / "hardware" / "efa"
GUIDE = EFA / "hw_counters_aws_user_guide_rdmap0s31.txt"
PERFTEST = EFA / "hw_counters_perftest_113_efa_0.txt"


def guide_counters() -> dict[str, str]:
    """The user guide's listing: counter -> value, from each path line and the value after it."""
    lines = GUIDE.read_text().splitlines()
    found = {}
    for i, line in enumerate(lines):
        if line.startswith("/sys/class/infiniband/rdmap0s31/ports/1/hw_counters/"):
            value = next(v for v in lines[i + 1 :] if not v.startswith(":"))
            found[line.rsplit("/", 1)[1]] = value.strip()
    return found


def perftest_counters(side: str) -> dict[str, str]:
    """perftest #113's listing of one node (``client`` or ``server``): counter -> value."""
    section = PERFTEST.read_text().split(f"\n{side}\n", 1)[1].split("\n\n", 1)[0]
    return dict(re.findall(r"^(\w+) :(\d+)$", section, re.M))


def efa_tree(root: Path, device: str, port_files: dict[str, str], driver: str = "efa") -> Path:
    """An EFA device as sysfs shows it: an active port (rdma_core_pr884: link layer ``Unknown``),
    its ``hw_counters`` as listed, and the ``device/driver`` link to the driver."""
    port = root / device / "ports" / "1"
    (port / "hw_counters").mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "link_layer").write_text("Unknown\n")
    for name, value in port_files.items():
        (port / "hw_counters" / name).write_text(value + "\n")
    (root / "drivers" / driver).mkdir(parents=True, exist_ok=True)
    (root / device / "device").mkdir()
    os.symlink(root / "drivers" / driver, root / device / "device" / "driver")
    return root


def node_of(root: Path) -> NodeFacts:
    return NodeFacts({"gpus": [], "net": {"interfaces": [], "ib_devices": net.ib_devices(str(root))}})


def counter_findings(nodes: dict[str, NodeFacts]) -> list[CheckResult]:
    return [r for r in judge_hardware(nodes, Config()) if r.details.get("item") == "ib_counters"]


def guide_nodes(tmp_path: Path, raised: dict[str, dict[str, str]]) -> dict[str, NodeFacts]:
    """Three nodes of the user guide's listing, ``raised`` counters set on the nodes it names."""
    return {
        name: node_of(efa_tree(tmp_path / name, "rdmap0s31", {**guide_counters(), **raised.get(name, {})}))
        for name in ("p5-1", "p5-2", "p5-3")
    }


def test_a_healthy_listing_reads_the_error_counters_only_and_gives_no_finding(tmp_path: Path) -> None:
    nodes = guide_nodes(tmp_path, {})
    [port] = nodes["p5-1"].ib_ports
    assert dict(port.counters) == dict.fromkeys(sysfs_counters.EFA_PORT_COUNTERS, 0)
    assert counter_findings(nodes) == []
    assert [r.status for r in judge_hardware(nodes, Config())] == ["pass"]


def test_an_older_driver_lists_its_device_counters_under_the_port_and_both_nodes_pass(tmp_path: Path) -> None:
    """The client sent 2 bytes in 1 packet, 108 admin commands: traffic and command counts are not read."""
    nodes = {
        side: node_of(efa_tree(tmp_path / side, "efa_0", perftest_counters(side)))
        for side in ("client", "server")
    }
    [port] = nodes["client"].ib_ports
    assert dict(port.counters) == {
        "rx_drops": 0,
        "rdma_read_wr_err": 0,
        "cmds_err": 0,
        "no_completion_cmds": 0,
    }
    assert counter_findings(nodes) == []


def test_the_device_level_counters_of_a_current_driver_are_read_from_the_device(tmp_path: Path) -> None:
    root = efa_tree(tmp_path / "p5-1", "rdmap0s31", guide_counters())
    (root / "rdmap0s31" / "hw_counters").mkdir()
    (root / "rdmap0s31" / "hw_counters" / "no_completion_cmds").write_text("1\n")
    (root / "rdmap0s31" / "hw_counters" / "submitted_cmds").write_text("108\n")
    [port] = node_of(root).ib_ports
    assert port.counters["no_completion_cmds"] == 1
    assert "submitted_cmds" not in port.counters


def test_an_error_one_node_alone_counts_warns_naming_the_port_and_the_counter(tmp_path: Path) -> None:
    """The user guide's listing on three nodes, unresponsive_remote_events raised to 3 on p5-2."""
    nodes = guide_nodes(tmp_path, {"p5-2": {"unresponsive_remote_events": "3"}})
    (result,) = counter_findings(nodes)
    assert (result.status, result.hosts) == ("warn", ("p5-2",))
    assert result.details["counters"] == {"rdmap0s31 port 1": {"unresponsive_remote_events": 3}}
    assert result.details["alone"] == {"rdmap0s31 port 1": ["unresponsive_remote_events"]}
    assert "link_downed_alone" not in result.details
    assert result.summary == (
        "p5-2: rdmap0s31 port 1 unresponsive_remote_events 3 (since the counters were last cleared); "
        "unresponsive_remote_events on rdmap0s31 port 1 where the other nodes' same port counts none"
    )


def test_a_counter_every_node_counts_and_the_counters_never_judged_alone_are_notes(tmp_path: Path) -> None:
    """retrans_timeout_events on every node (a fabric that reroutes SRD traffic everywhere), and
    rx_drops, retrans_pkts and cmds_err on one node alone: notes."""
    every = {name: {"retrans_timeout_events": "1011"} for name in ("p5-1", "p5-2", "p5-3")}
    every["p5-3"] = {**every["p5-3"], "rx_drops": "7", "retrans_pkts": "17852", "cmds_err": "2"}
    results = counter_findings(guide_nodes(tmp_path, every))
    assert [(r.hosts, r.is_note) for r in results] == [
        (("p5-1",), True),
        (("p5-2",), True),
        (("p5-3",), True),
    ]
    assert results[2].details["counters"]["rdmap0s31 port 1"] == {
        "cmds_err": 2,
        "retrans_pkts": 17852,
        "retrans_timeout_events": 1011,
        "rx_drops": 7,
    }
    assert not {"rx_drops", "retrans_pkts", "cmds_err"} & set(ALONE_COUNTERS)


def test_hw_counters_of_a_device_of_another_driver_are_not_read(tmp_path: Path) -> None:
    """A ConnectX port keeps its InfiniBand counters; its hw_counters (mlx5's own names) are not read."""
    root = efa_tree(tmp_path / "gpu1", "mlx5_0", {"rx_drops": "5"}, driver="mlx5_core")
    (root / "mlx5_0" / "ports" / "1" / "counters").mkdir()
    (root / "mlx5_0" / "ports" / "1" / "counters" / "link_downed").write_text("0\n")
    [port] = node_of(root).ib_ports
    assert dict(port.counters) == {"link_downed": 0}


def test_the_job_samples_efa_error_counters_and_judges_their_growth(tmp_path: Path) -> None:
    """The job's host samples an EFA port's error counters before and after the ranks (the user
    guide's listing; the growth is built here: no public capture of two samples was found): a
    retransmission timeout during the job warns, SRD's own retransmits are a note."""
    listing = guide_counters()
    before = sample(str(efa_tree(tmp_path / "before", "rdmap0s31", listing)), str(tmp_path / "no-net"))
    assert before["ib"]["rdmap0s31/1"]["counters"] == dict.fromkeys(sysfs_counters.EFA_PORT_COUNTERS, 0)
    quiet = {**listing, "retrans_pkts": "1200"}
    after = sample(str(efa_tree(tmp_path / "quiet", "rdmap0s31", quiet)), str(tmp_path / "no-net"))
    after["t"] = before["t"] + 30
    (note,) = growth_results(outcome_of(before, after), "allreduce")
    assert note.status == "pass" and "retrans_pkts +1200" in note.summary
    faulty = {**quiet, "retrans_timeout_events": "3"}
    after = sample(str(efa_tree(tmp_path / "faulty", "rdmap0s31", faulty)), str(tmp_path / "no-net"))
    after["t"] = before["t"] + 30
    (warning,) = growth_results(outcome_of(before, after), "allreduce")
    assert warning.status == "warn"
    assert warning.summary.startswith("p5-2: rdmap0s31 port 1 retrans_timeout_events +3")


def outcome_of(before: dict[str, Any], after: dict[str, Any]) -> JobOutcome:
    node = NodeOutcome("p5-2", 1, 0, False, False, False, "", counters={"before": before, "after": after})
    return JobOutcome(("allreduce",), "nccl", "p5-1", 29500, (node,), 30.0)
