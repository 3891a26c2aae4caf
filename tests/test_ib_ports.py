"""InfiniBand/RoCE ports judged against like ports, on real nodes (tests/data/hardware/ib): an H100
node's /sys/class/infiniband tree (eight ConnectX-7 on InfiniBand at 400 Gb/s and a BlueField-3
bond on Ethernet at 200 Gb/s) read by the probe's own reader, and ``ibstat`` outputs of H100 nodes
with front-end ConnectX-6 Dx ports beside their compute HCAs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from checks.hardware import judge_hardware
from checks.hardware.ib_ports import judge_ib_ports
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.node import net

IB = Path(__file__).parent / "data" / "hardware" / "ib"
TREE = IB / "sys-class-infiniband-h100"
# An H100 node on RoCE: eight ConnectX-7 on Ethernet, two down (one Disabled, one Polling), and
# four ConnectX-6 Dx ports at 100 Gb/s.
RAILS_DOWN = IB / "ibstat.47.0.h100.some.down.with.polling.1.txt"
# An H100 node on InfiniBand: eight ConnectX-7 up, and a ConnectX-6 Dx front end with one port
# up and three not cabled.
FRONT_END_UNUSED = IB / "ibstat.47.0.h100.some.down.0.txt"


def from_ibstat(text: str) -> list[dict[str, Any]]:
    """``ibstat`` output as the probe's ``ib_devices`` records: ``CA type`` is the device's
    ``hca_type``, ``Rate: 400`` the rate in Gb/s (ibstat names no width)."""
    ports: list[dict[str, Any]] = []
    card: dict[str, Any] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if line.startswith("CA '"):
            card = {"name": line.split("'")[1]}
        elif key == "CA type":
            card["hca_type"] = value
        elif key == "Firmware version":
            card["fw_ver"] = value
        elif key.startswith("Port ") and not value:
            ports.append({**card, "port": int(key.split()[1]), "counters": {}})
        elif key == "State":
            ports[-1]["state"] = {"Active": "ACTIVE", "Initializing": "INIT"}.get(value, value.upper())
        elif key == "Physical state":
            ports[-1]["phys_state"] = value
        elif key == "Rate":
            ports[-1]["rate"] = value
        elif key == "Link layer":
            ports[-1]["link_layer"] = value
    return ports


def node(devices: list[dict[str, Any]]) -> NodeFacts:
    return NodeFacts({"net": {"interfaces": [], "ib_devices": devices}})


def tree_node(tmp_path: Path, name: str, port_changes: dict[str, dict[str, str]] | None = None) -> NodeFacts:
    """The recorded tree, with some port files of some devices replaced, read by the probe."""
    root = tmp_path / name
    shutil.copytree(TREE, root)
    for device, files in (port_changes or {}).items():
        for file, text in files.items():
            (root / device / "ports" / "1" / file).write_text(text + "\n", encoding="utf-8")
    return node(net.ib_devices(str(root)))


def found(results: list[Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.status, r.details["item"], r.hosts) for r in results]


def test_the_recorded_tree_is_read_with_each_ports_card_and_width() -> None:
    ports = {(p["name"], p["port"]): p for p in net.ib_devices(str(TREE))}
    assert len(ports) == 9
    bond = ports[("mlx5_bond_0", 1)]
    assert (bond["link_layer"], bond["hca_type"], bond["board_id"], bond["fw_ver"]) == (
        "Ethernet", "MT41692", "MT_0000000884", "32.38.3056",
    )  # fmt: skip
    assert (bond["state"], bond["rate"], bond["width"]) == ("ACTIVE", "200 Gb/sec (2X NDR)", "2X")
    hca = ports[("mlx5_0", 1)]
    assert (hca["link_layer"], hca["hca_type"], hca["width"]) == ("InfiniBand", "MT4129", "4X")
    view = node(list(ports.values())).ib_ports
    assert {(p.device, p.rate_gbps, p.lanes) for p in view if p.device in ("mlx5_0", "mlx5_bond_0")} == {
        ("mlx5_0", 400.0, 4),
        ("mlx5_bond_0", 200.0, 2),
    }


def test_healthy_h100_nodes_with_a_front_end_bond_pass(tmp_path: Path) -> None:
    """The bond runs at half the compute HCAs' rate on every node: nothing to say, alone or not."""
    nodes = {f"gpu{i}": tree_node(tmp_path, f"gpu{i}") for i in range(1, 4)}
    assert judge_ib_ports(nodes) == []
    assert judge_ib_ports({"gpu1": nodes["gpu1"]}) == []
    items = {r.details.get("item") for r in judge_hardware(nodes, Config())}
    assert not items & {"ib_port_down", "ib_rate", "ib_port_unused"}


