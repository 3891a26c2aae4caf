"""The ``allreduce`` check, judged on recorded jobs (tests/data/jobs) and variants that change one thing."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from checks import allreduce
from checks.allreduce import judge_allreduce
from checks.allreduce.measures import PAIR_BUSBW
from checks.job import launch
from checks.job.node.planning import bus_bandwidth, first_busbw
from checks.job.outcome import JobNotRun, JobOutcome, NodeOutcome
from checks.job.pairs import QUIET_SLOW_RATIO, plan_rounds, retest_plan
from checks.job.settings import AllreduceSection
from preflight.check import CheckContext
from preflight.config import Config
from preflight.deadline import Deadline
from preflight.model import CheckResult
from preflight.units import binary_size as size_label

DATA = Path(__file__).parent / "data"
JOBS = DATA / "jobs"
NCCL = DATA / "nccl"
MIB = 1024 * 1024


def load_job(name: str, directory: Path = JOBS) -> JobOutcome:
    data = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
    data["nodes"] = tuple(NodeOutcome(**node) for node in data["nodes"])
    data["phases"] = tuple(data["phases"])
    return JobOutcome(**data)


def with_document(job: JobOutcome, change: Callable[[dict[str, Any]], None]) -> JobOutcome:
    """A copy of the job whose document ``change`` edited."""
    document = copy.deepcopy(dict(job.document or {}))
    change(document)
    return dataclasses.replace(job, document=document)


def replace_node(job: JobOutcome, host: str, **changes: Any) -> JobOutcome:
    nodes = tuple(dataclasses.replace(n, **changes) if n.host == host else n for n in job.nodes)
    return dataclasses.replace(job, nodes=nodes)


def with_pairs(
    job: JobOutcome,
    busbw: Mapping[tuple[int, int], float],
    retest_busbw: Mapping[tuple[int, int], float] | None = None,
    typical_gbps: float = 1.0,
) -> JobOutcome:
    """The job's pair measurements replaced: first tests at ``busbw`` (others typical), then the
    re-tests the job itself would plan, at ``retest_busbw`` (else their first value)."""
    n_nodes = len(job.nodes)
    size = 1 * MIB

    def record(pair: tuple[int, int], round_index: int, value: float, retest: bool) -> dict[str, Any]:
        time_s = size / (value * 1e9)  # two ranks: busbw = algbw
        algbw, busbw_gbps = bus_bandwidth(size, time_s, 2)
        return {
            "round": round_index,
            "nodes": list(pair),
            "ranks": list(pair),
            "size_bytes": size,
            "iters": 10,
            "time_s": time_s,
            "algbw_gbps": algbw,
            "busbw_gbps": busbw_gbps,
            "retest": retest,
        }

    plan = plan_rounds(n_nodes, "full")
    pairs = [record(p, i, busbw.get(p, typical_gbps), False) for i, r in enumerate(plan) for p in r]
    retests = retest_plan(first_busbw(pairs), 0.5, QUIET_SLOW_RATIO)
    again = {**busbw, **(retest_busbw or {})}
    pairs += [
        record(p, len(plan) + i, again.get(p, typical_gbps), True) for i, r in enumerate(retests) for p in r
    ]

    def change(document: dict[str, Any]) -> None:
        document["allreduce"]["pairs"] = pairs
        document["allreduce"]["retest_rounds"] = [[list(p) for p in r] for r in retests]

    return with_document(job, change)


def only(results: list[CheckResult]) -> CheckResult:
    assert len(results) == 1, [(r.status, r.summary) for r in results]
    return results[0]


def failing(results: list[CheckResult]) -> list[CheckResult]:
    return [r for r in results if r.status == "fail"]


HEALTHY = load_job("three_nodes")
ONE_NODE = load_job("one_node_three_ranks")
CONFIG = Config()


def nccl_job(logs: Mapping[str, str], device: str = "cuda") -> JobOutcome:
    """The healthy job as NCCL would have run it: nodes' stderr replaced by recorded NCCL logs."""
    job = dataclasses.replace(HEALTHY, backend="nccl")
    for host, log in logs.items():
        job = replace_node(job, host, stderr=(NCCL / log).read_text(encoding="utf-8"))

    def change(document: dict[str, Any]) -> None:
        document["backend"] = "nccl"
        document["device"] = device

    return with_document(job, change)


