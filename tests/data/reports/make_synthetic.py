"""Make a 1,000-node H100 cluster run, multiplied from recorded data, with a
few culprits injected; deterministic (same bytes every time).

The run's frame (tool version, start time, how a node's connection is reported) comes from the
lab recording ``healthy.json``; each node's facts are the recorded H100 facts of
``tests/data/runs/`` (the driver, torch and packages of ``h100_node.json``, the eight GPUs of
``h100_busy_gpus.json`` as GPU 0 reads there: idle). The findings are not written by hand: the
real judges of ``checks/`` turn the facts and observations into them, as in a real run.

Injected, each on one node (values from tests/data/runs/SOURCES.md):
- gpu0417: driver 535.154.05 with CUDA 12.2 (the majority has 550.54.15, 12.4);
- gpu0733: GPUs 1-7 hold 58333 MiB of 81559 MiB, as in the busy recording;
- gpu0123: GPU 2 has a pending row remap (4 uncorrectable rows);
- gpu0512: numpy 1.26.3 (the majority 1.26.4): a warning, not part of the training stack;
- gpu0256: its ephemeral port is dropped from every other node;
- gpu0998, gpu0999: no answer on port 22;
- with the all-reduce and DDP checks present (their own judges read a synthetic job document and
  each node's recorded NCCL log, tests/data/nccl/ib_gdrdma_h20_two_nodes.log): gpu0256's link
  runs at a tenth of 46 GB/s (one 400G NIC), and gpu0733's busy GPUs make its ranks stragglers.

The tests call :func:`build`; ``python tests/data/reports/make_synthetic.py [OUT.json]`` writes
the run (default ``test-artifacts/large_1000.json``) for ``preflight report OUT.json --html``.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from checks.connect import judge_connect  # noqa: E402
from checks.gpu_memory import judge_gpu_memory  # noqa: E402
from checks.ports import PortsObservation, judge_ports  # noqa: E402
from checks.versions import judge_versions  # noqa: E402
from preflight.config import Config  # noqa: E402
from preflight.model import CheckResult, HostError, HostReport, RunReport  # noqa: E402

HERE = Path(__file__).resolve().parent
RUNS = ROOT / "tests" / "data" / "runs"
N_NODES = 1000
MIB = 1024 * 1024
PORT = 29500


def name_of(i: int) -> str:
    return f"gpu{i:04d}"


def address_of(i: int) -> str:
    return f"10.1.{i // 200}.{i % 200 + 10}"


def node_facts(
    i: int, template: Mapping[str, Any], gpus: list[dict[str, Any]], rng: random.Random
) -> dict[str, Any]:
    facts = copy.deepcopy(dict(template))
    facts["hostname"] = name_of(i)
    facts["gpus"] = copy.deepcopy(gpus)
    facts["torch"] = {**facts["torch"], "device_count": len(gpus)}
    facts["connection"] = {
        "transport": "ssh",
        "user": "root",
        "port": 22,
        "python": facts["python"]["executable"],
        "connect_s": round(0.05 + rng.random() * 0.1, 3),
        "probe_s": round(2.5 + rng.random() * 1.5, 3),
        "accepted_host_keys": [],
    }
    return facts


def inject(facts: dict[str, dict[str, Any]], busy: list[dict[str, Any]]) -> None:
    drifted = facts[name_of(417)]
    drifted["driver"] = {**drifted["driver"], "version": "535.154.05", "cuda": "12.2"}
    loaded = facts[name_of(733)]
    for gpu, recorded in zip(loaded["gpus"][1:], busy[1:], strict=True):
        for key in ("memory_used_bytes", "memory_free_bytes", "processes"):
            gpu[key] = copy.deepcopy(recorded[key])
    remapped = facts[name_of(123)]["gpus"][2]
    remapped["remapped_rows"] = {"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False}
    facts[name_of(512)]["packages"]["numpy"] = "1.26.3"


def ports_observation(names: list[str], rng: random.Random) -> PortsObservation:
    master = names[0]
    nodes: dict[str, dict[str, Any]] = {}
    for name in names:
        local = name == master
        route = {"master": address_of(1), "dev": "lo" if local else "ib0", "mtu": 65536 if local else 2044}
        nodes[name] = {
            "listening": {str(PORT): "ok"},
            "ephemeral": 32768 + rng.randrange(28000),
            "route": {**route, "local": local},
        }
    target = name_of(256)
    port = nodes[target]["ephemeral"]
    probes = [
        {"from": n, "to": target, "port": port, "kind": "ephemeral", "status": "dropped", "seconds": 3.0}
        for n in names
        if n != target
    ]
    return PortsObservation(
        master=master, master_address=address_of(1), port=PORT, extra_ports=(), nodes=nodes, probes=probes
    )


def _sweep(peak_gbps: float, world: int) -> list[dict[str, Any]]:
    """An all-reduce sweep from 1 KiB to 64 MiB: latency-bound small sizes, the link's peak at the top."""
    rows = []
    for k in range(10, 27):
        size = 2**k
        busbw = peak_gbps * size / (size + 4 * MIB) + 0.001
        algbw = busbw * world / (2 * (world - 1))
        rows.append(
            {
                "size_bytes": size,
                "count": size // 4,
                "warmup_iters": 5,
                "iters": 20,
                "time_s": size / (algbw * 1e9),
                "algbw_gbps": algbw,
                "busbw_gbps": busbw,
                "wrong": 0,
            }
        )
    return rows


