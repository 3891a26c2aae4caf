"""``--local`` against the node's last full run, on SQLite and on PostgreSQL, and the parts' stable
identities in the probe.

The node is the recorded H100 node's facts (tests/data/runs/h100_node.json) with serials given to
its GPUs, and the InfiniBand ports of a recorded H100 node's ``/sys/class/infiniband`` tree
(tests/data/hardware/ib/sys-class-infiniband-h100), read by the probe itself. That tree has no
``node_guid`` files: the tests write them, in the kernel's form (``946d:ae03:00cd:e72c``), from the
``Node GUID`` lines of a recorded ``ibstat`` of an H100 node (tests/data/hardware/ib/
ibstat.47.0.h100.some.down.0.txt). The faults (a GPU swapped or gone, a driver upgraded, a port
gone or at a lower rate) are built on copies of the healthy node.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from preflight.history.local import (
    GPU_MISSING,
    GPU_SWAPPED,
    HCA_MISSING,
    HCA_RATE_CHANGED,
    PARTS_ADDED,
    VERSIONS_CHANGED,
)
from preflight.history.record import RunInfo, parts_of
from preflight.history.session import HistoryRequest, remember
from preflight.history.settings import HistorySection
from preflight.history.store import open_store
from preflight.model import HostReport, RunReport
from preflight.node import net
from tests.test_history import NOW, _facts, _report

# The stores on both backends: test_history's fixtures (a SQLite file, a PostgreSQL database).
pytest_plugins = ["tests.test_history"]

IB = Path(__file__).parent / "data" / "hardware" / "ib"
TREE = IB / "sys-class-infiniband-h100"
IBSTAT = IB / "ibstat.47.0.h100.some.down.0.txt"
FULL = RunInfo(inventory="hosts.txt", profile="standard", local=False)
LOCAL = RunInfo(inventory="(local)", profile="standard", local=True)
SERIALS = ["1654922006513", "1654922006514", "1654922006515", "1654922006516"]


def _guids() -> list[str]:
    """The recorded ibstat's node GUIDs, in the form sysfs writes them."""
    found = re.findall(r"Node GUID: 0x([0-9a-f]{16})", IBSTAT.read_text())
    return [":".join(g[i : i + 4] for i in range(0, 16, 4)) for g in found]


def _ib_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "infiniband"
    shutil.copytree(TREE, tree)
    for device, guid in zip(sorted(os.listdir(tree)), _guids(), strict=False):
        (tree / device / "node_guid").write_text(guid + "\n")
    return tree


def _node(tree: Path, serials: list[str] = SERIALS) -> HostReport:
    facts = {**_facts(serials), "hostname": "node1"}
    facts["net"] = {"interfaces": [], "ib_devices": net.ib_devices(str(tree))}
    return HostReport(name="node1", address="node1", hostname="node1", reachable=True, facts=facts)


def _remember(target: str, report: RunReport, info: RunInfo) -> RunReport:
    return remember(report, HistoryRequest(HistorySection(store=target), info))


def _history(report: RunReport) -> dict[str, Any]:
    return {str(r.details.get("item")): r for r in report.results if r.check == "history"}


