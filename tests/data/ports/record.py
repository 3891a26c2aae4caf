"""Record the ports probe's observations on the lab cluster as test data for the pure judge.

    sudo .venv/bin/python -m tests.data.ports.record

Real listeners, real iptables rules, real routes: healthy, the master's rendezvous port
dropped, one pair rejected, the master's port already held by another process.
"""

from __future__ import annotations

import json
import sys
import time
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


def record(name: str, sessions: list[HostSession], config: Config) -> None:
    ctx = CheckContext(config=config, sessions=sessions, deadline=Deadline.after(60))
    observation = observe_ports(ctx)
    (OUT / f"{name}.json").write_text(json.dumps(asdict(observation), indent=1) + "\n")
    blocked = [p for p in observation.probes if p["status"] != "open"]
    print(f"{name}: {len(blocked)} blocked probes")


def main() -> None:
    with LabCluster(3, env=Path(sys.prefix)) as lab:
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
            record("healthy", sessions, config)
            lab.block_port(lab.nodes[0], 29500, action="drop")
            record("master_rendezvous_dropped", sessions, config)
            lab.unblock_ports(lab.nodes[0])
            lab.block_port(lab.nodes[2], 29500, action="reject", from_node=lab.nodes[1])
            record("rendezvous_rejected_one_pair", sessions, config)
            lab.unblock_ports(lab.nodes[2])
            holder = lab.spawn(lab.nodes[0], [NODE_PYTHON, "-c", HOLD_PORT])
            time.sleep(1.0)
            record("master_port_in_use", sessions, config)
            holder.kill()
        finally:
            close_all(sessions)


if __name__ == "__main__":
    main()
