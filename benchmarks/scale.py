"""What each node costs the controller, phase by phase, and a model of a run at 100, 300 and 1,000
nodes over SSH.

Builds one lab cluster of the largest size asked (root needed) and, for each size, checks the first
n nodes in this process, sampling the controller's CPU time (user + system, every thread), its
resident memory and the wall time at each phase's start and end:

- ``connect``: SSH handshakes and authentication alone (a separate pass: transports opened, closed);
- ``facts``: the facts probe's gather (its connect share taken out);
- ``ports``: the ports probe (every node probes every other) and its judge;
- ``job``: the training job's start, watch and gather (``--quick``: the all-reduce sweep only);
- ``report``: the JSON, HTML, JUnit and terminal renderings of the run.

Each phase's controller CPU is fitted as ``a + b * n`` over the sizes (least squares), and its
per-node slope extrapolated; ratios between phases and sizes come from this one run. On this
machine the nodes share the controller's two cores, so wall times are the lab's, not a cluster's:
the model reads the controller's CPU, which is what grows with the node count.

    sudo .venv/bin/python benchmarks/scale.py --sizes 4,8,16
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import io
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checks import registry
from preflight.config import Config, RunSection
from preflight.deadline import Deadline
from preflight.inventory import HostSpec
from preflight.model import CheckResult, RunReport
from preflight.profiles import apply_profile
from preflight.runner import RunRequest, execute
from preflight.transport.ssh import KnownHosts, SshSettings, SshTransport
from tests.lab import NODE_PYTHON, LabCluster

CHECKS = ("connect", "versions", "ports", "allreduce")
MODEL_SIZES = (100, 300, 1000)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Sample:
    cpu_s: float = 0.0
    wall_s: float = 0.0
    rss_mib: float = 0.0


@dataclass
class Meter:
    """A Progress that samples the controller at the start and end of each phase."""

    marks: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)

    def mark(self, phase: str) -> None:
        self.marks.setdefault(phase, []).append((cpu_s(), time.monotonic(), rss_mib()))

    def spent(self, phase: str) -> Sample:
        (c0, w0, _), (c1, w1, r1) = self.marks[phase][0], self.marks[phase][-1]
        return Sample(c1 - c0, w1 - w0, r1)

    def hosts_started(self, names: Sequence[str]) -> None:
        self.mark("facts")

    def host(self, name: str, phase: str, *, error: str | None = None) -> None:
        pass

    def check_started(self, name: str) -> None:
        self.mark("facts")  # the gather has ended when the first check starts
        self.mark(_phase_of(name))

    def check_done(self, name: str, results: Sequence[CheckResult]) -> None:
        self.mark(_phase_of(name))

    def close(self) -> None:
        pass


def _phase_of(check: str) -> str:
    return {"allreduce": "job"}.get(check, check)


def _specs(lab: LabCluster, n: int) -> list[HostSpec]:
    return [HostSpec(name=node.address, address=node.address, user="root") for node in lab.nodes[:n]]


def _ssh(lab: LabCluster) -> SshSettings:
    return SshSettings(known_hosts=KnownHosts([lab.known_hosts_path]), identity_files=(str(lab.key_path),))


def connect_only(lab: LabCluster, n: int) -> Sample:
    settings = _ssh(lab)
    transports = [SshTransport(spec, settings) for spec in _specs(lab, n)]
    c0, w0 = cpu_s(), time.monotonic()
    with cf.ThreadPoolExecutor(max_workers=64) as pool:
        list(pool.map(lambda t: t.open(Deadline.after(60)), transports))
    spent = Sample(cpu_s() - c0, time.monotonic() - w0, rss_mib())
    for transport in transports:
        transport.close()
    return spent


def one_run(lab: LabCluster, n: int) -> dict[str, Sample]:
    config = apply_profile(Config(run=RunSection(python=NODE_PYTHON)), "quick")
    checks = [c for c in registry() if c.name in CHECKS]
    meter = Meter()
    rendered: dict[str, Sample] = {}

    def publish(report: RunReport) -> None:
        _render(report)  # once untimed: the templates' first compile is no node's cost
        c0, w0 = cpu_s(), time.monotonic()
        _render(report)
        rendered["report"] = Sample(cpu_s() - c0, time.monotonic() - w0, rss_mib())

    report = execute(
        RunRequest(hosts=_specs(lab, n), config=config, checks=checks, ssh=_ssh(lab)), meter, publish
    )
    unreached = [h.name for h in report.hosts if not h.reachable]
    failed = [r.summary for r in report.results if r.status in ("fail", "error")]
    if unreached or failed:  # the costs still count; the verdict is the lab's (its shared cores)
        print(f"{n} nodes: the run did not pass: unreached {unreached}, failed {failed}")
    return {**{p: meter.spent(p) for p in ("facts", "ports", "job")}, **rendered}


def _render(report: RunReport) -> None:
    from rich.console import Console

    from reports import json_report, junit, terminal
    from reports.html import page

    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "run.json").write_text(json_report.render(report))
        Path(folder, "run.html").write_text(page.render(report))
        Path(folder, "run.xml").write_text(junit.render(report))
    terminal.print_report(report, Console(file=io.StringIO(), width=160))


def fit(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least squares ``a + b * n`` through the points: (a, b)."""
    k = len(points)
    mean_n = sum(n for n, _ in points) / k
    mean_y = sum(y for _, y in points) / k
    spread = sum((n - mean_n) ** 2 for n, _ in points) or 1.0
    slope = sum((n - mean_n) * (y - mean_y) for n, y in points) / spread
    return mean_y - slope * mean_n, slope


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="4,8,16", help="node counts, comma separated")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    os.environ.setdefault("XDG_STATE_HOME", tempfile.mkdtemp(prefix="preflight-scale-"))
    table: dict[str, list[tuple[int, Sample]]] = {}
    with LabCluster(sizes[-1], env=Path(sys.prefix)) as lab:
        for n in sizes:
            table.setdefault("connect", []).append((n, connect_only(lab, n)))
            phases = one_run(lab, n)
            phases["facts"].cpu_s = max(0.0, phases["facts"].cpu_s - table["connect"][-1][1].cpu_s)
            for phase, sample in phases.items():
                table.setdefault(phase, []).append((n, sample))
            print(
                f"{n} nodes: "
                + ", ".join(f"{p} {s.cpu_s:.2f} s CPU / {s.wall_s:.1f} s" for p, s in phases.items())
            )
    print("\ncontroller CPU by phase (s), wall (s) on the lab, and the fitted cost per node")
    print(f"{'phase':<8} " + " ".join(f"{f'n={n}':>16}" for n in sizes) + f" {'ms CPU/node':>12} "
          + " ".join(f"{f'at {m}':>9}" for m in MODEL_SIZES))  # fmt: skip
    total = dict.fromkeys(MODEL_SIZES, 0.0)
    for phase in ("connect", "facts", "ports", "job", "report"):
        points = table[phase]
        base, per_node = fit([(n, s.cpu_s) for n, s in points])
        model = {m: max(0.0, base + per_node * m) for m in MODEL_SIZES}
        for m in MODEL_SIZES:
            total[m] += model[m]
        cells = " ".join(f"{s.cpu_s:>7.2f} /{s.wall_s:>6.1f}" for _, s in points)
        print(
            f"{phase:<8} {cells} {per_node * 1000:>12.1f} "
            + " ".join(f"{model[m]:>8.1f}s" for m in MODEL_SIZES)
        )
    print(
        f"{'total':<8} {'':>{17 * len(sizes)}} {'':>12} "
        + " ".join(f"{total[m]:>8.1f}s" for m in MODEL_SIZES)
    )
    rss = fit([(n, s.rss_mib) for n, s in table["report"]])
    print(f"\nresident memory at the end of a run: {rss[0]:.0f} MiB + {rss[1]:.2f} MiB a node "
          + ", ".join(f"{rss[0] + rss[1] * m:.0f} MiB at {m}" for m in MODEL_SIZES))  # fmt: skip


if __name__ == "__main__":
    main()