def test_the_probe_reads_each_hca_node_guid_and_each_nic_mac(tmp_path: Path) -> None:
    tree = _ib_tree(tmp_path)
    ports = net.ib_devices(str(tree))
    assert ports[0]["name"] == "mlx5_0" and ports[0]["node_guid"] == "946d:ae03:00cd:e72c"
    host = _node(tree)
    hcas = [p for p in parts_of(host) if p.kind == "hca"]
    assert hcas[0].part == "946d:ae03:00cd:e72c/1" and hcas[0].slot == "mlx5_0/1"
    assert hcas[0].rate == "400 Gb/sec (4X NDR)"
    assert len({p.part for p in hcas}) == len(hcas) == 9
    # A NIC is known by its MAC (eth0's is the recorded tests/data/facts/ip_addr_show.json's); an
    # interface with no PCI device (a bridge, veth) is no part.
    sysfs = tmp_path / "net"
    for name, mac, pci in (("eth0", "02:FC:00:00:00:01\n", True), ("docker0", "02:42:ac:11:00:02\n", False)):
        (sysfs / name).mkdir(parents=True)
        (sysfs / name / "address").write_text(mac)
        if pci:
            (sysfs / name / "device").mkdir()
            (sysfs / name / "device" / "current_link_speed").write_text("16.0 GT/s PCIe\n")
    interfaces = net._sysfs_interfaces(str(sysfs))
    assert [(i["name"], i["mac"]) for i in interfaces] == [
        ("docker0", "02:42:ac:11:00:02"),
        ("eth0", "02:fc:00:00:00:01"),
    ]
    for interface in interfaces:
        interface["pcie"] = net.pcie_link(str(sysfs / interface["name"] / "device"))
    host = _node(tree)
    host.facts["net"]["interfaces"] = interfaces
    assert [(p.part, p.slot) for p in parts_of(host) if p.kind == "nic"] == [("02:fc:00:00:00:01", "eth0")]


def test_a_node_as_its_last_full_run_left_it_says_nothing(target: str, tmp_path: Path) -> None:
    tree = _ib_tree(tmp_path)
    _remember(target, _report(NOW - timedelta(days=1), [_node(tree)], []), FULL)
    out = _remember(target, _report(NOW, [_node(tree)], []), LOCAL)
    assert _history(out) == {}
    store = open_store(target)
    try:
        assert store.query("SELECT local FROM runs ORDER BY started_at") == [(0,), (1,)]
    finally:
        store.close()


def test_a_swapped_and_a_missing_gpu_are_named_with_their_slots(target: str, tmp_path: Path) -> None:
    tree = _ib_tree(tmp_path)
    _remember(target, _report(NOW - timedelta(days=1), [_node(tree)], []), FULL)
    host = _node(tree, ["1654922006513", "1654922009999", "1654922006515"])
    host.facts["gpus"] = host.facts["gpus"][:3]
    out = _remember(target, _report(NOW, [host], []), LOCAL)
    found = _history(out)
    assert set(found) == {GPU_SWAPPED, GPU_MISSING}
    swapped = found[GPU_SWAPPED]
    assert swapped.status == "warn" and swapped.hosts == ("node1",)
    assert swapped.summary.startswith(
        "node1: GPU 1 is 1654922009999, was 1654922006514 since its last full run"
    )
    assert found[GPU_MISSING].details["gpus"] == [{"slot": "3", "part": "1654922006516"}]
    assert out.verdict == "pass"  # what changed is said; the verdict stays the checks'


def test_versions_and_hca_ports_changed_since_the_last_full_run(target: str, tmp_path: Path) -> None:
    tree = _ib_tree(tmp_path)
    _remember(target, _report(NOW - timedelta(days=2), [_node(tree)], []), FULL)
    # A later local run is no full run: the comparison stays with the full run.
    _remember(target, _report(NOW - timedelta(days=1), [_node(tree)], []), LOCAL)
    shutil.rmtree(tree / "mlx5_9")
    (tree / "mlx5_4" / "ports" / "1" / "rate").write_text("200 Gb/sec (2X NDR)\n")
    host = _node(tree)
    host.facts["driver"] = {"version": "560.35.03"}
    host.facts["torch"] = {**host.facts["torch"], "nccl": "2.23.4"}
    out = _remember(target, _report(NOW, [host], []), LOCAL)
    found = _history(out)
    assert set(found) == {VERSIONS_CHANGED, HCA_MISSING, HCA_RATE_CHANGED}
    assert found[VERSIONS_CHANGED].details["changed"] == {
        "driver": {"was": "550.54.15", "now": "560.35.03"},
        "nccl": {"was": "2.21.5", "now": "2.23.4"},
    }
    assert "driver 550.54.15 -> 560.35.03, nccl 2.21.5 -> 2.23.4" in found[VERSIONS_CHANGED].summary
    assert [p["slot"] for p in found[HCA_MISSING].details["hca_ports"]] == ["mlx5_9/1"]
    assert found[HCA_RATE_CHANGED].summary == (
        "node1: HCA port mlx5_4/1 at 200 Gb/sec (2X NDR), was 400 Gb/sec (4X NDR) since its last full run"
        f" ({(NOW - timedelta(days=2)).strftime('%Y-%m-%dT%H:%M:%SZ')})"
    )


