"""False alarms on healthy clusters: the whole ``preflight check`` run again and again where nothing
is wrong, and every fail and warning it gives there counted as false.

Two kinds of healthy lab (root needed; the lab is held under /tmp/preflight-lab.lock, which the
lab tests take too):

- ``cpu``: ``--nodes`` plain lab nodes with two rails each (``LabCluster.add_rails``, named in
  ``[rails] interfaces``), one lab for every run, every check (the job on the CPU).
- ``gpu``: a fresh lab for each run whose nodes look like 8-GPU H100 nodes with four InfiniBand
  HCAs (tests/lab/gpu.py), each with a spread that healthy nodes have: idle temperatures, power
  draw and clocks that differ from GPU to GPU, a few symbol errors on some ports, and, on one
  node, two XID 31 lines (an application's page fault) from a real kernel log in ``dmesg``. The
  job's checks are skipped there (torch sees no CUDA device in the lab; the ``cpu`` kind runs
  the job).

It prints, as Markdown, the runs that failed or warned and the findings per 100 runs, then every
false finding by check, item and status with a summary as it was given (node addresses written as
the lab's node names).

    sudo .venv/bin/python benchmarks/clean_runs.py --runs 10
    sudo .venv/bin/python benchmarks/clean_runs.py --runs 50 --gpu-only --seed 7
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checks.job.phases import JOB_PHASES
from tests.lab import GpuNode, LabCluster
from tests.lab.gpu import IB_HCAS, RECORDED_APP_XID, kernel_log_commands
from tests.test_check_lab import check_argv

LAB_LOCK = Path("/tmp/preflight-lab.lock")
CHECK_TIMEOUT_S = 300
# The recorded XID lines name the GPU at PCI 0000:01:00; the lab's GPU 0 is at 0000:18:00.
RECORDED_XID_PCI = "PCI:0000:01:00"
LAB_GPU0_PCI = "PCI:0000:18:00"


@dataclass
class Finding:
    """One kind of false finding: how many runs gave it, and the first summary seen."""

    runs: int = 0
    example: str = ""


@dataclass
class Tally:
    """What the healthy runs of one kind of lab gave."""

    kind: str
    runs: int = 0
    failed_runs: int = 0
    warned_runs: int = 0
    fails: int = 0
    warnings: int = 0
    notes: int = 0
    seconds: float = 0.0
    exit_codes: Counter[int] = field(default_factory=Counter)
    findings: dict[tuple[str, str, str], Finding] = field(default_factory=dict)

    def add(
        self, report: Mapping[str, Any], exit_code: int, seconds: float, names: Mapping[str, str]
    ) -> None:
        self.runs += 1
        self.seconds += seconds
        self.exit_codes[exit_code] += 1
        statuses: set[str] = set()
        seen: set[tuple[str, str, str]] = set()
        for result in report.get("results", []):
            details = result.get("details") or {}
            if details.get("note"):
                self.notes += 1
            status = "fail" if result["status"] == "error" else result["status"]
            if status not in ("fail", "warn"):
                continue
            statuses.add(status)
            if status == "fail":
                self.fails += 1
            else:
                self.warnings += 1
            key = (result["check"], str(details.get("item", "")), result["status"])
            finding = self.findings.setdefault(key, Finding(example=_named(result["summary"], names)))
            if key not in seen:
                seen.add(key)
                finding.runs += 1
        self.failed_runs += "fail" in statuses
        self.warned_runs += "warn" in statuses and "fail" not in statuses

    def add_missing(self, why: str, exit_code: int, seconds: float) -> None:
        """A run that left no report: a fail of the whole run."""
        self.add({"results": [{"check": "(run)", "status": "fail", "summary": why}]}, exit_code, seconds, {})


def _named(summary: str, names: Mapping[str, str]) -> str:
    """The summary with each lab node's address written as its name (node1, ...)."""
    for address, name in sorted(names.items(), key=lambda item: -len(item[0])):
        summary = re.sub(rf"(?<![\d.]){re.escape(address)}(?![\d])", name, summary)
    return summary.replace("|", "\\|")