IB_FACTS = {
    "net": {"ib_devices": [{"name": "mlx5_0", "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand"}]}
}


# --------------------------------------------------------------------------- recorded, healthy


def test_a_recorded_healthy_job_passes_with_the_tables_a_report_charts() -> None:
    result = only(judge_allreduce(HEALTHY, CONFIG, {}))
    assert result.status == "pass"
    assert result.summary.startswith("busbw ") and "at 4 MiB across 3 nodes (3 ranks, gloo)" in result.summary
    sweep = result.details["sweep"]
    assert [row["size_bytes"] for row in sweep] == [1024 << i for i in range(13)]
    assert {"size_bytes", "time_s", "algbw_gbps", "busbw_gbps", "wrong"} <= set(sweep[0])
    matrix = result.details["pair_matrix"]
    assert set(matrix) == {"node1", "node2", "node3"}
    assert matrix["node1"]["node3"] == matrix["node3"]["node1"] > 0
    assert {tuple(p["nodes"]) for p in result.details["pairs"] if not p["retest"]} == {
        ("node1", "node2"),
        ("node1", "node3"),
        ("node2", "node3"),
    }
    assert set(result.details["node_ratio"]) == {"node1", "node2", "node3"}


def test_the_draw_of_a_sparse_pair_plan_is_kept_to_replay_it() -> None:
    def drawn(document: dict[str, Any]) -> None:
        document["allreduce"]["pair_seed"] = 1234

    assert only(judge_allreduce(with_document(HEALTHY, drawn), CONFIG, {})).details["pair_seed"] == 1234
    assert "pair_seed" not in only(judge_allreduce(HEALTHY, CONFIG, {})).details


def test_the_launcher_draws_the_sparse_plan_per_run_and_replays_a_given_seed() -> None:
    ctx = CheckContext(config=CONFIG, sessions=[], deadline=Deadline.after(10))
    names = [f"node{i}" for i in range(20)]
    first, second = (launch._job_args(ctx, ("allreduce",), names, False)["allreduce"] for _ in range(2))
    assert first["pair_seed"] != second["pair_seed"]
    for args in (first, second):
        assert args["rounds"] == plan_rounds(20, "sparse", None, args["pair_seed"])
    config = CONFIG.with_sections(AllreduceSection(pair_seed=77))
    replayed = launch._job_args(dataclasses.replace(ctx, config=config), ("allreduce",), names, False)
    assert replayed["allreduce"]["pair_seed"] == 77
    assert replayed["allreduce"]["rounds"] == plan_rounds(20, "sparse", None, 77)
    # Up to 16 nodes every pair is tested: nothing is drawn.
    assert "pair_seed" not in launch._job_args(ctx, ("allreduce",), names[:16], False)["allreduce"]


def test_one_node_has_a_sweep_and_no_pairs() -> None:
    result = only(judge_allreduce(ONE_NODE, CONFIG, {}))
    assert result.status == "pass"
    assert "across 1 node (3 ranks, gloo)" in result.summary and "pairs" not in result.summary


# --------------------------------------------------------------------------- slow nodes and links


def test_a_slow_node_is_named_with_its_ratio_to_the_typical_pair() -> None:
    job = with_pairs(HEALTHY, {(0, 2): 0.01, (1, 2): 0.012})
    (result,) = failing(judge_allreduce(job, CONFIG, {}))
    assert result.hosts == ("node3",)
    assert result.summary == (
        "node3 is slow with every partner: 0.012x the typical pair (0.012 vs 1 GB/s busbw), "
        "confirmed by a re-test"
    )


def test_a_slow_link_is_named_not_its_nodes() -> None:
    job = with_pairs(HEALTHY, {(0, 2): 0.08})
    (result,) = failing(judge_allreduce(job, CONFIG, {}))
    assert result.hosts == ("node1", "node3")
    assert result.summary.startswith(
        "the link node1-node3 runs at 0.08x the typical pair (0.08 vs 1 GB/s busbw)"
    )
    # Re-tested twice on three nodes, before and after the control pairs.
    assert result.details["retest_gbps"] == [pytest.approx(0.08), pytest.approx(0.08)]


def test_a_pair_slow_once_is_not_a_failure() -> None:
    job = with_pairs(HEALTHY, {(0, 2): 0.08}, retest_busbw={(0, 2): 0.97})
    result = only(judge_allreduce(job, CONFIG, {}))
    assert result.status == "pass"
    assert "node1-node3 slow once (0.08x), fast on re-test" in result.summary


