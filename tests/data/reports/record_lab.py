"""Record real runs on the lab cluster as report fixtures: ``python tests/data/reports/record_lab.py NAME``.

Each scenario builds a small lab (network namespaces with a real sshd each, tests/lab), injects
one fault, runs ``preflight check`` exactly as an operator would and keeps the JSON report as
``tests/data/reports/NAME.json``. Nodes are reached through ssh_config aliases (``node1`` ->
``10.199.k.11``), as a real cluster's nodes are, so the reports name them as people do.
Needs root; run one scenario at a time on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.lab import NODE_PYTHON, LabCluster, derive_env  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    nodes: int
    describe: str
    args: tuple[str, ...] = ()
    envs: Callable[[Path], dict[int, Path]] = field(default=lambda tmp: {})
    fault: Callable[[LabCluster], None] = field(default=lambda lab: None)
    ghost: bool = False  # one more alias, at an address where nothing answers


def _drift_envs(tmp: Path) -> dict[int, Path]:
    base = Path(sys.prefix)
    ours = derive_env(tmp / "nccl-2.21", base, packages={"nvidia-nccl-cu12": "2.21.5"})
    theirs = derive_env(
        tmp / "nccl-2.20", base, packages={"nvidia-nccl-cu12": "2.20.5", "rich": "12.0.0", "leftpad": "0.1.2"}
    )
    return {1: ours, 2: ours, 3: theirs, 4: ours}


SCENARIOS: dict[str, Scenario] = {
    "healthy": Scenario(3, "three healthy CPU nodes, every check that the tool has"),
    "drift": Scenario(
        4,
        "node3 has nvidia-nccl-cu12 2.20.5 where the others have 2.21.5, and rich 12.0.0 and leftpad",
        envs=_drift_envs,
    ),
    "blocked_port": Scenario(
        3,
        "node1 (the master) drops TCP to its rendezvous port 29500",
        fault=lambda lab: lab.block_port(lab.nodes[0], 29500, action="drop"),
    ),
    "unreachable": Scenario(
        3,
        "node4 is an address in the lab subnet where nothing answers",
        ("--connect-timeout", "3"),
        ghost=True,
    ),
    "bandwidth_healthy": Scenario(3, "three healthy nodes with all-reduce and DDP"),
    "slow_node": Scenario(
        3, "node3's link throttled to 40 Mbit/s with tc", fault=lambda lab: lab.throttle(lab.nodes[2], 40)
    ),
    # Without the recording machine's history store: a run's report is the same wherever it is recorded.
    "timeline": Scenario(
        3, "three healthy nodes, every check: where the time goes, on every node", ("--no-history",)
    ),
    "timeline_quick_64": Scenario(
        64, "64 healthy nodes, --quick: the timeline's lanes at 64 nodes", ("--quick", "--no-history")
    ),
}


def _aliases(lab: LabCluster, tmp: Path, ghost: bool) -> tuple[Path, Path]:
    hosts = tmp / "hosts.txt"
    config = tmp / "ssh_config"
    entries = [(node.name, node.address) for node in lab.nodes]
    if ghost:
        entries.append((f"node{len(lab.nodes) + 1}", lab.unused_address()))
    hosts.write_text("".join(f"{name}\n" for name, _ in entries))
    config.write_text("".join(f"Host {name}\n  HostName {addr}\n  User root\n\n" for name, addr in entries))
    return hosts, config


def record(name: str, extra: Sequence[str]) -> Path:
    scenario = SCENARIOS[name]
    out = HERE / f"{name}.json"
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp_dir:
        tmp = Path(tmp_dir)
        with LabCluster(scenario.nodes, env=Path(sys.prefix), node_envs=scenario.envs(tmp)) as lab:
            scenario.fault(lab)
            hosts, ssh_config = _aliases(lab, tmp, scenario.ghost)
            report = tmp / "run.json"
            argv = [
                sys.executable, "-m", "preflight", "check", str(hosts),
                "--python", NODE_PYTHON, "-i", str(lab.key_path),
                "--known-hosts", str(lab.known_hosts_path), "--ssh-config", str(ssh_config),
                "--json", str(report), *scenario.args, *extra,
            ]  # fmt: skip
            env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "160"}
            run = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
            print(run.stdout, run.stderr, sep="\n")
            data = json.loads(report.read_text())
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print(f"{out.name}: exit {run.returncode}, {scenario.describe}")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--extra", default="", help="more preflight arguments, space separated")
    args = parser.parse_args(argv)
    for name in args.names:
        record(name, args.extra.split())


if __name__ == "__main__":
    main()
