"""What shipping node code as a bundle costs: the facts phase with the facts probe as one file (as
it was shipped at a given revision) against the bundle of today, on the same lab nodes in the
same run, the two interleaved round by round.

Prints, for each: the facts phase's wall time (connect, ship, gather, parse: ``preflight.gather``),
the controller's CPU time per host, and the bytes shipped to each node; then the ratios.

    sudo .venv/bin/python benchmarks/bundle_cost.py --nodes 3 --rounds 7
    sudo .venv/bin/python benchmarks/bundle_cost.py --nodes 32 --rounds 3
    sudo .venv/bin/python benchmarks/bundle_cost.py --bundle-from 4edbd11   # against an older bundle
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from preflight import probes  # noqa: E402
from preflight.bundle import bundle  # noqa: E402
from preflight.deadline import Deadline  # noqa: E402
from preflight.gather import close_all, gather  # noqa: E402
from preflight.inventory import HostSpec  # noqa: E402
from preflight.progress import NoProgress  # noqa: E402
from preflight.transport.ssh import KnownHosts, SshSettings, SshTransport  # noqa: E402
from tests.lab import NODE_PYTHON, LabCluster  # noqa: E402

FACTS = "preflight.node.facts"
# The last revision that shipped the facts probe as one file.
SINGLE_FILE_REVISION = "a0c3dd2"


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def single_file(revision: str) -> bytes:
    path = FACTS.replace(".", "/") + ".py"
    return subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:{path}"], capture_output=True, check=True
    ).stdout


def bundle_at(revision: str) -> bytes:
    """The facts probe's bundle as ``revision`` packs it: its tree exported to a temporary folder,
    packed there by its own :func:`preflight.bundle.pack`."""
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        packing = "import sys; from preflight.bundle import pack; sys.stdout.buffer.write(pack(sys.argv[1]))"
        return subprocess.run(
            [sys.executable, "-c", packing, FACTS], cwd=folder, capture_output=True, check=True
        ).stdout


def facts_phase(
    lab: LabCluster, specs: list[HostSpec], script: Callable[[str], bytes]
) -> tuple[float, float]:
    """(wall seconds, controller CPU seconds) of one facts phase over ``specs``, shipping ``script``."""
    settings = SshSettings(
        known_hosts=KnownHosts([lab.known_hosts_path]), identity_files=(str(lab.key_path),)
    )
    cpu, started = self_cpu_s(), time.monotonic()
    with mock.patch.object(probes, "node_script", script):
        sessions = gather(
            specs,
            lambda spec: SshTransport(spec, settings),
            python=NODE_PYTHON,
            probe_timeout_s=120,
            fanout=64,
            deadline=Deadline.after(300),
            progress=NoProgress(),
        )
    wall, used = time.monotonic() - started, self_cpu_s() - cpu
    failed = [s.spec.name for s in sessions if not s.report.reachable]
    close_all(sessions)
    if failed:
        raise SystemExit(f"the facts probe failed on {failed}")
    return wall, used


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--revision", default=SINGLE_FILE_REVISION, help="where the single file is read from")
    parser.add_argument(
        "--bundle-from", metavar="REVISION", help="compare with the facts bundle as REVISION packs it instead"
    )
    args = parser.parse_args()
    if args.bundle_from:
        old, before = bundle_at(args.bundle_from), f"bundle ({args.bundle_from})"
    else:
        old, before = single_file(args.revision), f"one file ({args.revision})"
    shipped: dict[str, Callable[[str], bytes]] = {
        before: lambda name: old if name == FACTS else bundle(name),
        "bundle": bundle,
    }
    sizes = {label: len(script(FACTS)) for label, script in shipped.items()}
    with LabCluster(args.nodes, env=Path(sys.prefix)) as lab:
        specs = [HostSpec(name=n.name, address=n.address, user="root") for n in lab.nodes]
        walls: dict[str, list[float]] = {label: [] for label in shipped}
        cpus: dict[str, list[float]] = {label: [] for label in shipped}
        facts_phase(lab, specs, bundle)  # warm the nodes' page cache for both
        for _ in range(args.rounds):
            for label, script in shipped.items():
                wall, cpu = facts_phase(lab, specs, script)
                walls[label].append(wall)
                cpus[label].append(cpu)
    print(f"{args.nodes} lab nodes, {args.rounds} rounds, the two interleaved\n")
    print("| facts probe shipped as | bytes | facts phase (median s) | controller CPU per host (ms) |")
    print("|---|---|---|---|")
    for label in shipped:
        wall = statistics.median(walls[label])
        cpu = statistics.median(cpus[label]) / len(specs) * 1000
        print(f"| {label} | {sizes[label]:,} | {wall:.2f} | {cpu:.1f} |")
    one, bundled = (statistics.median(walls[label]) for label in shipped)
    one_cpu, bundled_cpu = (statistics.median(cpus[label]) for label in shipped)
    print(f"\nbundle / {before}: time {bundled / one:.2f}x, controller CPU {bundled_cpu / one_cpu:.2f}x")


if __name__ == "__main__":
    main()
