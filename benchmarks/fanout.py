"""Facts gathering by preflight versus the same probe run by parallel OpenSSH ``ssh`` processes.

Builds a lab cluster (root needed), then alternates the two methods on the same nodes in
the same run and prints medians and ratios, plus the controller's CPU time per host.
Two workloads: the real facts probe (dominated by the nodes importing torch) and a bare
``true`` (the cost of the fan-out itself: handshakes, auth, channels).

    sudo .venv/bin/python benchmarks/fanout.py --nodes 8 --rounds 3
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from preflight.config import Config, RunSection
from preflight.deadline import Deadline
from preflight.gather import close_all, gather
from preflight.inventory import HostSpec
from preflight.probes import node_script
from preflight.progress import NoProgress
from preflight.transport.ssh import KnownHosts, SshSettings, SshTransport
from tests.lab import NODE_PYTHON, LabCluster


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def by_preflight(lab: LabCluster, specs: list[HostSpec], probe: bool) -> tuple[float, float]:
    settings = SshSettings(
        known_hosts=KnownHosts([lab.known_hosts_path]), identity_files=(str(lab.key_path),)
    )
    config = Config(run=RunSection(python=NODE_PYTHON))
    cpu, started = self_cpu_s(), time.monotonic()
    if probe:
        sessions = gather(
            specs,
            lambda spec: SshTransport(spec, settings),
            python=NODE_PYTHON,
            probe_timeout_s=120,
            fanout=config.run.fanout,
            deadline=Deadline.after(300),
            progress=NoProgress(),
        )
        failed = [s.spec.name for s in sessions if not s.report.reachable]
        close_all(sessions)
    else:

        def bare(spec: HostSpec) -> bool:
            with SshTransport(spec, settings) as transport:
                transport.open(Deadline.after(30))
                return transport.run(["true"], timeout_s=30).ok

        with cf.ThreadPoolExecutor(max_workers=64) as pool:
            oks = list(pool.map(bare, specs))
        failed = [s.name for s, ok in zip(specs, oks, strict=True) if not ok]
    if failed:
        raise SystemExit(f"preflight failed on {failed}")
    return time.monotonic() - started, self_cpu_s() - cpu


def by_openssh(lab: LabCluster, specs: list[HostSpec], probe: bool) -> tuple[float, float]:
    base = [
        "ssh",
        "-i",
        str(lab.key_path),
        "-o",
        f"UserKnownHostsFile={lab.known_hosts_path}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-F",
        os.devnull,
    ]
    command = [NODE_PYTHON, "-"] if probe else ["true"]
    stdin = node_script("preflight.node.facts") if probe else b""
    cpu, started = children_cpu_s(), time.monotonic()
    procs = [
        subprocess.Popen(
            [*base, f"root@{spec.address}", *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for spec in specs
    ]
    with cf.ThreadPoolExecutor(max_workers=len(procs)) as pool:
        codes = list(pool.map(lambda p: (p.communicate(stdin, timeout=300), p.returncode)[1], procs))
    if any(codes):
        raise SystemExit(f"ssh failed: {codes}")
    return time.monotonic() - started, children_cpu_s() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with LabCluster(args.nodes, env=Path(sys.prefix)) as lab:
        specs = [HostSpec(name=n.name, address=n.address, user="root") for n in lab.nodes]
        print(f"{args.nodes} lab nodes, {args.rounds} rounds, methods interleaved\n")
        print(
            f"{'workload':<14}{'preflight s':>12}{'openssh s':>11}{'ratio':>8}"
            f"{'pf cpu ms/host':>16}{'ssh cpu ms/host':>17}"
        )
        for label, probe in (("true", False), ("facts probe", True)):
            times: dict[str, list[float]] = {"preflight": [], "openssh": []}
            cpus: dict[str, list[float]] = {"preflight": [], "openssh": []}
            methods: dict[str, Callable[[LabCluster, list[HostSpec], bool], tuple[float, float]]] = {
                "preflight": by_preflight,
                "openssh": by_openssh,
            }
            for _ in range(args.rounds):
                for name, method in methods.items():
                    wall, cpu = method(lab, specs, probe)
                    times[name].append(wall)
                    cpus[name].append(cpu)
            pf, ssh = statistics.median(times["preflight"]), statistics.median(times["openssh"])
            pf_cpu = statistics.median(cpus["preflight"]) / len(specs) * 1000
            ssh_cpu = statistics.median(cpus["openssh"]) / len(specs) * 1000
            print(f"{label:<14}{pf:>12.2f}{ssh:>11.2f}{pf / ssh:>7.2f}x{pf_cpu:>16.1f}{ssh_cpu:>17.1f}")
        print("\nratio = preflight time / OpenSSH time (below 1: preflight is faster)")


if __name__ == "__main__":
    main()