def test_a_new_gpu_in_an_empty_slot_is_a_note(target: str, tmp_path: Path) -> None:
    tree = _ib_tree(tmp_path)
    first = _node(tree)
    first.facts["gpus"] = first.facts["gpus"][:3]
    _remember(target, _report(NOW - timedelta(days=1), [first], []), FULL)
    out = _remember(target, _report(NOW, [_node(tree)], []), LOCAL)
    found = _history(out)
    assert set(found) == {PARTS_ADDED} and found[PARTS_ADDED].is_note


def test_a_node_never_fully_checked_is_compared_with_nothing(target: str, tmp_path: Path) -> None:
    tree = _ib_tree(tmp_path)
    _remember(target, _report(NOW - timedelta(days=1), [_node(tree, SERIALS[::-1])], []), LOCAL)
    out = _remember(target, _report(NOW, [_node(tree)], []), LOCAL)
    assert _history(out) == {}


def test_preflight_check_local_names_what_changed_since_the_full_run(tmp_path: Path) -> None:
    """The prolog end to end on this machine: a run written, made the full run with an older
    Python in it; the next ``--local`` names the Python that changed."""
    store = tmp_path / "history.sqlite"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    command = [sys.executable, "-m", "preflight", "check", "--local", "-q", "--history", str(store)]
    subprocess.run([*command, "--json", str(tmp_path / "first.json")], env=env, check=False, timeout=120)
    first = json.loads((tmp_path / "first.json").read_text())
    python = first["hosts"][0]["facts"]["python"]["version"]
    connection = open_store(str(store))
    try:
        with connection.transaction():
            connection.execute("UPDATE runs SET local = 0")
            connection.execute("UPDATE nodes SET stack_versions = ?", (json.dumps({"python": "3.8.0"}),))
    finally:
        connection.close()
    subprocess.run([*command, "--json", str(tmp_path / "second.json")], env=env, check=False, timeout=120)
    second = json.loads((tmp_path / "second.json").read_text())
    changed = [r for r in second["results"] if r["details"].get("item") == VERSIONS_CHANGED]
    assert len(changed) == 1 and f"python 3.8.0 -> {python}" in changed[0]["summary"]
    assert second["verdict"] == first["verdict"]


def test_ports_recorded_before_their_guids_were_read_are_the_same_ports(target: str, tmp_path: Path) -> None:
    """A full run whose probe read no node_guid kept its ports by device and port: a later
    prolog that reads the GUIDs pairs them by device and port, and finds nothing gone or new."""
    _remember(target, _report(NOW - timedelta(days=1), [_node(TREE)], []), FULL)
    tree = _ib_tree(tmp_path)
    assert _history(_remember(target, _report(NOW, [_node(tree)], []), LOCAL)) == {}
    (tree / "mlx5_4" / "ports" / "1" / "rate").write_text("200 Gb/sec (2X NDR)\n")
    found = _history(_remember(target, _report(NOW + timedelta(hours=1), [_node(tree)], []), LOCAL))
    assert set(found) == {HCA_RATE_CHANGED}
    assert found[HCA_RATE_CHANGED].details["hca_ports"][0]["part"] == "946d:ae03:00cd:e884/1"