def test_pairs_are_compared_with_each_other_not_with_the_world_sweep() -> None:
    # Pairs far faster than the world's sweep (two ranks against three) are no finding.
    job = with_pairs(HEALTHY, {}, typical_gbps=50.0)
    assert only(judge_allreduce(job, CONFIG, {})).status == "pass"


def test_a_pair_floor_fails_the_pairs_under_it() -> None:
    config = Config().with_sections(AllreduceSection(min_pair_busbw_gbps=2.0))
    # 1.5 GB/s is within the slow ratio of a typical 2.5 GB/s pair, but under the floor.
    job = with_pairs(HEALTHY, {(1, 2): 1.5}, typical_gbps=2.5)
    (result,) = failing(judge_allreduce(job, config, {}))
    assert result.summary == "1 pair below the floor 2 GB/s busbw: node2-node3 1.5 GB/s"
    assert result.hosts == ("node2", "node3")
    # The first finding still carries every pair test: the pair rates are read from it.
    assert result.details["floor_gbps"] == 2.0
    assert ("node2", "node3", 1.5) in [(s.node, s.part, s.value) for s in PAIR_BUSBW.read(result)]


# --------------------------------------------------------------------------- the sweep


def test_wrong_elements_fail_naming_the_size() -> None:
    def corrupt(document: dict[str, Any]) -> None:
        document["allreduce"]["sweep"][-1]["wrong"] = 3
        document["allreduce"]["sweep"][-2]["wrong"] = 1

    results = judge_allreduce(with_document(HEALTHY, corrupt), CONFIG, {})
    (result,) = failing(results)
    assert result.summary == (
        "the sweep found 3 wrong elements at 4 MiB (and 1 at 2 MiB): all-reduce returned corrupted data"
    )
    assert "sweep" in result.details  # the tables ride on the first finding


def test_busbw_under_the_floor_at_the_largest_size_fails() -> None:
    config = Config().with_sections(AllreduceSection(min_busbw_gbps=10.0))
    (result,) = failing(judge_allreduce(HEALTHY, config, {}))
    largest = HEALTHY.document["allreduce"]["sweep"][-1]["busbw_gbps"]  # type: ignore[index]
    assert result.summary == f"busbw {largest:.3g} GB/s at 4 MiB is below the floor 10 GB/s"


def test_the_floor_judges_the_largest_size_only() -> None:
    largest = HEALTHY.document["allreduce"]["sweep"][-1]["busbw_gbps"]  # type: ignore[index]
    config = Config().with_sections(AllreduceSection(min_busbw_gbps=largest * 0.9))
    assert only(judge_allreduce(HEALTHY, config, {})).status == "pass"  # small sizes are far slower


def test_a_sweep_cut_short_by_its_budget_says_so_in_the_headline() -> None:
    def cut(document: dict[str, Any]) -> None:
        section = document["allreduce"]
        section["sweep"] = section["sweep"][:8]
        section["sweep_complete"] = False
        section["sweep_stopped"] = "the 3 s budget would run out at 262144 bytes"

    result = only(judge_allreduce(with_document(HEALTHY, cut), CONFIG, {}))
    assert result.status == "pass"
    assert (
        "GB/s at 128 KiB across 3 nodes (3 ranks, gloo) (the sweep's 3 s budget stopped it short of 4 MiB)"
        in (result.summary)
    )


# --------------------------------------------------------------------------- nodes that failed


def test_a_killed_worker_names_its_node_and_says_the_others_were_ended() -> None:
    (result,) = judge_allreduce(load_job("worker_killed"), CONFIG, {})
    assert result.status == "fail" and result.hosts == ("node3",)
    assert result.summary == (
        "node3: rank 2 was ended by SIGKILL (from outside the job: the out-of-memory killer?); "
        "preflight ended the job on node[1-2]"
    )


def test_a_lost_node_stopped_answering_during_the_phase() -> None:
    job = replace_node(load_job("worker_killed"), "node3", lost=True, exit_status=None)
    (result,) = judge_allreduce(job, CONFIG, {})
    assert result.summary == (
        "node3 stopped answering during the allreduce phase; preflight ended the job on node[1-2]"
    )


