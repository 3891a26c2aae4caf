"""Seconds from a fault to the verdict: a node's link cut in one phase of the run, and the time from
the cut to ``preflight check --quick`` (``--only allreduce`` for the job) exiting with that node
named.

The phases, each caught on the victim as it happens:

- ``handshake``: its sshd has accepted the controller's connection (a session process exists) and
  no Python of the run runs there yet: the cut lands in the key exchange or the authentication;
- ``facts``: the facts probe's Python runs there;
- ``job``: the job's rank has joined its peers (gloo's connections are up), half a second in; these
  runs are ``--only allreduce`` (its sweep and pair tests last seconds; ``--quick``'s job is over
  within half a second on three nodes).

For each size, one lab cluster (root needed) and ``--runs`` runs of each phase, the link restored
after each; the median and the range of the seconds, and how often the victim was named alone.
Beside them, the same run with no fault, timed from the moment the phase would have been caught:
a verdict cannot come before the other nodes' checks end, and on the lab's shared cores a run of
16 nodes takes seconds longer than one of 3.

    sudo .venv/bin/python benchmarks/fault_to_verdict.py --sizes 3,16 --runs 2
    sudo .venv/bin/python benchmarks/fault_to_verdict.py --sizes 64 --phases handshake,facts \\
        --python /usr/bin/python3 --check-args=--skip=allreduce

A Python without torch (``/usr/bin/python3`` on the lab) fits 64 nodes on this machine; its runs
skip the job (``--skip=allreduce``), which could not run there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lab import NODE_PYTHON, LabCluster, LabNode
from tests.test_check_lab import check_argv
from tests.test_hang_lab import joined

# How long a phase is waited for before the run is counted as not caught.
CATCH_S = 120.0
# Half a second into the job's phase, as the job's lab tests do.
INTO_THE_JOB_S = 0.5


# The nodes' Python (``--python``: the lab's, with torch, or one without it) and what the runs are
# given besides (``--check-args``).
PYTHON = {"path": NODE_PYTHON}
EXTRA: list[str] = []


def _in_handshake(lab: LabCluster, victim: LabNode) -> bool:
    """The victim's sshd serves a connection (a child of the listener) and no Python of ours runs."""
    processes = lab.processes(victim)
    session = any("sshd:" in command for _, command in processes)
    return session and not any(PYTHON["path"] in command for _, command in processes)


def _in_facts(lab: LabCluster, victim: LabNode) -> bool:
    return any(PYTHON["path"] in command for _, command in lab.processes(victim))


def _in_job(lab: LabCluster, victim: LabNode) -> bool:
    # Its ranks run, and have joined: connections a run before left closing are not this run's.
    if lab.job_ranks(victim) and joined(lab, victim):
        time.sleep(INTO_THE_JOB_S)
        return True
    return False


PHASES: dict[str, Callable[[LabCluster, LabNode], bool]] = {
    "handshake": _in_handshake,
    "facts": _in_facts,
    "job": _in_job,
}


def _cut_when(
    lab: LabCluster, victim: LabNode, caught: Callable[[LabCluster, LabNode], bool]
) -> dict[str, float]:
    when: dict[str, float] = {}

    def watch() -> None:
        deadline = time.monotonic() + CATCH_S
        while time.monotonic() < deadline and "stop" not in when:
            if caught(lab, victim):
                lab.cut(victim)
                when["fault"] = time.monotonic()
                return
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()
    return when


def _end_leftovers(lab: LabCluster, victim: LabNode) -> None:
    """What the run left on the victim while it could not be told to stop (its ranks end at their
    own deadline there): ended now, so that the next run is caught in its own phase."""
    for pid, _ in lab.processes(victim):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while lab.processes(victim) and time.monotonic() < deadline:
        time.sleep(0.05)


def _argv(lab: LabCluster, workdir: Path, phase: str) -> list[str]:
    profile = ("--only", "allreduce") if phase == "job" else ("--quick",)
    return check_argv(
        lab, lab.hosts_file(workdir / "hosts.txt"), workdir / "run.json", "-q", *profile, "--no-history",
        "--python", PYTHON["path"], *EXTRA,
    )  # fmt: skip


def healthy_run(lab: LabCluster, workdir: Path, phase: str) -> float | None:
    """Seconds from the moment ``phase`` is caught on the middle node to the end of a run with no
    fault (None where it was not caught)."""
    victim = lab.nodes[len(lab.nodes) // 2]
    when: dict[str, float] = {}

    def watch() -> None:
        while "stop" not in when:
            if PHASES[phase](lab, victim):
                when["caught"] = time.monotonic()
                return
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()
    try:
        subprocess.run(_argv(lab, workdir, phase), capture_output=True, env={**os.environ, "NO_COLOR": "1"})
        ended = time.monotonic()
    finally:
        when["stop"] = 0.0
    return ended - when["caught"] if "caught" in when else None


def one_run(lab: LabCluster, workdir: Path, phase: str) -> tuple[float | None, bool]:
    """Seconds from the cut to the run's end (None where the phase was not caught), and whether the
    victim alone was named."""
    victim = lab.nodes[len(lab.nodes) // 2]
    report = workdir / "run.json"
    argv = _argv(lab, workdir, phase)
    when = _cut_when(lab, victim, PHASES[phase])
    try:
        subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=600)
        ended = time.monotonic()
    finally:
        when["stop"] = 0.0
        lab.restore(victim)
        _end_leftovers(lab, victim)
    if "fault" not in when:
        return None, False
    data = json.loads(report.read_text())
    named = {h for r in data["results"] if r["status"] in ("fail", "error") for h in r["hosts"]}
    unreached = {h["name"] for h in data["hosts"] if not h["reachable"]}
    return ended - when["fault"], (named | unreached) == {victim.address}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="3,16")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument(
        "--python", default=NODE_PYTHON, help="the nodes' Python (/usr/bin/python3: no torch)"
    )
    parser.add_argument("--check-args", default="", help="more options for every run (--skip=allreduce)")
    args = parser.parse_args()
    PYTHON["path"] = args.python
    EXTRA.extend(shlex.split(args.check_args))
    sizes = [int(s) for s in args.sizes.split(",")]
    phases = args.phases.split(",")
    print(f"seconds from a cut link to the verdict, {args.runs} runs each (median, min-max)")
    for size in sizes:
        with LabCluster(size, env=Path(sys.prefix)) as lab, tempfile.TemporaryDirectory() as tmp:
            for phase in phases:
                found = [one_run(lab, Path(tmp), phase) for _ in range(args.runs)]
                seconds = [s for s, _ in found if s is not None]
                alone = sum(1 for s, ok in found if s is not None and ok)
                shown = (
                    f"{statistics.median(seconds):6.1f}  ({min(seconds):.1f}-{max(seconds):.1f})"
                    if seconds
                    else "   not caught"
                )
                healthy = [s for _ in range(args.runs) if (s := healthy_run(lab, Path(tmp), phase))]
                rest = f"{statistics.median(healthy):5.1f}" if healthy else "    -"
                print(
                    f"{size:>3} nodes  {phase:<10}{shown}  named alone in {alone} of {len(seconds)}"
                    f"  (no fault: the run ends {rest} s later)"
                )


if __name__ == "__main__":
    main()
