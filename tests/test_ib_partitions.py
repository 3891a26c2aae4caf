"""InfiniBand P_Key tables and RoCE GID tables: the probe's reader on trees written in the kernel's
formats, and the judge on nodes whose trees differ in one table.

The files are as drivers/infiniband/core/sysfs.c writes them: ``show_port_pkey`` prints each entry of
``ports/N/pkeys/`` as ``0x%04x`` (an empty entry ``0x0000``); ``show_port_gid`` each entry of
``ports/N/gids/`` as ``%pI6`` (eight groups of four hex digits, an empty entry all zeros); and
``show_port_gid_attr_gid_type`` each GID's type in ``ports/N/gid_attrs/types/`` as
``ib_cache_gid_type_str`` names it (drivers/infiniband/core/cache.c, ``gid_type_str``: ``IB/RoCE v1``
or ``RoCE v2``), refusing the type of an empty entry (EINVAL). The layouts are the ones ``show_gids``
prints on ConnectX RoCE nodes in public reports (NVIDIA/nccl issues #769 and #1131: the link-local
GIDs at 0 and 1, the IPv4 address's at 2 and 3; k8snetworkplumbingwg/multus-cni issue #1100: two pods
whose IPv4 RoCE v2 GIDs sit at 5 and at 7); the trees are built, not recorded.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from checks.hardware import judge_hardware
from checks.hardware.ib_partitions import judge_ib_partitions, roce_v2_gid
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.node import net
from tests.lab.gpu import IB_PORT_DOWN, GpuNode, write_infiniband

TREE = Path(__file__).parent / "data" / "hardware" / "ib" / "sys-class-infiniband-h100"
EMPTY_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
V1, V2 = "IB/RoCE v1", "RoCE v2"
FRONT_END = "mlx5_bond_0"  # the lab's RoCE port (tests/lab/gpu.py)
PARTITION = {f"mlx5_{i}": {"pkeys/1": "0x8001"} for i in range(4)}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")


def link_local(node: int) -> str:
    return f"fe80:0000:0000:0000:0a5e:45ff:fe2a:{node:04x}"


def ipv4(node: int) -> str:
    """The GID of 10.0.0.<node>, an IPv4-mapped address."""
    return f"0000:0000:0000:0000:0000:ffff:0a00:{node:04x}"


def ipv6(node: int) -> str:
    return f"fd93:16d3:59b6:010d:0a5e:45ff:fe2a:{node:04x}"


def gid_files(entries: Sequence[tuple[str, str] | None], size: int = 16) -> dict[str, str]:
    """A port's GID table as files: ``(gid, type)`` at each index, None an empty entry, up to
    ``size`` entries; empty entries have no type file here (the kernel refuses to read one)."""
    files: dict[str, str] = {}
    for index in range(size):
        entry = entries[index] if index < len(entries) else None
        files[f"gids/{index}"] = entry[0] if entry else EMPTY_GID
        if entry:
            files[f"gid_attrs/types/{index}"] = entry[1]
    return files


def usual_gids(node: int) -> list[tuple[str, str] | None]:
    """The usual layout: the link-local address's GIDs at 0 and 1, the IPv4 address's at 2 and 3."""
    return [(link_local(node), V1), (link_local(node), V2), (ipv4(node), V1), (ipv4(node), V2)]


def node(
    tmp_path: Path,
    name: str,
    changes: Mapping[str, Mapping[str, str]] | None = None,
    gids: Sequence[tuple[str, str] | None] | None = None,
) -> NodeFacts:
    """A lab node's tree (four HCAs in the job's partition 0x8001 beside the default one, and a
    RoCE front end with ``gids``, the usual layout by default) read back by the probe's reader."""
    number = int(name.removeprefix("node"))
    front = gid_files(usual_gids(number) if gids is None else gids)
    ib_changes: dict[str, dict[str, str]] = {h: dict(f) for h, f in PARTITION.items()}
    ib_changes[FRONT_END] = front
    for hca, files in (changes or {}).items():
        ib_changes.setdefault(hca, {}).update(files)
    root = tmp_path / name
    write_infiniband(root, GpuNode(ib_changes=ib_changes))
    return NodeFacts({"hostname": name, "net": {"interfaces": [], "ib_devices": net.ib_devices(str(root))}})


def cluster(tmp_path: Path, odd: Mapping[str, NodeFacts] | None = None, n: int = 4) -> dict[str, NodeFacts]:
    nodes = {f"node{i}": node(tmp_path, f"node{i}") for i in range(1, n + 1)}
    return {**nodes, **(odd or {})}


