"""All-reduce busbw reported by preflight versus a plain torch.distributed script, same nodes, same run.

Builds a lab cluster (root needed) and alternates, for a few rounds, ``preflight check --only
allreduce`` (its sweep read from ``--json``) and a minimal, independent reference: one gloo
all-reduce script launched with ``torch.distributed.run`` on every node at once, float32 tensors,
warm-ups, a barrier, then timed iterations; busbw = S/t * 2(n-1)/n with t rank 0's time per op.
The reference measures the sizes preflight's time-budgeted sweep reached in the same round. Prints
per size the median busbw of each method and their ratio (below 1: preflight reports less than the
reference, that is, it understates the fabric), and the ratio at the largest common size, which is
what preflight gates on. The reference also reports t as the slowest rank's time, as nccl-tests
and preflight do, in a column of its own.

    sudo .venv/bin/python benchmarks/allreduce_fidelity.py --nodes 3 --rounds 3
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from preflight.units import binary_size as size_label
from tests.lab import NODE_PYTHON, LabCluster
from tests.test_check_lab import check_argv

PREFLIGHT_PORT = 29500  # preflight's default rendezvous port: the reference avoids it
REFERENCE_MARKER = "REFERENCE-ALLREDUCE "

# Runs on every node under torch.distributed.run; its only argument is one JSON object:
# sizes (bytes), warmup, iters, min_iters, size_budget_s, timeout_s. Rank 0 prints one line.
REFERENCE_SCRIPT = r"""
import json
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

