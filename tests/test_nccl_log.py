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
        "inter_node": "NET/Socket",
        "ib_no_device": True,
        "ib_devices": (),
        "socket_devices": (NetDevice(0, "eno1", address="10.0.0.171"),),
        "uses_socket": True,
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