@contextmanager
def lab_lock() -> Iterator[None]:
    """The lab lock the lab tests take (``flock /tmp/preflight-lab.lock``), held while it runs."""
    with open(LAB_LOCK, "a") as handle:
        started = time.monotonic()
        fcntl.flock(handle, fcntl.LOCK_EX)
        waited = time.monotonic() - started
        if waited > 1:
            print(f"(waited {waited:.0f} s for the lab lock)", file=sys.stderr)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_once(lab: LabCluster, workdir: Path, tally: Tally, extra: list[str]) -> None:
    """One whole ``preflight check`` on the lab, added to ``tally``."""
    report = workdir / "run.json"
    report.unlink(missing_ok=True)
    argv = check_argv(lab, lab.hosts_file(workdir / "hosts.txt"), report, "-q", *extra)
    env = {**os.environ, "NO_COLOR": "1"}
    names = {node.address: node.name for node in lab.nodes}
    started = time.monotonic()
    try:
        run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        tally.add_missing(
            f"preflight check did not end in {CHECK_TIMEOUT_S} s", -1, time.monotonic() - started
        )
        return
    seconds = time.monotonic() - started
    if not report.exists():
        tally.add_missing(
            f"no report (exit {run.returncode}): {run.stderr.strip()[-300:]}", run.returncode, seconds
        )
        return
    tally.add(json.loads(report.read_text()), run.returncode, seconds, names)


def healthy_gpu_node(rng: random.Random) -> GpuNode:
    """An 8-GPU node as healthy ones are at rest: each GPU its own temperature (the margin to
    slowdown moving with it), power draw and clocks (most GPUs idle at 345 MHz, a few still at
    full clock after recent work); on about half the nodes, one or two ports with a few symbol
    errors since their counters were cleared."""
    changes: dict[int, dict[str, str]] = {}
    for gpu in range(8):
        temperature = rng.randint(29, 48)
        power = rng.uniform(62.0, 98.0)
        sm = rng.choice((345, 345, 345, 345, 1755, 1980))
        changes[gpu] = {
            "temperature.gpu": str(temperature),
            "temperature.gpu.tlimit": str(87 - temperature),
            "temperature.memory": str(temperature + rng.randint(4, 9)),
            "power.draw": f"{power:.2f} W",
            "power.draw.average": f"{power:.2f} W",
            "power.draw.instant": f"{power + rng.uniform(-1.5, 1.5):.2f} W",
            "clocks.current.graphics": f"{sm} MHz",
            "clocks.current.sm": f"{sm} MHz",
            "clocks.current.video": f"{765 if sm == 345 else 1545} MHz",
        }
    ib_changes: dict[str, dict[str, str]] = {}
    if rng.random() < 0.5:
        for hca in rng.sample(IB_HCAS, rng.randint(1, 2)):
            ib_changes[hca] = {"counters/symbol_error": str(rng.randint(1, 5))}
    return GpuNode(infiniband=True, changes=changes, ib_changes=ib_changes)


def run_cpu(tally: Tally, nodes: int, runs: int) -> None:
    with LabCluster(nodes, env=Path(sys.prefix)) as lab, tempfile.TemporaryDirectory() as tmp:
        # Two rails a node (interfaces on bridges of their own), so that ``rails`` runs too.
        config = Path(tmp) / "rails.toml"
        config.write_text(f"[rails]\ninterfaces = {json.dumps(lab.add_rails(2))}\n", encoding="utf-8")
        for i in range(runs):
            run_once(lab, Path(tmp), tally, ["--config", str(config)])
            print(f"cpu run {i + 1}/{runs}: exit {list(tally.exit_codes.elements())[-1]}", file=sys.stderr)


