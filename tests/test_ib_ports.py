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