def found(nodes: Mapping[str, NodeFacts]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.status, str(r.details["item"]), r.hosts) for r in judge_ib_partitions(nodes)]


# The probe's reader.


def test_a_full_pkey_table_reads_as_its_distinct_keys(tmp_path: Path) -> None:
    port = tmp_path / "mlx5_0" / "ports" / "1"
    _write(port / "link_layer", "InfiniBand")
    # 128 entries, as a ConnectX port on InfiniBand has: the default partition at 0, the job's at 1,
    # a limited member's key at 5, the same key twice, the rest empty.
    keys = {0: "0xffff", 1: "0x8001", 5: "0x7fff", 9: "0x8001"}
    for index in range(128):
        _write(port / "pkeys" / str(index), keys.get(index, "0x0000"))
    # An InfiniBand port's GID 0 is its port GUID: not read.
    _write(port / "gids" / "0", "fe80:0000:0000:0000:946d:ae03:00cd:e72c")
    (record,) = net.ib_devices(str(tmp_path))
    assert record["pkeys"] == ["0x7fff", "0x8001", "0xffff"]
    assert "gids" not in record
    view = NodeFacts({"net": {"ib_devices": [record]}}).ib_ports[0]
    assert (view.pkeys, view.gids) == (("0x7fff", "0x8001", "0xffff"), None)


def test_a_table_is_read_up_to_a_run_of_empty_entries(tmp_path: Path) -> None:
    """What is in use sits at the front: reading stops after net.EMPTY_RUN empty entries in a row
    (on mlx5 each P_Key read is a firmware query), so a key far past a run of empties is not seen."""
    port = tmp_path / "mlx5_0" / "ports" / "1"
    keys = {0: "0xffff", 1: "0x8001", 1 + net.EMPTY_RUN["pkeys"] + 1: "0x8002"}
    for index in range(128):
        _write(port / "pkeys" / str(index), keys.get(index, "0x0000"))
    (record,) = net.ib_devices(str(tmp_path))
    assert record["pkeys"] == ["0x8001", "0xffff"]


def test_a_default_table_and_an_empty_one(tmp_path: Path) -> None:
    for device, keys in (("mlx5_0", ["0xffff"] + ["0x0000"] * 127), ("mlx5_1", ["0x0000"] * 128)):
        for index, key in enumerate(keys):
            _write(tmp_path / device / "ports" / "1" / "pkeys" / str(index), key)
    assert [r["pkeys"] for r in net.ib_devices(str(tmp_path))] == [["0xffff"], []]


def test_a_table_that_cannot_be_listed_is_left_out_and_reads_as_none(tmp_path: Path) -> None:
    # The recorded tree has no pkeys directory (its source kept only the files the probe read then).
    recorded = net.ib_devices(str(TREE))
    assert len(recorded) == 9 and not any("pkeys" in r or "gids" in r for r in recorded)
    assert {p.pkeys for p in NodeFacts({"net": {"ib_devices": recorded}}).ib_ports} == {None}
    # A pkeys that is no directory cannot be listed either.
    root = tmp_path / "tree"
    shutil.copytree(TREE, root)
    _write(root / "mlx5_0" / "ports" / "1" / "pkeys", "0xffff")
    assert "pkeys" not in net.ib_devices(str(root))[0]


def test_roce_gids_are_read_with_their_types_and_empty_entries_left_out(tmp_path: Path) -> None:
    port = tmp_path / "mlx5_bond_0" / "ports" / "1"
    _write(port / "link_layer", "Ethernet")
    _write(port / "pkeys" / "0", "0xffff")
    files = gid_files([*usual_gids(11), None, (ipv6(11), V1), (ipv6(11), V2)], size=256)
    for name, text in files.items():
        _write(port / name, text)
    # Empty entries whose type read fails (the kernel answers EINVAL; a directory fails to read
    # too), and an entry emptied between the two reads: its GID still read, its type refused.
    (port / "gid_attrs" / "types" / "4").mkdir()
    _write(port / "gids" / "8", ipv4(12))
    (port / "gid_attrs" / "types" / "8").mkdir()
    (record,) = net.ib_devices(str(tmp_path))
    assert record["pkeys"] == ["0xffff"]
    assert record["gids"] == [
        [0, V1, link_local(11)], [1, V2, link_local(11)], [2, V1, ipv4(11)], [3, V2, ipv4(11)],
        [5, V1, ipv6(11)], [6, V2, ipv6(11)],
    ]  # fmt: skip
    view = NodeFacts({"net": {"ib_devices": [record]}}).ib_ports[0]
    assert view.gids is not None and view.gids[3] == (3, V2, ipv4(11))
    assert roce_v2_gid(view) == (3, "IPv4")