def test_a_node_that_cannot_reach_the_master_never_joined() -> None:
    job = load_job("master_unreachable")
    (result,) = judge_allreduce(job, CONFIG, {})
    assert result.status == "fail" and result.hosts == ("node2",)
    assert result.summary.startswith("node2 never joined: its ranks could not reach the master 127.0.0.1:")
    assert result.summary.endswith("(no connection within 8 s: the port is closed, filtered or dropped)")


def test_a_launch_error_is_an_error_and_a_job_without_the_phase_a_skip() -> None:
    failed = dataclasses.replace(HEALTHY, launch_error="node2: connection refused by sshd")
    assert [(r.status, r.summary, r.details["item"]) for r in judge_allreduce(failed, CONFIG, {})] == [
        ("error", "the job could not be started: node2: connection refused by sshd", "job_not_started")
    ]
    ddp_only = dataclasses.replace(HEALTHY, phases=("ddp",))
    skipped = only(judge_allreduce(ddp_only, CONFIG, {}))
    assert (skipped.status, skipped.details["item"]) == ("skip", "phase_not_run")


def test_a_phase_error_without_a_failed_node_names_the_rank() -> None:
    def broke(document: dict[str, Any]) -> None:
        del document["allreduce"]
        message = "RuntimeError: CUDA error: an illegal memory access"
        document["phase_errors"] = {"allreduce": [{"rank": 1, "local_rank": 0, "message": message}]}

    (result,) = judge_allreduce(with_document(HEALTHY, broke), CONFIG, {})
    assert result.status == "fail" and result.hosts == ("node2",)
    assert result.summary == (
        "the allreduce phase failed on rank 1 on node2: RuntimeError: CUDA error: an illegal memory access"
    )


# --------------------------------------------------------------------------- transport


def test_a_fall_back_to_tcp_where_infiniband_exists_fails() -> None:
    job = nccl_job({"node2": "socket_fallback_ib_cluster_ibext.log"})
    results = judge_allreduce(job, CONFIG, {"node2": IB_FACTS})
    (result,) = failing(results)
    assert result.summary == (
        "NCCL used NET/Socket between nodes on node2 where InfiniBand mlx5_0 exists: fall-back to TCP"
    )
    assert result.hosts == ("node2",)
    assert result.details["transport"]["node2"] == "NET/Socket"
    assert result.details["fallback"]["node2"]["channels"] == {"NET/Socket": 6, "P2P/IPC": 17}


def test_sockets_are_fine_where_no_node_has_infiniband_unless_ib_is_expected() -> None:
    job = nccl_job({"node2": "socket_two_nodes_mpirun_prefix.log"})
    assert not failing(judge_allreduce(job, CONFIG, {}))
    config = Config().with_sections(AllreduceSection(expect_transport="ib"))
    (result,) = failing(judge_allreduce(job, config, {}))
    assert result.summary == (
        "NCCL used NET/Socket between nodes on node2 "
        'where [allreduce] expect_transport = "ib": fall-back to TCP'
    )


def test_infiniband_with_gdrdma_passes_and_says_so() -> None:
    logs = {host: "ib_gdrdma_h20_two_nodes.log" for host in ("node1", "node2", "node3")}
    result = only(judge_allreduce(nccl_job(logs), CONFIG, {h: IB_FACTS for h in logs}))
    assert result.status == "pass" and "; NCCL over NET/IB with GPUDirect RDMA" in result.summary
    assert result.details["transport"]["node1"] == "NET/IB with GDRDMA"


def test_infiniband_without_gdrdma_on_gpus_warns() -> None:
    job = nccl_job({"node1": "ib_gdrdma_h20_two_nodes.log"})
    job = replace_node(job, "node1", stderr=job.nodes[0].stderr.replace("/GDRDMA", ""))
    (warning,) = [r for r in judge_allreduce(job, CONFIG, {}) if r.status == "warn"]
    assert warning.hosts == ("node1",) and "without GPUDirect RDMA" in warning.summary