def _lab_memlock() -> str:
    """The locked-memory limit the lab's sessions inherit from this machine ("unlimited" or a size)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return "unlimited" if soft == resource.RLIM_INFINITY else f"{soft} B"


LAB_MEMLOCK = _lab_memlock()


def run_gpu(tally: Tally, nodes: int, runs: int, rng: random.Random) -> None:
    app_xid = RECORDED_APP_XID.read_text(encoding="utf-8").replace(RECORDED_XID_PCI, LAB_GPU0_PCI)
    for i in range(runs):
        with LabCluster(nodes, env=Path(sys.prefix)) as lab, tempfile.TemporaryDirectory() as tmp:
            for node in lab.nodes:
                lab.make_gpu_node(node, healthy_gpu_node(rng))
            with_xid = rng.choice(lab.nodes)
            commands = kernel_log_commands(with_xid.node_dir / "kernel", app_xid)
            lab.exec(with_xid, ["sh", "-c", " && ".join(commands)])
            # A real RDMA node lets its users lock memory without limit; this machine cannot raise
            # the limit of the lab's sessions (not even as root), so the config states the lab's.
            config = Path(tmp) / "lab.toml"
            config.write_text(f'[limits]\nrdma_memlock = "{LAB_MEMLOCK}"\n', encoding="utf-8")
            run_once(lab, Path(tmp), tally, ["--skip", ",".join(JOB_PHASES), "--config", str(config)])
        print(f"gpu run {i + 1}/{runs}: exit {list(tally.exit_codes.elements())[-1]}", file=sys.stderr)


def per_100(count: int, runs: int) -> str:
    return f"{100 * count / runs:.1f}" if runs else "-"


def print_tables(tallies: list[Tally], nodes: int, seed: int) -> None:
    print(f"Healthy runs, {nodes} lab nodes, seed {seed}; every fail and warning counted as false.\n")
    print(
        "| lab | runs | runs failed | fails /100 runs | runs warned (no fail) | warnings /100 runs "
        "| notes /run | exit codes | s/run |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for t in tallies:
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(t.exit_codes.items()))
        notes = f"{t.notes / t.runs:.1f}" if t.runs else "-"
        seconds = f"{t.seconds / t.runs:.1f}" if t.runs else "-"
        print(
            f"| {t.kind} | {t.runs} | {t.failed_runs} | {per_100(t.fails, t.runs)} | {t.warned_runs} "
            f"| {per_100(t.warnings, t.runs)} | {notes} | {codes} | {seconds} |"
        )
    rows = [(t, key, f) for t in tallies for key, f in sorted(t.findings.items(), key=lambda kv: -kv[1].runs)]
    if not rows:
        print("\nNo false finding.")
        return
    print("\n| lab | check | item | status | runs with it | per 100 runs | summary (first seen) |")
    print("|---|---|---|---|---:|---:|---|")
    for t, (check, item, status), finding in rows:
        print(
            f"| {t.kind} | {check} | {item or '-'} | {status} | {finding.runs} "
            f"| {per_100(finding.runs, t.runs)} | {finding.example} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="healthy runs of each kind (default 10)")
    parser.add_argument("--nodes", type=int, default=3, help="lab nodes (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the GPU nodes' spread (default 1)")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--gpu-only", action="store_true", help="only the emulated GPU nodes")
    only.add_argument("--cpu-only", action="store_true", help="only the plain lab nodes")
    args = parser.parse_args()
    if args.runs < 1 or args.nodes < 2:
        parser.error("--runs must be at least 1 and --nodes at least 2 (nodes are judged side by side)")
    tallies = []
    with lab_lock():
        if not args.gpu_only:
            tallies.append(Tally("cpu"))
            run_cpu(tallies[-1], args.nodes, args.runs)
        if not args.cpu_only:
            tallies.append(Tally("gpu (emulated, job skipped)"))
            run_gpu(tallies[-1], args.nodes, args.runs, random.Random(args.seed))
    print_tables(tallies, args.nodes, args.seed)


if __name__ == "__main__":
    main()