def test_a_compute_port_down_or_at_half_width_is_named_with_its_node(tmp_path: Path) -> None:
    down = {"mlx5_4": {"state": "1: DOWN", "phys_state": "2: Polling", "rate": "10 Gb/sec (4X SDR)"}}
    nodes = {
        "gpu1": tree_node(tmp_path, "gpu1"),
        "gpu2": tree_node(tmp_path, "gpu2", down),
        "gpu3": tree_node(tmp_path, "gpu3", {"mlx5_7": {"rate": "200 Gb/sec (2X NDR)"}}),
        "gpu4": tree_node(tmp_path, "gpu4"),
    }
    results = judge_ib_ports(nodes)
    assert found(results) == [("fail", "ib_port_down", ("gpu2",)), ("fail", "ib_rate", ("gpu3",))]
    assert results[0].summary == "gpu2: mlx5_4 port 1 is DOWN (physical state Polling), ACTIVE on gpu[1,3-4]"
    assert results[0].details["ports"] == ["mlx5_4 port 1"]
    assert (
        results[1].summary == "gpu3: mlx5_7 port 1 at 200 Gb/sec (2X NDR), 400 Gb/sec (4X NDR) on gpu[1-2,4]"
    )
    # Two nodes: the one with the port up is the reference.
    assert found(judge_ib_ports({"gpu1": nodes["gpu1"], "gpu2": nodes["gpu2"]})) == [
        ("fail", "ib_port_down", ("gpu2",))
    ]


def test_a_node_alone_names_its_compute_ports_down_and_not_its_slower_front_end() -> None:
    results = judge_ib_ports({"gpu1": node(from_ibstat(RAILS_DOWN.read_text()))})
    assert found(results) == [("fail", "ib_port_down", ("gpu1",))]
    assert results[0].details["ports"] == ["mlx5_11 port 1", "mlx5_5 port 1"]
    assert results[0].summary == (
        "gpu1: mlx5_11 port 1 is DOWN (physical state Polling), ACTIVE on this node's other 6 Ethernet, "
        "MT4129 ports; mlx5_5 port 1 is DOWN (physical state Disabled), ACTIVE on this node's other 6 "
        "Ethernet, MT4129 ports"
    )


def test_a_front_end_with_ports_not_cabled_passes_alone_and_is_a_note_across_nodes() -> None:
    healthy = node(from_ibstat(FRONT_END_UNUSED.read_text()))
    assert judge_ib_ports({"gpu1": healthy}) == []
    (note,) = judge_ib_ports({"gpu1": healthy, "gpu2": healthy})
    assert note.is_note and note.hosts == ()
    assert [(p["port"], p["kind"], p["nodes"]) for p in note.details["ports"]] == [
        (f"{device} port 1", "Ethernet, MT4125", ["gpu1", "gpu2"])
        for device in ("mlx5_2", "mlx5_7", "mlx5_8")
    ]
    # A note passes: the hardware check still says what it saw, and fails nothing.
    results = judge_hardware({"gpu1": healthy, "gpu2": healthy}, Config())
    assert [(r.status, r.is_note) for r in results] == [("pass", False), ("pass", True)]
    assert "18 of 24 InfiniBand/RoCE ports ACTIVE" in results[0].summary


def test_the_same_port_on_another_kind_of_card_is_not_compared() -> None:
    """The same ConnectX-7 devices on Ethernet on one node and on InfiniBand on the other (their
    ConnectX-6 Dx front ends left out): each node is judged within itself."""
    rails = [p for p in from_ibstat(RAILS_DOWN.read_text()) if p["hca_type"] == "MT4129"]
    compute = [p for p in from_ibstat(FRONT_END_UNUSED.read_text()) if p["hca_type"] == "MT4129"]
    results = judge_ib_ports({"gpu1": node(rails), "gpu2": node(compute)})
    assert found(results) == [("fail", "ib_port_down", ("gpu1",))]
    assert "ACTIVE on this node's other 6 Ethernet, MT4129 ports" in results[0].summary


# A port cabled but not active: its physical link is up, its state is not ACTIVE.
VF_DOWN_LINK_UP = IB / "ibstat.vf.down.linkup.network-operator.249.txt"
# ``rdma link`` read three times on one VM: DOWN/POLLING, DOWN/LINK_UP, ACTIVE/LINK_UP.
RDMA_LINK_READS = IB / "rdma_link.down.linkup.rccl.1423.txt"
CABLED_NOT_ACTIVE = "cabled but not ACTIVE"