def test_gpudirect_through_a_proxy_or_over_pci_is_gpudirect_all_the_same() -> None:
    logs = {host: "ib_gdrdma_shared_2.27_mpirun.log" for host in ("node1", "node2", "node3")}
    job = nccl_job(logs)
    # NCCL 2.27 marks GPUDirect over PCI, through a proxy rank: "NET/IB/<dev>(<proxy>)/GDRDMA(PCI)".
    job = replace_node(job, "node2", stderr=job.nodes[1].stderr.replace("/GDRDMA/", "(3)/GDRDMA(PCI)/"))
    result = only(judge_allreduce(job, CONFIG, {h: IB_FACTS for h in logs}))
    assert result.status == "pass" and "NCCL over NET/IB with GPUDirect RDMA" in result.summary


def test_a_plugin_network_without_gpudirect_is_named_by_its_own_name() -> None:
    job = nccl_job({"node1": "ibext_v8_without_gdr_hpcx.log"})
    (warning,) = [r for r in judge_allreduce(job, CONFIG, {}) if r.status == "warn"]
    assert warning.hosts == ("node1",)
    assert warning.summary.startswith("NCCL used NET/IBext_v8 without GPUDirect RDMA on node1")


def test_a_log_that_only_names_the_socket_network_is_no_fall_back() -> None:
    # One node's log: "Using network Socket", then P2P and SHM inside the node, no connection to a
    # peer node. It says nothing of the network between nodes, so IB beside it fails nothing.
    job = nccl_job({"node2": "socket_single_node_2.26.2.log"})
    results = judge_allreduce(job, CONFIG, {"node2": IB_FACTS})
    assert not failing(results)
    assert (
        results[-1].details["transport"]["node2"]
        == "no network connection (NCCL chose Socket), NCCL 2.26.2+cuda12.8"
    )


def test_nccl_2_4_names_its_socket_interface_and_connects_over_infiniband() -> None:
    logs = {
        "node1": "ib_2.4.7_startup_socket_bootstrap_lines.log",
        "node2": "ib_2.4.7_ring_no_gdr_two_nodes.log",
    }
    results = judge_allreduce(nccl_job(logs), CONFIG, {h: IB_FACTS for h in logs})
    assert not failing(results)
    (warning,) = [r for r in results if r.status == "warn"]
    assert warning.hosts == ("node2",)
    assert warning.summary.startswith("NCCL used NET/IB without GPUDirect RDMA on node2")


def test_old_ring_lines_over_sockets_where_infiniband_exists_fail() -> None:
    job = nccl_job({"node3": "socket_2.4_aws_ring_old_format.log"})
    (result,) = failing(judge_allreduce(job, CONFIG, {"node3": IB_FACTS}))
    assert result.hosts == ("node3",) and "fall-back to TCP" in result.summary


def test_gpudirect_on_collnet_connections_counts_as_gpudirect() -> None:
    logs = {host: "collnet_sharp_gdrdma_warn.log" for host in ("node1", "node2", "node3")}
    results = judge_allreduce(nccl_job(logs), CONFIG, {h: IB_FACTS for h in logs})
    assert not failing(results)
    assert not [r for r in results if "GPUDirect" in r.summary and r.status == "warn"]
    (warning,) = [r for r in results if r.status == "warn"]
    assert warning.summary.startswith(
        "NCCL warned on node[1-3]: SHARP group create: Streaming Tree lock failed"
    )


def test_nccl_warnings_are_shown_once_per_node_set() -> None:
    job = nccl_job(
        {"node1": "ib_mixed_link_layers_2.12.12_warn.log", "node3": "ib_mixed_link_layers_2.12.12_warn.log"}
    )
    (warning,) = [r for r in judge_allreduce(job, CONFIG, {}) if r.status == "warn"]
    assert warning.summary == (
        "NCCL warned on node[1,3]: nvmlDeviceGetHandleByPciBusId() failed: Not Found (4 warnings)"
    )


# --------------------------------------------------------------------------- the check


def test_the_check_reports_a_job_that_did_not_run_and_judges_a_job(monkeypatch: pytest.MonkeyPatch) -> None:
    from checks.job import launch

    ctx = CheckContext(config=CONFIG, sessions=[], deadline=Deadline.after(10))
    skipped = JobNotRun("skip", "not launched: the rendezvous port 29500 is blocked on node1")
    monkeypatch.setattr(launch, "distributed_job", lambda _ctx: skipped)
    assert allreduce.CHECK.run(ctx) == [
        CheckResult("allreduce", "skip", "not launched: the rendezvous port 29500 is blocked on node1")
    ]
    blocked = dataclasses.replace(skipped, details={"blocked_by": "ports"})
    monkeypatch.setattr(launch, "distributed_job", lambda _ctx: blocked)
    (result,) = allreduce.CHECK.run(ctx)
    assert result.details == {"blocked_by": "ports", "item": "job_blocked"}
    monkeypatch.setattr(launch, "distributed_job", lambda _ctx: HEALTHY)
    assert [r.status for r in allreduce.CHECK.run(ctx)] == ["pass"]