def test_a_roce_port_without_gid_types_reads_no_gids(tmp_path: Path) -> None:
    port = tmp_path / "mlx5_0" / "ports" / "1"
    _write(port / "link_layer", "Ethernet")
    _write(port / "gids" / "0", link_local(1))
    assert "gids" not in net.ib_devices(str(tmp_path))[0]


# The judge: P_Keys.


def test_four_alike_nodes_say_nothing(tmp_path: Path) -> None:
    nodes = cluster(tmp_path)
    assert found(nodes) == []
    (result,) = judge_hardware(nodes, Config())
    assert result.status == "pass"
    ports = nodes["node1"].ib_ports
    assert [p.pkeys for p in ports[:4]] == [("0x8001", "0xffff")] * 4 and ports[4].pkeys == ("0xffff",)


def test_a_node_missing_the_partition_key_is_named(tmp_path: Path) -> None:
    nodes = cluster(tmp_path, {"node3": node(tmp_path, "node3", {"mlx5_2": {"pkeys/1": "0x0000"}})})
    (result,) = judge_ib_partitions(nodes)
    assert (result.status, result.details["item"], result.hosts) == ("warn", "ib_pkeys", ("node3",))
    assert result.summary == (
        "node3: mlx5_2 port 1 P_Keys 0xffff where its like ports on node[1-2,4] have 0x8001, 0xffff"
    )
    assert result.details["ports"] == [
        {
            "port": "mlx5_2 port 1",
            "pkeys": ["0xffff"],
            "peers_pkeys": ["0x8001", "0xffff"],
            "peers": ["node1", "node2", "node4"],
        }
    ]
    assert [(r.status, r.details["item"]) for r in judge_hardware(nodes, Config())] == [("warn", "ib_pkeys")]


def test_ports_of_one_node_that_differ_alike_are_one_finding(tmp_path: Path) -> None:
    limited = {f"mlx5_{i}": {"pkeys/0": "0x7fff"} for i in range(4)}
    nodes = cluster(tmp_path, {"node2": node(tmp_path, "node2", limited)})
    (result,) = judge_ib_partitions(nodes)
    assert result.hosts == ("node2",)
    assert result.summary == (
        "node2: mlx5_0 port 1, mlx5_1 port 1, mlx5_2 port 1, mlx5_3 port 1 P_Keys 0x7fff, 0x8001 "
        "where their like ports on node[1,3-4] have 0x8001, 0xffff"
    )


def test_two_nodes_that_differ_are_both_named_as_no_majority_decides(tmp_path: Path) -> None:
    nodes = {
        "node1": node(tmp_path, "node1"),
        "node2": node(tmp_path, "node2", {"mlx5_0": {"pkeys/1": "0x8002"}}),
    }
    results = judge_ib_partitions(nodes)
    assert [(r.status, r.hosts) for r in results] == [("warn", ("node1",)), ("warn", ("node2",))]
    assert results[0].summary == (
        "node1: mlx5_0 port 1 P_Keys 0x8001, 0xffff where its like ports on node2 have 0x8002, 0xffff "
        "(no majority decides)"
    )
    assert results[1].details["ports"][0]["peers_pkeys"] is None


def test_a_port_down_or_unread_is_not_compared(tmp_path: Path) -> None:
    down = {"mlx5_1": {**IB_PORT_DOWN, "pkeys/1": "0x0000"}}
    unread = node(tmp_path, "node4", {"mlx5_2": {"pkeys/1": "0x0000"}})
    records = [{k: v for k, v in r.items() if k != "pkeys"} for r in unread.raw["net"]["ib_devices"]]
    nodes = cluster(
        tmp_path,
        {
            "node3": node(tmp_path, "node3", down),
            "node4": NodeFacts({"net": {"interfaces": [], "ib_devices": records}}),
        },
    )
    assert found(nodes) == []
    # The port down is ib_ports' finding, and only that.
    assert [(r.details["item"], r.hosts) for r in judge_hardware(nodes, Config())] == [
        ("ib_port_down", ("node3",))
    ]


# The judge: RoCE GIDs.