def job_outcome(
    names: list[str],
    *,
    slow: str | None,
    stragglers: dict[str, float],
    gpus_per_node: int,
    healthy_gbps: float,
) -> Any:
    """The document a torchrun job across ``names`` would print, and each node's NCCL log, as the
    judges of checks/allreduce and checks/ddp read them."""
    from checks.job.outcome import JobOutcome, NodeOutcome
    from checks.job.pairs import QUIET_SLOW_RATIO, first_busbw, plan_rounds, retest_plan

    rng = random.Random(len(names))
    world = len(names) * gpus_per_node
    slow_rank = names.index(slow) if slow else -1

    def pair_busbw(a: int, b: int) -> float:
        value = healthy_gbps * (0.97 + 0.06 * rng.random())
        return value * 0.1 if slow_rank in (a, b) else value

    def measure(rounds: list[list[tuple[int, int]]], first_round: int, retest: bool) -> list[dict[str, Any]]:
        found = []
        for index, pairs in enumerate(rounds):
            for a, b in pairs:
                busbw = pair_busbw(a, b)
                time_s = 4 * MIB / (busbw * 1e9)
                ranks = [
                    *range(a * gpus_per_node, (a + 1) * gpus_per_node),
                    *range(b * gpus_per_node, (b + 1) * gpus_per_node),
                ]
                found.append(
                    {
                        "round": first_round + index,
                        "nodes": [a, b],
                        "ranks": ranks,
                        "size_bytes": 4 * MIB,
                        "iters": 20,
                        "time_s": time_s,
                        "algbw_gbps": busbw * len(ranks) / (2 * (len(ranks) - 1)),
                        "busbw_gbps": busbw,
                        "retest": retest,
                    }
                )
        return found

    rounds = plan_rounds(len(names))
    pairs = measure(rounds, 0, False)
    plan = retest_plan(first_busbw(pairs), 0.5, QUIET_SLOW_RATIO)
    pairs += measure(plan, len(rounds), True)
    world_peak = healthy_gbps * (0.1 if slow else 0.92)
    ranks = [
        {
            "rank": r,
            "node_rank": r // gpus_per_node,
            "local_rank": r % gpus_per_node,
            "hostname": names[r // gpus_per_node],
            "device_name": "NVIDIA H100 80GB HBM3",
        }
        for r in range(world)
    ]
    compute = []
    for r in range(world):
        base = 0.0118 * (0.98 + 0.04 * rng.random())
        compute.append(base * stragglers.get(names[r // gpus_per_node], 1.0) if r % gpus_per_node else base)
    losses = [0.9 * 0.93**step + 0.02 for step in range(30)]
    document = {
        "job_version": 1,
        "world_size": world,
        "nodes": names,
        "backend": "nccl",
        "device": "cuda",
        "torch": "2.5.1+cu124",
        "ranks": ranks,
        "phase_errors": {},
        "duration_s": 21.4,
        "allreduce": {
            "sweep": _sweep(world_peak, world),
            "sweep_budget_s": 6.0,
            "sweep_max_bytes": 64 * MIB,
            "sweep_complete": True,
            "sweep_stopped": None,
            "sweep_duration_s": 4.1,
            "pairs": pairs,
            "retest_rounds": [[list(p) for p in r] for r in plan],
            "duration_s": 9.8,
        },
        "ddp": {
            "steps": 30,
            "losses": losses,
            "loss_first": losses[0],
            "loss_last": losses[-1],
            "joined": world,
            "ones_allreduce": float(world),
            "param_checksums": [12.3456789] * world,
            "grad_checksums": [-0.0123456] * world,
            "param_hashes": ["9f2c4e1a7b3d5f60"] * world,
            "grad_hashes": ["1a2b3c4d5e6f7081"] * world,
            "compute_step_s": compute,
            "wall_step_s": [max(compute) * 1.3] * world,
            "duration_s": 3.2,
        },
    }
    log = (RUNS.parent / "nccl" / "ib_gdrdma_h20_two_nodes.log").read_text()
    nodes = tuple(
        NodeOutcome(host=n, node_rank=i, exit_status=0, timed_out=False, lost=False, killed=False, stderr=log)
        for i, n in enumerate(names)
    )
    return JobOutcome(("allreduce", "ddp"), "nccl", address_of(1), PORT, nodes, 24.0, document)


def job_results(names: list[str], facts: Mapping[str, Mapping[str, Any]], **kwargs: Any) -> list[CheckResult]:
    """The all-reduce and DDP findings from their own judges, when the checks are there."""
    try:
        from checks.allreduce import judge_allreduce
        from checks.ddp import judge_ddp
    except ImportError:
        return []
    outcome = job_outcome(names, **kwargs)
    config = Config()
    return [*judge_allreduce(outcome, config, facts), *judge_ddp(outcome, config)]


def recorded_job_run(path: Path) -> RunReport:
    """A run around a recorded distributed job (tests/data/jobs: a real torchrun of the job script
    over gloo; tests/data/rails: a real check on the lab), judged by the compute and intranode (where
    the job ran them), rails, allreduce and ddp judges, the network findings referring to their
    root causes; the hosts are the job's nodes."""
    from checks.allreduce import judge_allreduce
    from checks.allreduce.phase import PHASE as ALLREDUCE_PHASE
    from checks.compute import judge_compute
    from checks.compute.root_cause import refer_to_compute
    from checks.ddp import judge_ddp
    from checks.ddp.phase import PHASE as DDP_PHASE
    from checks.intranode import judge_intranode
    from checks.job.outcome import JobOutcome, NodeOutcome
    from checks.rails import judge_rails
    from checks.rails.phase import PHASE as RAILS_PHASE

    data = json.loads(path.read_text())
    nodes = tuple(NodeOutcome(**n) for n in data["nodes"])
    outcome = JobOutcome(**{**data, "phases": tuple(data["phases"]), "nodes": nodes})
    names = [n.host for n in nodes]
    hosts = [HostReport(name=n, address=n, hostname=n, reachable=True, facts={"hostname": n}) for n in names]
    config = Config()
    compute = judge_compute(outcome, config) if "compute" in outcome.phases else []
    compute += judge_intranode(outcome, config) if "intranode" in outcome.phases else []
    compute += (
        refer_to_compute(judge_rails(outcome, config), compute, RAILS_PHASE.speed_keys)
        if "rails" in outcome.phases
        else []
    )
    results = [
        *compute,
        *refer_to_compute(judge_allreduce(outcome, config, {}), compute, ALLREDUCE_PHASE.speed_keys),
        *(
            refer_to_compute(judge_ddp(outcome, config), compute, DDP_PHASE.speed_keys)
            if "ddp" in outcome.phases
            else []
        ),
    ]
    return RunReport.build(
        tool_version="0.1.0",
        started_at="2026-11-22T13:16:00Z",
        duration_s=outcome.duration_s,
        hosts=hosts,
        results=results,
    )


def small_bandwidth_run() -> RunReport:
    """Four H100 nodes, node3's link at a tenth of the others, its GPUs 1-7 stragglers in DDP."""
    names = [f"node{i}" for i in range(1, 5)]
    template = json.loads((RUNS / "h100_node.json").read_text())
    facts = {n: {**template, "hostname": n} for n in names}
    hosts = [HostReport(name=n, address=n, hostname=n, reachable=True, facts=facts[n]) for n in names]
    results = job_results(
        names, facts, slow="node3", stragglers={"node3": 1.7}, gpus_per_node=4, healthy_gbps=46.0
    )
    return RunReport.build(
        tool_version="0.1.0", started_at="2026-11-22T10:00:00Z", duration_s=31.0, hosts=hosts, results=results
    )


def build() -> RunReport:
    frame = json.loads((HERE / "healthy.json").read_text())
    template = json.loads((RUNS / "h100_node.json").read_text())
    busy = json.loads((RUNS / "h100_busy_gpus.json").read_text())
    idle_gpu = busy[0]
    gpus = []
    for recorded in busy:
        gpu = copy.deepcopy(idle_gpu)
        gpu["index"], gpu["pci_bus_id"] = recorded["index"], recorded["pci_bus_id"]
        gpus.append(gpu)
    rng = random.Random(20261122)
    facts = {name_of(i): node_facts(i, template, gpus, rng) for i in range(1, N_NODES + 1)}
    inject(facts, busy)
    unreachable = {name_of(998), name_of(999)}
    hosts: list[HostReport] = []
    for i in range(1, N_NODES + 1):
        name = name_of(i)
        if name in unreachable:
            error = HostError("timeout", f"no answer from {address_of(i)}:22 within 10 s")
            hosts.append(HostReport(name=name, address=address_of(i), error=error))
        else:
            hosts.append(
                HostReport(name=name, address=address_of(i), hostname=name, reachable=True, facts=facts[name])
            )
    reachable = {h.name: dict(h.facts) for h in hosts if h.reachable}
    config = Config()
    results: list[CheckResult] = []
    results += judge_connect(hosts)
    nodes = {h.name: h.node for h in hosts if h.reachable}
    results += judge_versions(nodes, config)
    results += judge_gpu_memory(nodes, config)
    results += judge_ports(ports_observation(list(reachable), rng))
    results += job_results(
        list(reachable),
        reachable,
        slow=name_of(256),
        stragglers={name_of(733): 1.8},
        gpus_per_node=8,
        healthy_gbps=46.0,
    )
    return RunReport.build(
        tool_version=frame["tool_version"],
        started_at=frame["started_at"],
        duration_s=48.2,
        hosts=hosts,
        results=results,
    )


def main() -> None:
    report = build()
    # 7 MB of JSON is not kept in the repository: the tests build it in a second.
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "test-artifacts" / "large_1000.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n")
    print(f"{out.name}: {out.stat().st_size:,} bytes, exit {int(report.exit_code)}")


if __name__ == "__main__":
    main()
