"""Record the ports probe's observations on the lab cluster as test data for the pure judge.

    sudo .venv/bin/python -m tests.data.ports.record [NAME ...]

Real listeners, real iptables rules, real routes; each scenario of :data:`SCENARIOS` (all of them
without a NAME) on a lab of its size, the rules removed after each. SOURCES.md says what each
recording shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from checks.ports import observe_ports
from preflight.check import CheckContext, HostSession
from preflight.config import Config, RunSection
from preflight.deadline import Deadline
from preflight.gather import close_all, gather
from preflight.inventory import HostSpec
from preflight.progress import NoProgress
from preflight.transport.ssh import KnownHosts, SshSettings, SshTransport
from tests.lab import NODE_PYTHON, LabCluster

OUT = Path(__file__).parent
HOLD_PORT = "import socket,time;s=socket.socket();s.bind(('0.0.0.0',29500));s.listen();time.sleep(60)"

# A scenario's fault: made on the lab before the probe; what it returns is ended after it.
Fault = Callable[[LabCluster], "subprocess.Popen[bytes] | None"]


def _iptables(lab: LabCluster, node: int, *rule: str) -> None:
    lab.exec(node, ["iptables", "-w", "-A", *rule])


def _nothing(lab: LabCluster) -> None:
    return None


def _master_dropped(lab: LabCluster) -> None:
    lab.block_port(1, 29500, action="drop")


def _worker_rejects_one_node(lab: LabCluster) -> None:
    lab.block_port(3, 29500, action="reject", from_node=2)


def _master_port_held(lab: LabCluster) -> subprocess.Popen[bytes]:
    holder = lab.spawn(1, [NODE_PYTHON, "-c", HOLD_PORT])
    time.sleep(1.0)
    return holder


def _master_drops_node3(lab: LabCluster) -> None:
    lab.block_port(1, 29500, action="drop", from_node=3)


def _node3_drops_its_way_to_the_master(lab: LabCluster) -> None:
    _iptables(lab, 3, "OUTPUT", "-p", "tcp", "-d", lab.node(1).address, "--dport", "29500", "-j", "DROP")


def _node3_drops_every_connection_it_opens(lab: LabCluster) -> None:
    others = f"{lab.node(1).address},{lab.node(2).address}"
    _iptables(lab, 3, "OUTPUT", "-p", "tcp", "--syn", "-d", others, "-j", "DROP")


def _node2_drops_node3(lab: LabCluster) -> None:
    # Every packet from node3, the answers to node2's own connections too: the link, both ways.
    _iptables(lab, 2, "INPUT", "-p", "tcp", "-s", lab.node(3).address, "-j", "DROP")


def _one_source_and_most_sources(lab: LabCluster) -> None:
    lab.block_port(9, 29500, action="drop", from_node=5)
    for few in (15, 16):
        _iptables(
            lab, 1, "INPUT", "-p", "tcp", "--dport", "29500", "-s", lab.node(few).address, "-j", "ACCEPT"
        )
    lab.block_port(1, 29500, action="drop")


SCENARIOS: dict[str, tuple[int, Fault]] = {
    "healthy": (3, _nothing),
    "master_rendezvous_dropped": (3, _master_dropped),
    "rendezvous_rejected_one_pair": (3, _worker_rejects_one_node),
    "master_port_in_use": (3, _master_port_held),
    "master_rendezvous_dropped_from_node3": (3, _master_drops_node3),
    "node3_output_to_master_rendezvous_dropped": (3, _node3_drops_its_way_to_the_master),
    "node3_output_dropped": (3, _node3_drops_every_connection_it_opens),
    "two_nodes_master_rendezvous_dropped": (2, _master_dropped),
    "four_nodes_link_dropped": (4, _node2_drops_node3),
    "sixteen_nodes_dropped_from_one_and_from_most": (16, _one_source_and_most_sources),
}


def record(name: str, sessions: list[HostSession], config: Config) -> None:
    ctx = CheckContext(config=config, sessions=sessions, deadline=Deadline.after(60))
    observation = observe_ports(ctx)
    (OUT / f"{name}.json").write_text(json.dumps(asdict(observation), indent=1) + "\n")
    blocked = [p for p in observation.probes if p["status"] != "open"]
    print(f"{name}: {len(blocked)} blocked probes")


def record_on(n_nodes: int, names: list[str]) -> None:
    """Record the named scenarios on one lab of ``n_nodes``, one after the other."""
    with LabCluster(n_nodes, env=Path(sys.prefix)) as lab:
        settings = SshSettings(
            known_hosts=KnownHosts([lab.known_hosts_path]), identity_files=(str(lab.key_path),)
        )
        specs = [HostSpec(name=n.name, address=n.address, user="root") for n in lab.nodes]
        config = Config(run=RunSection(python=NODE_PYTHON))
        sessions = gather(
            specs,
            lambda spec: SshTransport(spec, settings),
            python=NODE_PYTHON,
            probe_timeout_s=60,
            fanout=8,
            deadline=Deadline.after(120),
            progress=NoProgress(),
        )
        try:
            for name in names:
                left = SCENARIOS[name][1](lab)
                record(name, sessions, config)
                if left is not None:
                    left.kill()
                for node in lab.nodes:
                    for chain in ("INPUT", "OUTPUT"):
                        lab.exec(node, ["iptables", "-w", "-F", chain])
        finally:
            close_all(sessions)


def main(names: list[str]) -> None:
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"no such scenario: {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    chosen = names or list(SCENARIOS)
    for size in sorted({SCENARIOS[name][0] for name in chosen}):
        record_on(size, [name for name in chosen if SCENARIOS[name][0] == size])


if __name__ == "__main__":
    main(sys.argv[1:])