def test_an_ipv4_roce_v2_gid_at_another_index_is_named(tmp_path: Path) -> None:
    # node2's interface got its IPv6 address before its IPv4 one: the IPv4 GIDs moved to 4 and 5.
    moved = [*usual_gids(2)[:2], (ipv6(2), V1), (ipv6(2), V2), (ipv4(2), V1), (ipv4(2), V2)]
    nodes = cluster(tmp_path, {"node2": node(tmp_path, "node2", gids=moved)})
    (result,) = judge_ib_partitions(nodes)
    assert (result.status, result.details["item"], result.hosts) == ("warn", "roce_gid_index", ("node2",))
    assert result.summary == (
        "node2: mlx5_bond_0 port 1 RoCE v2 GID at index 5 (IPv4) where its like ports on node[1,3-4] "
        "have it at 3 (IPv4); one NCCL_IB_GID_INDEX for the whole job names another GID on this node"
    )
    assert result.details["ports"] == [
        {
            "port": "mlx5_bond_0 port 1",
            "index": 5,
            "address": "IPv4",
            "peers_index": 3,
            "peers_address": "IPv4",
            "peers": ["node1", "node3", "node4"],
        }
    ]


def test_pods_whose_roce_v2_gid_sits_at_3_where_the_others_have_it_at_1(tmp_path: Path) -> None:
    # Interfaces with no link-local GID (a macvlan in a pod, as in multus-cni #1100): the IPv4
    # address's GIDs alone, at 0 and 1, and on node4 two indices further on.
    nodes = {f"node{i}": node(tmp_path, f"node{i}", gids=[(ipv4(i), V1), (ipv4(i), V2)]) for i in range(1, 4)}
    nodes["node4"] = node(tmp_path, "node4", gids=[None, None, (ipv4(4), V1), (ipv4(4), V2)])
    (result,) = judge_ib_partitions(nodes)
    assert (result.status, result.hosts) == ("warn", ("node4",))
    shown = "RoCE v2 GID at index 3 (IPv4) where its like ports on node[1-3] have it at 1 (IPv4)"
    assert shown in result.summary


def test_an_interface_without_its_ipv4_address_is_named(tmp_path: Path) -> None:
    nodes = cluster(tmp_path, {"node4": node(tmp_path, "node4", gids=usual_gids(4)[:2])})
    (result,) = judge_ib_partitions(nodes)
    assert (result.status, result.hosts) == ("warn", ("node4",))
    shown = "RoCE v2 GID at index 1 (link-local IPv6) where its like ports on node[1-3] have it at 3 (IPv4)"
    assert shown in result.summary


def test_an_extra_ipv6_address_at_a_higher_index_says_nothing(tmp_path: Path) -> None:
    extra = [*usual_gids(3), (ipv6(3), V1), (ipv6(3), V2)]
    nodes = cluster(tmp_path, {"node3": node(tmp_path, "node3", gids=extra)})
    assert found(nodes) == []


def test_infiniband_ports_gids_are_not_compared(tmp_path: Path) -> None:
    nodes = cluster(tmp_path)
    records = [dict(r) for r in nodes["node2"].raw["net"]["ib_devices"]]
    records[0]["gids"] = [[0, V1, "fe80:0000:0000:0000:946d:ae03:00cd:e72c"]]
    nodes["node2"] = NodeFacts({"net": {"interfaces": [], "ib_devices": records}})
    assert found(nodes) == []


def test_an_active_roce_port_without_a_roce_v2_gid_fails(tmp_path: Path) -> None:
    v1_only = [(link_local(4), V1), None, (ipv4(4), V1)]
    nodes = cluster(tmp_path, {"node4": node(tmp_path, "node4", gids=v1_only)})
    (result,) = judge_ib_partitions(nodes)
    assert (result.status, result.details["item"], result.hosts) == ("fail", "roce_v2_missing", ("node4",))
    assert result.summary == (
        "node4: mlx5_bond_0 port 1 ACTIVE on RoCE with GIDs of type IB/RoCE v1 only, none of RoCE v2: "
        "NCCL over RoCE needs a RoCE v2 GID in practice (RoCE v1 is not routed)"
    )


def test_an_empty_gid_table_is_not_judged(tmp_path: Path) -> None:
    # The inactive slave of a bond: ACTIVE, and no GID at all.
    root = tmp_path / "slave"
    write_infiniband(root, GpuNode(ib_changes={**PARTITION, FRONT_END: gid_files([])}))
    (root / FRONT_END / "ports" / "1" / "gid_attrs" / "types").mkdir(parents=True)
    slave = NodeFacts({"net": {"interfaces": [], "ib_devices": net.ib_devices(str(root))}})
    assert slave.ib_ports[4].gids == ()
    assert found(cluster(tmp_path, {"node1": slave})) == []