def test_size_labels() -> None:
    assert [size_label(s) for s in (8, 1024, 1536, 64 * MIB, 1 << 30)] == [
        "8 B",
        "1 KiB",
        "1.5 KiB",
        "64 MiB",
        "1 GiB",
    ]


def test_a_world_of_one_rank_has_no_traffic_to_measure() -> None:
    def alone(document: dict[str, Any]) -> None:
        document["world_size"] = 1
        document["ranks"] = document["ranks"][:1]

    result = only(judge_allreduce(with_document(ONE_NODE, alone), CONFIG, {}))
    assert (result.status, result.summary) == (
        "skip",
        "one rank only: no all-reduce traffic to measure (results checked up to 4 MiB)",
    )


def _stopped_short(last: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        section = document["allreduce"]
        section["sweep"] = [*[r for r in section["sweep"] if r["size_bytes"] < last["size_bytes"]], last]
        section["sweep_complete"] = False

    return change


def test_a_sweep_stalled_on_tiny_ops_fails_though_no_pair_was_confirmed_slow() -> None:
    # A real lab run at 25% loss on one node: the sweep's budget stopped it at 1 KiB, each op
    # taking 0.48 s, while the node's pair test was slow once and fast on its re-test.
    stalled = {"size_bytes": 1024, "count": 256, "iters": 20, "warmup_iters": 5, "wrong": 0}
    stalled.update(time_s=0.482, algbw_gbps=2.12e-06, busbw_gbps=2.83e-06)
    results = judge_allreduce(with_document(HEALTHY, _stopped_short(stalled)), CONFIG, {})
    (failure,) = [r for r in results if r.status == "fail"]
    assert failure.summary.startswith("the all-reduce across every node stalled: one op of 1 KiB took 0.48 s")
    assert failure.hosts == () and failure.details["item"] == "stalled_sweep"
    # A healthy look-alike: the budget stopped a slow but moving sweep at 4 MiB, 30 ms an op.
    moving = {"size_bytes": 4 << 20, "count": 1 << 20, "iters": 20, "warmup_iters": 5, "wrong": 0}
    moving.update(time_s=0.03, algbw_gbps=0.14, busbw_gbps=0.19)
    results = judge_allreduce(with_document(HEALTHY, _stopped_short(moving)), CONFIG, {})
    assert [r.status for r in results] == ["pass"]
    assert "budget stopped it short of" in results[0].summary


def _last_sweep_wait(capture: str) -> float:
    rows = json.loads((Path(__file__).parent / "data" / "pairs" / f"{capture}.json").read_text())["sweep"]
    return float(rows[-1]["cpu_wait"])


def test_a_sweep_whose_ranks_waited_for_a_cpu_is_not_a_stall_but_a_slow_network_sweep_is() -> None:
    # The last sweep rows' CPU waits of two real lab runs: twelve nodes' ranks on two cores
    # (1.37 s waited a second of the ops), and three nodes, one throttled to 40 Mbit/s (0.01).
    stalled = {"size_bytes": 1024, "count": 256, "iters": 20, "warmup_iters": 5, "wrong": 0}
    stalled.update(time_s=0.482, algbw_gbps=2.12e-06, busbw_gbps=2.83e-06)
    crowded = {**stalled, "cpu_wait": _last_sweep_wait("lab_twelve_nodes_in_turn")}
    result = only(judge_allreduce(with_document(HEALTHY, _stopped_short(crowded)), CONFIG, {}))
    assert result.status == "pass"
    assert "its ranks' threads waited 1.4 s for a CPU a second of its ops" in result.summary
    throttled = {**stalled, "cpu_wait": _last_sweep_wait("lab_three_nodes_one_throttled")}
    results = judge_allreduce(with_document(HEALTHY, _stopped_short(throttled)), CONFIG, {})
    assert [r.details.get("item") for r in results if r.status == "fail"] == ["stalled_sweep"]