def from_rdma_link(line: str) -> dict[str, Any]:
    """One ``rdma link`` line as the probe's record: ``mlx5_7/1 ... state DOWN physical_state
    LINK_UP`` is port 1 of mlx5_7, DOWN, LinkUp (the names sysfs and ``ibstat`` give)."""
    words = line.split()
    device, _, port = words[1].partition("/")
    fields = dict(zip(words[2::2], words[3::2], strict=True))
    phys = {"LINK_UP": "LinkUp", "POLLING": "Polling", "DISABLED": "Disabled"}[fields["physical_state"]]
    return {"name": device, "port": int(port), "state": fields["state"], "phys_state": phys, "counters": {}}


def test_a_spare_virtual_function_down_on_its_up_link_is_a_note_unless_its_like_ports_run() -> None:
    """An SR-IOV function (a ConnectX-6 VF, CA type MT4124) whose port is DOWN on its physical
    function's up link: a host's spare VF is unused, not a fault; the same function ACTIVE on
    another node names it."""
    vf = node(from_ibstat(VF_DOWN_LINK_UP.read_text()))
    (note,) = judge_ib_ports({"pod1": vf})
    assert note.is_note and note.details["item"] == "ib_port_unused"
    (note,) = judge_ib_ports({"pod1": vf, "pod2": vf})
    assert note.is_note and note.details["item"] == "ib_port_unused"
    active = node([{**d, "state": "ACTIVE"} for d in from_ibstat(VF_DOWN_LINK_UP.read_text())])
    assert found(judge_ib_ports({"pod1": vf, "pod2": active})) == [("fail", "ib_port_down", ("pod1",))]
    # Read on the node as a physical function (no physfn link), the same port fails alone.
    physical = node([{**d, "virtual": False} for d in from_ibstat(VF_DOWN_LINK_UP.read_text())])
    (fault,) = judge_ib_ports({"node1": physical})
    assert (
        fault.summary
        == f"node1: mlx5_7 port 1 is DOWN with its physical link up (LinkUp): {CABLED_NOT_ACTIVE}"
    )


def test_each_read_of_a_flapping_port_is_judged_by_its_state() -> None:
    polling, cabled, active = (
        node([from_rdma_link(line)]) for line in RDMA_LINK_READS.read_text().splitlines()
    )
    # Down and Polling, alone: not cabled, taken as unused (a note).
    (note,) = judge_ib_ports({"vm": polling})
    assert note.is_note and note.details["item"] == "ib_port_unused"
    assert found(judge_ib_ports({"vm": cabled})) == [("fail", "ib_port_down", ("vm",))]
    assert judge_ib_ports({"vm": active}) == []
    # Against the same port ACTIVE on another node, it is named with that node as before.
    (fault,) = judge_ib_ports({"vm1": cabled, "vm2": active})
    assert fault.summary == "vm1: mlx5_7 port 1 is DOWN (physical state LinkUp), ACTIVE on vm2"


def test_ports_waiting_for_a_subnet_manager_fail_where_they_outnumber_their_active_like_ports(
    tmp_path: Path,
) -> None:
    """The sysfs form the kernel writes for a port INIT with its link up, on three of four nodes:
    up on one node only, the port used to be taken as one the site does not use."""
    init = {"mlx5_4": {"state": "2: INIT", "phys_state": "5: LinkUp"}}
    nodes = {f"gpu{i}": tree_node(tmp_path, f"gpu{i}", init if i > 1 else None) for i in range(1, 5)}
    results = judge_ib_ports(nodes)
    assert found(results) == [("fail", "ib_port_down", (f"gpu{i}",)) for i in range(2, 5)]
    assert (
        results[0].summary
        == f"gpu2: mlx5_4 port 1 is INIT with its physical link up (LinkUp): {CABLED_NOT_ACTIVE}"
    )
    # INIT on every node: no node to compare with, and still a fault of each.
    everywhere = {f"gpu{i}": tree_node(tmp_path, f"all{i}", init) for i in range(1, 3)}
    assert found(judge_ib_ports(everywhere)) == [
        ("fail", "ib_port_down", ("gpu1",)),
        ("fail", "ib_port_down", ("gpu2",)),
    ]


def test_a_port_down_and_polling_on_every_node_stays_a_note(tmp_path: Path) -> None:
    down = {"mlx5_4": {"state": "1: DOWN", "phys_state": "2: Polling"}}
    nodes = {f"gpu{i}": tree_node(tmp_path, f"gpu{i}", down) for i in range(1, 4)}
    (note,) = judge_ib_ports(nodes)
    assert note.is_note
    assert [p["port"] for p in note.details["ports"]] == ["mlx5_4 port 1"]