args = json.loads(sys.argv[1])
dist.init_process_group("gloo", timeout=timedelta(seconds=args["timeout_s"]))
rank, world = dist.get_rank(), dist.get_world_size()
rows = []
for size in args["sizes"]:
    tensor = torch.ones(size // 4, dtype=torch.float32)
    # The first warm-up is also a probe: the iterations are picked from the slowest rank's
    # probe, so that every rank runs the same number of ops.
    started = time.perf_counter()
    dist.all_reduce(tensor)
    probe = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
    dist.all_reduce(probe, op=dist.ReduceOp.MAX)
    iters = int(args["size_budget_s"] / max(probe.item(), 1e-9))
    iters = max(args["min_iters"], min(args["iters"], iters))
    for _ in range(args["warmup"] - 1):
        dist.all_reduce(tensor)
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor)
    per_op = (time.perf_counter() - started) / iters
    slowest = torch.tensor([per_op], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # untimed: only for the report
    factor = 2.0 * (world - 1) / world
    rows.append({
        "size_bytes": size,
        "iters": iters,
        "time_s": per_op,
        "busbw_gbps": size / per_op / 1e9 * factor,
        "max_time_s": slowest.item(),
        "max_busbw_gbps": size / slowest.item() / 1e9 * factor,
    })
if rank == 0:
    print("REFERENCE-ALLREDUCE " + json.dumps({"world_size": world, "sweep": rows}), flush=True)
dist.destroy_process_group()
"""


@dataclass
class Samples:
    """busbw samples per message size, one per round that measured the size."""

    preflight: dict[int, list[float]] = field(default_factory=dict)
    reference: dict[int, list[float]] = field(default_factory=dict)
    reference_max: dict[int, list[float]] = field(default_factory=dict)
    # Per round: size -> (preflight, reference) busbw, for the rounds' own ratios.
    rounds: list[dict[int, tuple[float, float]]] = field(default_factory=list)
    preflight_wall_s: list[float] = field(default_factory=list)
    reference_wall_s: list[float] = field(default_factory=list)
    preflight_top: list[int] = field(default_factory=list)  # the size each preflight run gated on


def by_preflight(lab: LabCluster, workdir: Path, timeout_s: float) -> tuple[list[dict[str, Any]], float]:
    """preflight's whole-world sweep (one row per size it reached), and the CLI's wall time."""
    report = workdir / "run.json"
    report.unlink(missing_ok=True)
    hosts = lab.hosts_file(workdir / "hosts.txt")
    argv = check_argv(lab, hosts, report, "--only", "allreduce", "-q")
    started = time.monotonic()
    run = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, env={**os.environ, "NO_COLOR": "1"}
    )
    wall = time.monotonic() - started
    if not report.exists():
        raise SystemExit(f"preflight wrote no report (exit {run.returncode}): {run.stderr[-2000:]}")
    data = json.loads(report.read_text())
    found = [r for r in data["results"] if r["check"] == "allreduce" and r["details"].get("sweep")]
    if not found:
        raise SystemExit(f"preflight measured no sweep: {[r['summary'] for r in data['results']]}")
    passed = [r for r in found if r["status"] == "pass"]
    result = (passed or found)[0]
    if not passed:
        # The sweep is still a measurement; a failed pair test (noise) does not change it.
        print(f"  note: allreduce was {result['status']}: {result['summary']}", flush=True)
    if int(result["details"].get("world_size") or 0) != len(lab.nodes):
        raise SystemExit(f"preflight ran {result['details'].get('world_size')} ranks, not {len(lab.nodes)}")
    return list(result["details"]["sweep"]), wall


def free_port(lab: LabCluster) -> int:
    """A TCP port free on the master node (not preflight's), for the reference's rendezvous."""
    probe = "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"
    while True:
        port = int(lab.exec(lab.nodes[0], [NODE_PYTHON, "-c", probe]).stdout)
        if port != PREFLIGHT_PORT:
            return port


def _finish(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[int, bytes, bytes]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # The process leads its own session (spawn): end it and what it started.
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return proc.returncode, out, err


def reference_argv(lab: LabCluster, rank: int, port: int, job: dict[str, Any]) -> list[str]:
    return [
        NODE_PYTHON, "-m", "torch.distributed.run",
        "--nnodes", str(len(lab.nodes)), "--nproc-per-node", "1", "--node-rank", str(rank),
        "--master-addr", lab.nodes[0].address, "--master-port", str(port),
        "--max-restarts", "0", "--no-python", "--",
        NODE_PYTHON, "-c", REFERENCE_SCRIPT, json.dumps(job),
    ]  # fmt: skip


def by_reference(
    lab: LabCluster, sizes: Sequence[int], args: argparse.Namespace
) -> tuple[list[dict[str, Any]], float]:
    """The reference script on every node at once: its rows (rank 0's JSON), and the wall time."""
    port = free_port(lab)
    job = {
        "sizes": list(sizes),
        "warmup": args.warmup,
        "iters": args.iters,
        "min_iters": args.min_iters,
        "size_budget_s": args.size_budget_s,
        "timeout_s": args.timeout_s,
    }
    # OMP_NUM_THREADS as preflight's launcher sets it: the same threads per rank on both sides.
    env = {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    procs = [
        lab.spawn(node, reference_argv(lab, rank, port, job), env=env) for rank, node in enumerate(lab.nodes)
    ]
    with cf.ThreadPoolExecutor(max_workers=len(procs)) as pool:
        finished = list(pool.map(lambda p: _finish(p, args.timeout_s), procs))
    wall = time.monotonic() - started
    for node, (code, _, err) in zip(lab.nodes, finished, strict=True):
        if code:
            text = err.decode(errors="replace")[-2000:]
            raise SystemExit(f"the reference failed on {node.name} (exit {code}): {text}")
    for line in finished[0][1].decode(errors="replace").splitlines():
        if line.startswith(REFERENCE_MARKER):
            document = json.loads(line[len(REFERENCE_MARKER) :])
            if int(document["world_size"]) != len(lab.nodes):
                raise SystemExit(f"the reference ran {document['world_size']} ranks, not {len(lab.nodes)}")
            return list(document["sweep"]), wall
    raise SystemExit("rank 0 of the reference printed no result")


def one_round(lab: LabCluster, workdir: Path, args: argparse.Namespace, samples: Samples) -> None:
    # Never both at once: the reference starts after preflight's job has ended on every node.
    pf_rows, pf_wall = by_preflight(lab, workdir, args.timeout_s)
    sizes = [int(r["size_bytes"]) for r in pf_rows]
    ref_rows, ref_wall = by_reference(lab, sizes, args)
    samples.preflight_wall_s.append(pf_wall)
    samples.reference_wall_s.append(ref_wall)
    samples.preflight_top.append(sizes[-1])
    paired: dict[int, tuple[float, float]] = {}
    reference = {int(r["size_bytes"]): r for r in ref_rows}
    for row in pf_rows:
        size = int(row["size_bytes"])
        samples.preflight.setdefault(size, []).append(float(row["busbw_gbps"]))
        if size in reference:
            ref = reference[size]
            samples.reference.setdefault(size, []).append(float(ref["busbw_gbps"]))
            samples.reference_max.setdefault(size, []).append(float(ref["max_busbw_gbps"]))
            paired[size] = (float(row["busbw_gbps"]), float(ref["busbw_gbps"]))
    samples.rounds.append(paired)
    top = pf_rows[-1]
    print(
        f"  round {len(samples.rounds)}: preflight {pf_wall:.1f} s, reached {size_label(sizes[-1])} "
        f"({top['iters']} timed ops, {float(top['busbw_gbps']):.3g} GB/s); reference {ref_wall:.1f} s, "
        f"{float(reference[sizes[-1]]['busbw_gbps']):.3g} GB/s ({reference[sizes[-1]]['iters']} ops)",
        flush=True,
    )


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "-"


def print_table(samples: Samples, n_rounds: int) -> None:
    common = sorted(size for size in samples.preflight if size in samples.reference)
    print(f"\n{'size':>9}{'n':>3}{'preflight':>11}{'reference':>11}{'ratio':>7}", end="")
    print(f"{'ref max-rank':>14}{'ratio':>7}{'round ratios':>15}")
    print(f"{'':>9}{'':>3}{'GB/s':>11}{'GB/s':>11}{'':>7}{'GB/s':>14}{'':>7}{'min-max':>15}")
    for size in common:
        pf = statistics.median(samples.preflight[size])
        ref = statistics.median(samples.reference[size])
        ref_max = statistics.median(samples.reference_max[size])
        count = min(len(samples.preflight[size]), len(samples.reference[size]))
        own = [r[size][0] / r[size][1] for r in samples.rounds if size in r and r[size][1] > 0]
        spread = f"{min(own):.2f}-{max(own):.2f}" if own else "-"
        print(
            f"{size_label(size):>9}{count:>3}{pf:>11.4g}{ref:>11.4g}{ratio(pf, ref):>7}"
            f"{ref_max:>14.4g}{ratio(pf, ref_max):>7}{spread:>15}"
        )
    print(
        "\nbusbw medians over the rounds that measured the size (n); ratio = preflight / reference "
        "(below 1: preflight reports less).\nreference: t = rank 0's time per op; "
        "ref max-rank: t = the slowest rank's, as preflight and nccl-tests take it.\n"
        "round ratios: the lowest and highest ratio of one round's two measurements."
    )
    in_all = [s for s in common if len(samples.preflight[s]) == n_rounds == len(samples.reference[s])]
    gate = max(in_all or common)
    pf = statistics.median(samples.preflight[gate])
    ref = statistics.median(samples.reference[gate])
    per_round = ", ".join(ratio(*r[gate]) for r in samples.rounds if gate in r)
    tops = ", ".join(size_label(s) for s in samples.preflight_top)
    print(
        f"\nlargest size measured by both in every round: {size_label(gate)} "
        f"(preflight's sweep stopped at {tops})"
    )
    print(
        f"  preflight {pf:.4g} GB/s vs reference {ref:.4g} GB/s: ratio {ratio(pf, ref)} "
        f"(per round: {per_round})"
    )
    print(
        f"\nwall per round (median): preflight check {statistics.median(samples.preflight_wall_s):.1f} s, "
        f"reference {statistics.median(samples.reference_wall_s):.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5, help="reference warm-ups per size (default 5)")
    parser.add_argument("--iters", type=int, default=20, help="reference timed ops per size, most (20)")
    parser.add_argument("--min-iters", type=int, default=10, help="reference timed ops per size, fewest (10)")
    parser.add_argument(
        "--size-budget-s", type=float, default=1.0, help="reference timed seconds per size, roughly (1.0)"
    )
    parser.add_argument("--timeout-s", type=float, default=240, help="limit of one method's run (240)")
    args = parser.parse_args()
    if args.nodes < 2:
        parser.error("--nodes must be 2 or more: one rank has no all-reduce traffic")
    started = time.monotonic()
    samples = Samples()
    with LabCluster(args.nodes, env=Path(sys.prefix)) as lab, tempfile.TemporaryDirectory() as tmp:
        print(f"{args.nodes} lab nodes, 1 rank each, gloo, {args.rounds} rounds, interleaved", flush=True)
        for _ in range(args.rounds):
            one_round(lab, Path(tmp), args, samples)
    print_table(samples, args.rounds)
    print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
