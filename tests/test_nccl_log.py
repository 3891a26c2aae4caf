"""The NCCL log parser on logs recorded from real machines (tests/data/nccl, sources in SOURCES.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checks.job.nccl_log import NetDevice, channel_transport, parse_nccl_log

NCCL = Path(__file__).parent / "data" / "nccl"

# file -> what the parser must find in it; keys are NcclTransport attributes.
EXPECTED: dict[str, dict[str, Any]] = {
    "ib_roce_2.19.3_two_nodes.log": {
        "version": "2.19.3+cuda12.3",
        "network": "IB",
        # "Using network IB" on two hosts, no connection line (the log was cut before them): the
        # network between the nodes is the one NCCL named.
        "inter_node": "NET/IB",
        "link_layers": ("RoCE",),
        "ib_devices": (NetDevice(0, "mlx5_10", 1, "RoCE"), NetDevice(1, "mlx5_11", 1, "RoCE")),
        "channels": {},
        "gdrdma": False,
        "uses_socket": False,
        "hosts": ("dgxh100-4", "dgxh100-3"),
    },
    "ib_gdrdma_h20_two_nodes.log": {
        "version": None,
        "network": None,
        "inter_node": "NET/IB",
        "channels": {"NET/IB": 9, "P2P/CUMEM": 5},
        "gdrdma": True,
        "uses_socket": False,
        "hosts": ("H20-GPU-05", "H20-GPU-06"),
    },
    "ib_mixed_link_layers_2.12.12_warn.log": {
        "version": "2.12.12+cuda11.7",
        "network": "IB",
        "link_layers": ("IB", "RoCE"),
        "ib_devices": (
            NetDevice(0, "mlx5_0", 1, "IB"),
            NetDevice(1, "mlx5_1", 1, "IB"),
            NetDevice(2, "mlx5_2", 1, "RoCE"),
        ),
        "warnings": ("nvmlDeviceGetHandleByPciBusId() failed: Not Found",),
        "warning_count": 2,
    },
    "socket_fallback_ib_cluster_ibext.log": {
        "network": None,
        "inter_node": "NET/Socket",
        "channels": {"NET/Socket": 6, "P2P/IPC": 17},
        "uses_socket": True,
        "gdrdma": False,
        "warning_count": 3,
        "hosts": ("<cluster_name>",),
    },
    "socket_two_nodes_mpirun_prefix.log": {
        "inter_node": "NET/Socket",
        "channels": {"NET/Socket": 9, "SHM": 2},
        "uses_socket": True,
        "hosts": ("node0", "node2"),
    },
    "socket_single_node_2.26.2.log": {
        "version": "2.26.2+cuda12.8",
        "network": "Socket",
        # One node: NCCL names the network it would use and never connects over it.
        "inter_node": None,
        "ib_no_device": True,
        "ib_devices": (),
        "socket_devices": (NetDevice(0, "eno1", address="10.0.0.171"),),
        "uses_socket": False,
    },
    "p2p_single_node_8gpu.log": {
        "network": None,
        "inter_node": None,
        "channels": {"P2P/IPC": 15},
        "uses_socket": False,
        "nccl_lines": 15,
    },
    "ib_2.5.6_rank_prefix_old_format.log": {
        "link_layers": ("IB", "RoCE"),
        "ib_devices": (
            NetDevice(0, "mlx5_1", 1, "IB"),
            NetDevice(1, "mlx5_3", 1, "IB"),
            NetDevice(2, "mlx5_0", 1, "IB"),
            NetDevice(3, "mlx5_2", 1, "RoCE"),
            NetDevice(4, "mlx5_4", 1, "IB"),
        ),
        "channels": {"P2P/IPC": 3},
        "hosts": ("crow-ib-new-nccl-256-info-19",),
    },
    "ibext_v8_without_gdr_hpcx.log": {
        "inter_node": "NET/IBext_v8",
        "channels": {"NET/IBext_v8": 12},
        "rdma_channels": {"NET/IBext_v8": 12},
        "gdrdma": False,
        "uses_socket": False,
        "hosts": ("hostname-test",),
    },
    "ib_gdrdma_shared_2.27_mpirun.log": {
        "inter_node": "NET/IB",
        "channels": {"NET/IB": 6, "P2P/CUMEM": 1},
        "gdrdma": True,
        "uses_socket": False,
    },
    "ibext_sharp_hpcx_network_lines.log": {
        "network": "IBext",
        # Two hosts, the HPC-X plug-in with SHARP loaded, no connection line: IBext between nodes.
        "inter_node": "NET/IBext",
        "ib_devices": (
            NetDevice(0, "mlx5_0", 1, "IB"),
            NetDevice(1, "mlx5_1", 1, "IB"),
            NetDevice(2, "mlx5_4", 1, "IB"),
            NetDevice(3, "mlx5_5", 1, "IB"),
        ),
        "uses_socket": False,
    },
    "ib_gdrdma_a100_old_channel_format.log": {
        "inter_node": "NET/IB",
        "channels": {"NET/IB": 12},
        "gdrdma": True,
    },
    # NCCL 2.3: one device a line with a space after the index, "Using internal Network IB".
    "ib_2.3.7_dgx1_device_lines.log": {
        "version": "2.3.7+cuda9.0",
        "network": "IB",
        "inter_node": None,
        "ib_devices": (
            NetDevice(0, "mlx5_1", 1, "IB"),
            NetDevice(1, "mlx5_3", 1, "IB"),
            NetDevice(2, "mlx5_0", 1, "IB"),
            NetDevice(3, "mlx5_2", 1, "IB"),
        ),
        "uses_socket": False,
    },
    # NCCL 2.4: ring connections "Ring 00 : 6 -> 2 [receive] via NET/IB/0", GPUDirect RDMA disabled.
    "ib_2.4.7_ring_no_gdr_two_nodes.log": {
        "inter_node": "NET/IB",
        "channels": {"NET/IB": 4, "P2P/IPC": 6},
        "rdma_channels": {"NET/IB": 4},
        "gdrdma": False,
        "uses_socket": False,
        "hosts": ("master_node", "secondary_node"),
    },
    # NCCL 2.4 lists its socket interface even where it goes on to use IB: no fall-back to read.
    "ib_2.4.7_startup_socket_bootstrap_lines.log": {
        "version": "2.4.7+cuda10.0",
        "inter_node": None,
        "ib_devices": (NetDevice(0, "mlx5_0", 1, "IB"),),
        "socket_devices": (NetDevice(0, "ib0", address="192.168.11.1"),),
        "uses_socket": False,
    },
    # NCCL 2.8-2.11 "Channel 01 : 12[8d000] -> 4[89000] [receive] via NET/IB/0/GDRDMA", two nodes.
    "ib_gdrdma_2.8_channel_collnet_warn.log": {
        "inter_node": "NET/IB",
        "channels": {"NET/IB": 3, "P2P/direct pointer": 6},
        "gdrdma": True,
        "warnings": ("CollNet is not supported or fails to initialize, ignoring NCCL_ALGO=COLLNET",),
        "hosts": ("nodea", "nodeb"),
    },
    # GPUDirect RDMA shown only on a CollNet connection (SHARP).
    "collnet_sharp_gdrdma_warn.log": {
        "inter_node": "COLLNET/SHARP",
        "channels": {"COLLNET/SHARP": 1},
        "rdma_channels": {"COLLNET/SHARP": 1},
        "gdrdma": True,
        "uses_socket": False,
        "warning_count": 1,
    },
    # Two ranks writing at once: a second prefix inside a line, a connection line without one.
    "p2p_2.3_interleaved_lines.log": {
        "inter_node": None,
        "channels": {"P2P/IPC": 17},
        "nccl_lines": 17,
        "hosts": ("learnfair062",),
    },
    # One node under mpirun over loopback: sockets named, no connection between nodes.
    "socket_2.5.6_single_node_lo_mpirun.log": {
        "version": "2.5.6+cuda10.2",
        "ib_no_device": True,
        "socket_devices": (NetDevice(0, "lo", address="127.0.0.1"),),
        "inter_node": None,
        "uses_socket": False,
    },
    # NCCL 2.4 "Ring 00 : 43 -> 44 [receive] via NET/Socket/0" across 15 nodes without IB.
    "socket_2.4_aws_ring_old_format.log": {
        "inter_node": "NET/Socket",
        "channels": {"NET/Socket": 15},
        "uses_socket": True,
    },
}


def test_every_recorded_log_has_expectations() -> None:
    assert {p.name for p in NCCL.glob("*.log")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_logs(name: str) -> None:
    transport = parse_nccl_log((NCCL / name).read_text(encoding="utf-8"))
    assert transport.nccl_lines > 0
    for attribute, expected in EXPECTED[name].items():
        assert getattr(transport, attribute) == expected, attribute


def test_a_log_without_nccl_lines_says_nothing() -> None:
    transport = parse_nccl_log("Setting OMP_NUM_THREADS ...\nTraceback (most recent call last):\n")
    assert transport.nccl_lines == 0 and transport.inter_node is None and not transport.uses_socket


def test_the_announced_network_alone_says_nothing_about_the_network_between_nodes() -> None:
    log = (
        "h:1:1 [0] NCCL INFO Using network Socket\n"
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
    )
    transport = parse_nccl_log(log)
    assert transport.network == "Socket" and transport.inter_node is None and not transport.uses_socket


def test_a_named_network_on_several_hosts_is_the_network_between_them() -> None:
    """The start-up lines of ranks on two hosts, cut before any connection line (NVIDIA/nccl-tests
    issue #185): the network NCCL named is the network between the nodes; the lines of one host
    alone say nothing of a network between nodes."""
    log = (NCCL / "ib_roce_2.19.3_two_nodes.log").read_text(encoding="utf-8")
    transport = parse_nccl_log(log)
    assert transport.hosts == ("dgxh100-4", "dgxh100-3")
    assert transport.inter_node == "NET/IB" and not transport.uses_socket
    one_host = "\n".join(line for line in log.splitlines() if "dgxh100-3" not in line)
    alone = parse_nccl_log(one_host)
    assert alone.network == "IB" and alone.inter_node is None
    # The same lines naming the socket network (built from the capture): a fall-back to read.
    socket = parse_nccl_log(log.replace("Using network IB", "Using network Socket"))
    assert socket.inter_node == "NET/Socket" and socket.uses_socket
    socket_alone = parse_nccl_log(one_host.replace("Using network IB", "Using network Socket"))
    assert socket_alone.inter_node is None and not socket_alone.uses_socket


def test_ibext_with_collnet_connections_stays_ibext() -> None:
    """The HPC-X plug-in's ``Using network IBext`` (NVIDIA/nccl issue #1357) before the CollNet
    connection over its SHARP plug-in (NVIDIA/nccl issue #1219): point-to-point traffic between the
    nodes runs over IBext, SHARP carries the collectives alone."""
    network = (NCCL / "ibext_sharp_hpcx_network_lines.log").read_text(encoding="utf-8").splitlines()[0]
    collnet = (NCCL / "collnet_sharp_gdrdma_warn.log").read_text(encoding="utf-8")
    transport = parse_nccl_log(network + "\n" + collnet)
    assert transport.channels == {"COLLNET/SHARP": 1}
    assert transport.inter_node == "NET/IBext" and transport.gdrdma and not transport.uses_socket
    assert transport.rdma_channels == {"COLLNET/SHARP": 1}
    # Without the network line, the CollNet plug-in is all the log shows.
    assert parse_nccl_log(collnet).inter_node == "COLLNET/SHARP"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # NCCL 2.6-2.8 (transport/coll_net.cc): "Coll %02d : %d [send] via COLLNET/%s/%d%s".
        ("h:1:2 [0] NCCL INFO Coll 00 : 0 [send] via COLLNET/SHARP/0/GDRDMA", ("COLLNET/SHARP", True)),
        # NCCL 2.9-2.11: "CollNet %02d : %d [send] via COLLNET/%s/%d%s".
        ("h:1:2 [0] NCCL INFO CollNet 01 : 0 [receive] via COLLNET/SHARP/1", ("COLLNET/SHARP", False)),
        # NCCL 2.27: "CollNet %02d/%1d : %d [send] via COLLNET/%s/%d%s%s" with "(PCI)".
        (
            "h:1:2 [0] NCCL INFO CollNet 02/0 : 0 [send] via COLLNET/IBext/2/GDRDMA(PCI)",
            ("COLLNET/IBext", True),
        ),
    ],
)
def test_collnet_connections_in_each_version_form(line: str, expected: tuple[str, bool]) -> None:
    transport = parse_nccl_log(line + "\n")
    assert (transport.inter_node, transport.gdrdma) == expected


def test_point_to_point_network_connections_name_the_transport_over_collnet() -> None:
    log = (
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0\n"
        "h:1:2 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA\n"
        "h:1:2 [0] NCCL INFO CollNet 01/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA\n"
    )
    transport = parse_nccl_log(log)
    assert transport.inter_node == "NET/IB" and transport.gdrdma
    assert transport.rdma_channels == {"COLLNET/SHARP": 2, "NET/IB": 1}


def test_channel_lines_decide_over_the_announced_network() -> None:
    # IB announced, but a channel that really went over sockets is the evidence that counts.
    log = (
        "h:1:1 [0] NCCL INFO Using network IB\n"
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"
    )
    transport = parse_nccl_log(log)
    assert transport.network == "IB" and transport.inter_node == "NET/Socket" and transport.uses_socket


def test_a_plugin_network_is_named_as_nccl_names_it() -> None:
    log = (
        "node:7:7 [0] NCCL INFO Using network AWS Libfabric\n"
        "[1,0]<stdout>:node:7:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] "
        "via NET/AWS Libfabric/0/GDRDMA\n"
    )
    transport = parse_nccl_log(log)
    assert transport.network == "AWS Libfabric"
    assert transport.inter_node == "NET/AWS Libfabric" and transport.gdrdma


@pytest.mark.parametrize(
    ("via", "expected"),
    [
        ("NET/IB/0/GDRDMA", ("NET/IB", True)),
        ("NET/IB/2(3)/GDRDMA", ("NET/IB", True)),
        # NCCL 2.27, transport/net.cc: "via NET/%s/%d%s%s%s" with /GDRDMA, (PCI) and /Shared.
        ("NET/IB/0/GDRDMA(PCI)", ("NET/IB", True)),
        ("NET/IB/1(5)/GDRDMA(PCI)/Shared", ("NET/IB", True)),
        ("NET/IBext_v8/2", ("NET/IBext_v8", False)),
        ("NET/Socket/0", ("NET/Socket", False)),
        ("P2P/IPC/read", ("P2P/IPC", False)),
        ("P2P/CUMEM", ("P2P/CUMEM", False)),
        ("P2P/direct pointer", ("P2P/direct pointer", False)),
        ("SHM/direct/direct", ("SHM", False)),
        ("direct shared memory", ("direct shared memory", False)),
    ],
)
def test_channel_transports(via: str, expected: tuple[str, bool]) -> None:
    assert channel_transport(via) == expected


def test_warnings_are_kept_once_and_counted() -> None:
    line = "h:1:1 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer h2<1>\n"
    transport = parse_nccl_log(line * 500)
    assert transport.warnings == ("socketProgress: Connection closed by remote peer h2<1>",)
    assert transport.warning_count == 500
