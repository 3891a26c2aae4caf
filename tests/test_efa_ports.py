"""AWS EFA devices, judged as the other RDMA ports (NVSentinel's EFA state check): an EFA port is
read from /sys/class/infiniband like an HCA's, judged against the same port on the other nodes,
and its all-zero node GUID identifies no part in the history. The device's files are those of the
real capture tests/data/hardware/efa/rdma_core_pr884.txt (SOURCES.md there): its sysfs link layer,
and the state, firmware and GUID ibv_devinfo showed, written as the kernel writes them."""

from __future__ import annotations

import re
from pathlib import Path

from checks.hardware import judge_hardware
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.history.record import parts_of
from preflight.model import HostReport
from preflight.node import net

CAPTURE = (Path(__file__).parent / "data" / "hardware" / "efa" / "rdma_core_pr884.txt").read_text()


def _captured(label: str) -> str:
    found = re.search(rf"^\s*{label}:\s+(.+)$", CAPTURE, re.M)
    assert found, label
    return found.group(1).strip()


def _efa_tree(root: Path, state: str | None = None) -> Path:
    """efa_0 as the capture shows it: link layer from sysfs, the rest from ibv_devinfo."""
    port = root / "efa_0" / "ports" / "1"
    port.mkdir(parents=True)
    number = re.search(r"\((\d+)\)", _captured("state"))
    assert number
    (port / "state").write_text((state or f"{number.group(1)}: ACTIVE") + "\n")
    link_layer = CAPTURE.split("link_layer \n", 1)[1].splitlines()[0]
    (port / "link_layer").write_text(link_layer + "\n")
    (root / "efa_0" / "node_guid").write_text(_captured("node_guid") + "\n")
    (root / "efa_0" / "fw_ver").write_text(_captured("fw_ver") + "\n")
    return root


def _node(tmp_path: Path, name: str, state: str | None = None) -> NodeFacts:
    devices = net.ib_devices(str(_efa_tree(tmp_path / name, state)))
    return NodeFacts({"hostname": name, "net": {"interfaces": [], "ib_devices": devices}})


def test_efa_ports_alike_pass_and_one_down_is_named(tmp_path: Path) -> None:
    nodes = {f"p5-{i}": _node(tmp_path, f"p5-{i}") for i in range(1, 4)}
    [port] = nodes["p5-1"].ib_ports
    assert (port.device, port.state, port.link_layer) == ("efa_0", "ACTIVE", "Unknown")
    assert [r.status for r in judge_hardware(nodes, Config())] == ["pass"]
    nodes["p5-4"] = _node(tmp_path, "p5-4", state="1: DOWN")
    failed = [r for r in judge_hardware(nodes, Config()) if r.status == "fail"]
    assert [(r.details.get("item"), r.hosts) for r in failed] == [("ib_port_down", ("p5-4",))]


def test_an_all_zero_guid_is_no_identity_two_nodes_efa_ports_are_two_parts(tmp_path: Path) -> None:
    parts = []
    for name in ("p5-1", "p5-2"):
        host = HostReport(
            name=name, address=name, hostname=name, reachable=True, facts=_node(tmp_path, name).raw
        )
        parts += [p.part for p in parts_of(host) if p.kind == "hca"]
    assert parts == ["p5-1:efa_0/1", "p5-2:efa_0/1"]
