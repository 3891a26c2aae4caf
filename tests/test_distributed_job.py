"""The job script run for real, started as the launcher starts it (gloo, on this machine: a script
host per node that starts the node's ranks): one node with three ranks, and three "nodes" on 127.0.0.1
(three hosts) so that pairs run between nodes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from checks.intranode.phase import INTRANODE_BYTES
from checks.job import launch
from checks.job.node.harness import Job, MissingSetting, StoppedByPeer, wait_for_master
from checks.job.node.markers import PHASE_MARKER, RANK_MARKER, parse_result_line
from checks.job.node.pair_tests import PairTests
from checks.job.node.pattern import count_unlike, expected_sums, fill_periodic, pattern_values
from checks.job.node.planning import bus_bandwidth, cut_short_time, pair_size, plan_iterations, sweep_sizes
from checks.job.node.ranks_host import _spawn_rank, rank_environment
from checks.job.node.sweep import sweep
from checks.job.outcome import JobOutcome, NodeOutcome
from checks.job.pairs import plan_rounds
from checks.job.phases import JOB_PHASES
from checks.job.settings import AllreduceSection, ComputeSection
from checks.job.stalled_node import read_progress, stalled_node
from preflight.check import CheckContext
from preflight.config import Config
from preflight.deadline import Deadline
from preflight.probes import STREAM_BOOTSTRAP, node_script
from tests.test_bundle import _oldest_python

PYTHON = sys.executable
MIB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def job_args(n_nodes: int, phases: Sequence[str] = ("allreduce", "ddp"), **allreduce: Any) -> dict[str, Any]:
    """Arguments as the launcher makes them (``launch._job_args``) from the configuration's
    defaults, for CPU nodes, with the all-reduce sized for a two-core machine (a short sweep to
    4 MiB, 1 MiB pairs, every pair tested from two nodes on); ``allreduce`` changes more of it."""
    sized = {"sweep_budget_s": 3.0, "max_bytes": 4 * MIB, "pair_bytes": 1 * MIB, "pair_budget_s": 0.5,
             "warmup_iters": 3, "iters": 10, "pairwise": "always", "pair_plan": "full"}  # fmt: skip
    config = Config().with_sections(AllreduceSection(**{**sized, **allreduce}))
    ctx = CheckContext(config=config, sessions=[], deadline=Deadline.after(60))
    return launch._job_args(ctx, tuple(phases), [f"node{i + 1}" for i in range(n_nodes)], False)


@dataclass
class LocalNode:
    """One script host standing in for a node."""

    node_rank: int
    returncode: int | None
    stdout: str
    stderr: str
    killed: bool = False  # ended here, the way the launcher ends the others after a failure


def host_request(n_nodes: int, nproc: int, node_rank: int, port: int, args: Mapping[str, Any]) -> bytes:
    """What the launcher sends one node's script host: its ranks' places, and the job."""
    settings = {
        "nproc": nproc,
        "node_rank": node_rank,
        "nnodes": n_nodes,
        "rank_offset": node_rank * nproc,
        "world_size": n_nodes * nproc,
        "master_addr": "127.0.0.1",
        "master_port": port,
        "env": {"OMP_NUM_THREADS": "1"},
    }
    return launch.host_request({"host": settings, "job": dict(args)})


def run_job(
    n_nodes: int,
    nproc: int,
    args: Mapping[str, Any],
    *,
    port: int | None = None,
    ports: Mapping[int, int] | None = None,
    while_running: Callable[[list[subprocess.Popen[str]]], None] | None = None,
    grace_s: float = 3.0,
    timeout_s: float = 180.0,
) -> list[LocalNode]:
    """Start one script host per node at once, each given the job as the launcher gives it, and
    wait; once a node fails, give the others ``grace_s`` and end them (as the launcher does).
    ``ports`` gives some nodes another master port than ``port``."""
    port = port or free_port()
    host_source = node_script(launch.HOST_SCRIPT)
    command = [PYTHON, "-c", STREAM_BOOTSTRAP, str(len(host_source)), "preflight-facts", launch.SERVE]
    procs = []
    for rank in range(n_nodes):
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert proc.stdin is not None
        # The host's stdin stays open while the job runs, as the launcher's channel does.
        proc.stdin.buffer.write(
            host_source + host_request(n_nodes, nproc, rank, (ports or {}).get(rank, port), args)
        )
        proc.stdin.buffer.flush()
        procs.append(proc)
    if while_running is not None:
        while_running(procs)
    deadline = time.monotonic() + timeout_s
    first_failure: float | None = None
    killed: set[int] = set()
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        if first_failure is None and any(c not in (None, 0) for c in codes):
            first_failure = time.monotonic()
        if first_failure is not None and time.monotonic() - first_failure > grace_s:
            break
        time.sleep(0.1)
    for rank, proc in enumerate(procs):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            killed.add(rank)
    nodes = []
    for rank, proc in enumerate(procs):
        out, err = proc.communicate()
        nodes.append(LocalNode(rank, proc.returncode, out, err, rank in killed))
    return nodes


def document_of(nodes: Sequence[LocalNode]) -> dict[str, Any]:
    found = [d for d in (parse_result_line(n.stdout) for n in nodes) if d is not None]
    assert len(found) == 1, [n.stderr[-2000:] for n in nodes]
    return found[0]


def markers(stderr: str, marker: str) -> list[dict[str, Any]]:
    return [json.loads(line.split(marker, 1)[1]) for line in stderr.splitlines() if marker in line]


@pytest.fixture(scope="module")
def one_node() -> tuple[list[LocalNode], dict[str, Any], float]:
    """One node running every phase with the settings the launcher sends."""
    started = time.monotonic()
    nodes = run_job(1, 3, job_args(1, phases=JOB_PHASES))
    return nodes, document_of(nodes), time.monotonic() - started


@pytest.fixture(scope="module")
def three_nodes() -> tuple[list[LocalNode], dict[str, Any], float]:
    started = time.monotonic()
    nodes = run_job(3, 1, job_args(3))
    return nodes, document_of(nodes), time.monotonic() - started


# --------------------------------------------------------------------------- one node, three ranks


def test_one_node_with_three_ranks_measures_a_growing_correct_sweep(
    one_node: tuple[list[LocalNode], dict[str, Any], float],
) -> None:
    nodes, document, _ = one_node
    assert [n.returncode for n in nodes] == [0]
    assert document["world_size"] == 3
    assert document["phase_errors"] == {}
    assert [(r["rank"], r["node_rank"], r["local_rank"]) for r in document["ranks"]] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 0, 2),
    ]
    rows = document["allreduce"]["sweep"]
    sizes = [row["size_bytes"] for row in rows]
    assert sizes == sorted(set(sizes)) and sizes[0] == 1024 and len(sizes) >= 4
    assert all(row["busbw_gbps"] > 0 and row["wrong"] == 0 and row["iters"] >= 1 for row in rows)
    for row in rows:
        algbw, busbw = bus_bandwidth(row["size_bytes"], row["time_s"], 3)
        assert row["algbw_gbps"] == pytest.approx(algbw) and row["busbw_gbps"] == pytest.approx(busbw)
    assert document["allreduce"]["pairs"] == []  # one node: no pairs between nodes


def test_one_node_trains_with_identical_checksums(
    one_node: tuple[list[LocalNode], dict[str, Any], float],
) -> None:
    _, document, _ = one_node
    ddp = document["ddp"]
    assert ddp["joined"] == 3 and ddp["ones_allreduce"] == 3.0
    assert len(ddp["losses"]) == 30 and ddp["loss_last"] < 0.5 * ddp["loss_first"]
    assert len(set(ddp["param_hashes"])) == 1 and len(set(ddp["grad_hashes"])) == 1
    assert len(set(ddp["param_checksums"])) == 1
    assert len(ddp["compute_step_s"]) == 3 and all(t > 0 for t in ddp["compute_step_s"])
    assert ddp["compute_work"] == "16-32-1 MLP forward+backward on CPU"
    assert len(ddp["wall_step_s"]) == 3


def test_one_node_burns_and_measures_its_inside_path_with_the_launchers_settings(
    one_node: tuple[list[LocalNode], dict[str, Any], float],
) -> None:
    nodes, document, _ = one_node
    assert [m["phase"] for m in markers(nodes[0].stderr, PHASE_MARKER)] == list(JOB_PHASES)
    compute = document["compute"]
    assert compute["burn_s"] == Config().section(ComputeSection).burn_s
    assert [r["rank"] for r in compute["ranks"]] == [0, 1, 2]
    assert all(r["dtype"] == "fp32" and r["flops_per_s"] > 0 for r in compute["ranks"])
    intranode = document["intranode"]
    assert intranode["skipped"] is None and len(intranode["ranks"]) == 3
    assert all(r["size_bytes"] == INTRANODE_BYTES and r["busbw_gbps"] > 0 for r in intranode["ranks"])


# --------------------------------------------------------------------------- three nodes on localhost


def test_three_nodes_measure_every_planned_pair(
    three_nodes: tuple[list[LocalNode], dict[str, Any], float],
) -> None:
    nodes, document, _ = three_nodes
    assert [n.returncode for n in nodes] == [0, 0, 0]
    assert document["nodes"] == ["node1", "node2", "node3"]
    pairs = document["allreduce"]["pairs"]
    first = [p for p in pairs if not p["retest"]]
    assert [(p["round"], tuple(p["nodes"])) for p in first] == [
        (i, pair) for i, pairs_of_round in enumerate(plan_rounds(3, "full")) for pair in pairs_of_round
    ]
    for p in pairs:
        assert p["ranks"] == sorted(p["nodes"])  # one rank per node here
        # 1 MiB as asked, unless a busy machine made the pair look too slow for it.
        assert 64 * 1024 <= p["size_bytes"] <= 1 * MIB and p["iters"] >= 1 and p["busbw_gbps"] > 0
        assert p["busbw_gbps"] == pytest.approx(bus_bandwidth(p["size_bytes"], p["time_s"], 2)[1])
    # Re-tests, if noise on two cores made one pair look slow, come after the first rounds.
    assert all(p["round"] >= 3 for p in pairs if p["retest"])


def test_three_nodes_train_and_agree(three_nodes: tuple[list[LocalNode], dict[str, Any], float]) -> None:
    _, document, _ = three_nodes
    ddp = document["ddp"]
    assert ddp["joined"] == 3 and ddp["ones_allreduce"] == 3.0
    assert ddp["loss_last"] < 0.5 * ddp["loss_first"]
    assert len(set(ddp["param_hashes"])) == 1 and len(set(ddp["grad_checksums"])) == 1
    assert {r["node_rank"] for r in document["ranks"]} == {0, 1, 2}


def test_every_rank_says_where_it_runs_and_which_phase_it_started(
    three_nodes: tuple[list[LocalNode], dict[str, Any], float],
) -> None:
    nodes, _, _ = three_nodes
    for node in nodes:
        (rank,) = markers(node.stderr, RANK_MARKER)
        assert rank["node_rank"] == node.node_rank and rank["pid"] > 0
        assert [m["phase"] for m in markers(node.stderr, PHASE_MARKER)] == ["allreduce", "ddp"]


def test_a_healthy_job_beats_its_progress_and_counters_and_names_no_stalled_node(
    three_nodes: tuple[list[LocalNode], dict[str, Any], float],
) -> None:
    nodes, _, _ = three_nodes
    progress = [read_progress(node.stderr) for node in nodes]
    for seen in progress:
        beats = seen["allreduce"]["ranks"]
        assert len(beats) == 1 and all(b["ops"] and b["done"] for b in next(iter(beats.values()))[-1:])
        # The node's counters: at the phase's start and since, with this machine's addresses.
        net = seen["allreduce"]["net"]
        assert len(net) >= 2 and "Tcp.RetransSegs" in net[0]["net"]["counters"]
    outcome = JobOutcome(
        phases=("allreduce", "ddp"),
        backend="gloo",
        master="127.0.0.1",
        port=0,
        nodes=tuple(
            NodeOutcome(f"node{n.node_rank + 1}", n.node_rank, 0, False, False, False, "", progress=p)
            for n, p in zip(nodes, progress, strict=True)
        ),
        duration_s=1.0,
    )
    assert stalled_node(outcome, "allreduce") is None and stalled_node(outcome, "ddp") is None


def test_the_job_plans_its_sweep_within_its_budget(
    three_nodes: tuple[list[LocalNode], dict[str, Any], float],
) -> None:
    _, document, _ = three_nodes
    rows = document["allreduce"]["sweep"]
    # What the sweep planned to spend on timed and warm-up ops fits the 3 s budget it was given.
    planned = sum(row["time_s"] * (row["iters"] + row["warmup_iters"]) for row in rows)
    assert planned <= 3.0, planned


# --------------------------------------------------------------------------- pure helpers of the job


def test_sweep_sizes_double_from_one_kib_to_the_maximum() -> None:
    assert sweep_sizes(8192, factor=2) == [1024, 2048, 4096, 8192]
    assert sweep_sizes(5000, factor=2) == [1024, 2048, 4096, 5000]


def test_a_sweep_by_fours_still_measures_the_top_octave_at_two_sizes() -> None:
    assert sweep_sizes(16 << 20, factor=4) == [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                               1 << 20, 4 << 20, 8 << 20, 16 << 20]  # fmt: skip
    assert sweep_sizes(1 << 30, factor=4)[-3:] == [256 << 20, 512 << 20, 1 << 30]
    assert sweep_sizes(8 << 10, factor=4) == [1 << 10, 4 << 10, 8 << 10]
    assert sweep_sizes(100, factor=4) == [100]


def test_iterations_fit_the_time_left_with_at_least_one_timed() -> None:
    assert plan_iterations(0.001, 10.0, 4, 20) == (4, 20)
    assert plan_iterations(1.0, 5.5, 4, 20) == (0, 4)  # one op kept for the correctness check
    assert plan_iterations(3.0, 2.0, 4, 20) == (0, 1)


def test_a_stalled_probe_that_cut_a_pair_test_short_stays_in_its_time() -> None:
    # A real lab run at 10% loss on one node: a re-test of its pair timed 1 op at 5.6 ms, all the
    # 2 s budget left room for after its probe (so the probe took 0.4 s or more); the pair ran 30x
    # slow over 20 ops elsewhere in the run. The probe stays in the mean: the pair is slow.
    assert cut_short_time(0.0056, 1, 20, 0.5) == (0.5 + 0.0056) / 2
    # A healthy pair: all 20 ops fit, or the probe was an op like the others.
    assert cut_short_time(0.0056, 20, 20, 0.5) == 0.0056
    assert cut_short_time(0.2, 8, 20, 0.25) == 0.2  # a slow fabric's ops: 8 fit, none stalled


def test_a_pair_too_slow_for_its_message_gets_a_smaller_one() -> None:
    assert pair_size(4 * MIB, 64 * 1024, 0.0001, 2.0) == 4 * MIB  # 6.4 ms estimated: as asked
    # 64 KiB in 0.05 s: 4 MiB would take 3.2 s; a third of 2 s fits 832 KiB, rounded down to 512 KiB.
    assert pair_size(4 * MIB, 64 * 1024, 0.05, 2.0) == 512 * 1024
    assert pair_size(4 * MIB, 64 * 1024, 5.0, 2.0) == 64 * 1024  # never below the probe


def test_bus_bandwidth_is_nccl_tests_definition() -> None:
    algbw, busbw = bus_bandwidth(1_000_000_000, 1.0, 8)
    assert algbw == pytest.approx(1.0) and busbw == pytest.approx(1.75)
    assert bus_bandwidth(1000, 0.0, 2) == (0.0, 0.0)


def test_the_correctness_pattern_sums_exactly() -> None:
    for world in (1, 2, 3, 11, 12, 1000):
        sums = expected_sums(world)
        assert sums == [sum(pattern_values(k, r) for r in range(world)) for k in range(len(sums))]
        assert max(sums) < 2**24  # exact in float32


@pytest.mark.parametrize("count", [1, 10, 11, 12, 4096, 100_003])
def test_the_sums_check_passes_an_exact_sum_and_counts_every_wrong_element(count: int) -> None:
    """What the sweep's correctness op does, on real tensors: each rank's pattern, their sum as
    the all-reduce makes it, then the count of elements that are not the exact sum."""
    import torch

    world = 3
    total = torch.zeros(count, dtype=torch.float32)
    for rank in range(world):
        mine = torch.full((count,), -1.0)
        fill_periodic(torch, mine, [pattern_values(k, rank) for k in range(len(expected_sums(world)))])
        total += mine
    assert count_unlike(torch, total, expected_sums(world)) == 0
    total[count // 2] += 1.0  # one element off
    assert count_unlike(torch, total, expected_sums(world)) == 1
    if count >= 4096:
        # A chunk delivered at the wrong offset (a power of two away): most of it is wrong.
        total[:1024] = total[512:1536].clone()
        assert count_unlike(torch, total, expected_sums(world)) > 900


def test_a_rank_waits_for_a_master_that_starts_late_and_gives_up_on_one_that_never_does() -> None:
    port = free_port()
    listener = socket.socket()

    def listen_later() -> None:
        time.sleep(0.3)
        listener.bind(("127.0.0.1", port))
        listener.listen()

    late = threading.Thread(target=listen_later)
    late.start()
    try:
        assert wait_for_master("127.0.0.1", port, 20.0)
    finally:
        late.join()
        listener.close()
    assert not wait_for_master("127.0.0.1", free_port(), 0.2)  # nobody listens there
    assert not wait_for_master("no-such-host.invalid", port, 5.0)  # a name that does not resolve


class _SlowLink:
    """A stand-in for torch.distributed on one rank: every all-reduce takes size / rate seconds."""

    class ReduceOp:
        MAX = "max"
        SUM = "sum"

    def __init__(self, rate_bytes_per_s: float) -> None:
        self.rate = rate_bytes_per_s
        self.ops = 0
        self.busy_s = 0.0  # the link's own time: what the ops cost, whatever else the machine does

    def all_reduce(self, tensor: Any, op: Any = None, group: Any = None) -> None:
        self.ops += 1
        if op is None:
            seconds = tensor.numel() * tensor.element_size() / self.rate
            self.busy_s += seconds
            time.sleep(seconds)

    def all_gather(self, out: list[Any], tensor: Any, group: Any = None) -> None:
        out[0].copy_(tensor)

    def new_group(self, ranks: Any = None, timeout: Any = None, backend: Any = None) -> object:
        return object()

    def destroy_process_group(self, group: Any = None) -> None:
        pass


def test_a_link_100x_too_slow_costs_seconds_not_minutes() -> None:
    torch = pytest.importorskip("torch")
    dist = _SlowLink(rate_bytes_per_s=10e6)  # 10 MB/s: a 64 MiB op alone would take 6.7 s
    job = Job(torch, dist, job_args(1, sweep_budget_s=2.0, max_bytes=64 * MIB))
    result = sweep(job, job.settings("allreduce"))
    assert dist.busy_s < 3.0, dist.busy_s
    assert not result["sweep_complete"] and result["sweep_stopped"]
    sizes = [row["size_bytes"] for row in result["sweep"]]
    assert sizes[0] == 1024 and sizes[-1] < 64 * MIB
    assert all(row["iters"] >= 1 for row in result["sweep"])


def test_a_pair_on_a_link_100x_too_slow_stays_within_its_budget() -> None:
    torch = pytest.importorskip("torch")
    dist = _SlowLink(rate_bytes_per_s=2e6)  # 2 MB/s
    job = Job(torch, dist, job_args(2, pair_bytes=256 * MIB, pair_budget_s=2.0))
    job.ranks_of_node = {0: [0], 1: [1]}  # this rank is node 0's; the pair is nodes 0 and 1
    (result,) = PairTests(job).run([[(0, 1)]], job.settings("allreduce"), 0, retest=False)
    assert dist.busy_s < 3.0, dist.busy_s  # 256 MiB at 2 MB/s would be 134 s for one op
    assert 64 * 1024 <= result["size_bytes"] < 256 * MIB and result["iters"] >= 1


class _TwoRanks(_SlowLink):
    """One rank's torch.distributed whose MAX reductions also see the other rank's ``other`` flag:
    the other rank failing an allocation, or holding less free memory."""

    def __init__(self, other: float) -> None:
        super().__init__(rate_bytes_per_s=1e12)
        self.other = other
        self.groups_made = 0
        self.groups_destroyed = 0

    def all_reduce(self, tensor: Any, op: Any = None, group: Any = None) -> None:
        if op == self.ReduceOp.MAX and tensor.numel() == 1:
            tensor.clamp_(min=self.other)
        super().all_reduce(tensor, op, group)

    def new_group(self, ranks: Any = None, timeout: Any = None, backend: Any = None) -> object:
        self.groups_made += 1
        return object()

    def destroy_process_group(self, group: Any = None) -> None:
        self.groups_destroyed += 1


class _NoMemory:
    """torch whose allocations fail the way CUDA's do when another process holds the GPU."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def zeros(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB; GPU 0 has 79.10 GiB in use")


def test_a_rank_out_of_memory_names_its_cause_and_the_others_stop_without_a_hang() -> None:
    torch = pytest.importorskip("torch")
    failing = Job(_NoMemory(torch), _TwoRanks(other=0.0), job_args(1))
    with pytest.raises(RuntimeError, match=r"cannot allocate 4096 bytes for the sweep: .*CUDA out of memory"):
        failing.allocate(1024, "the sweep")
    peer = Job(torch, _TwoRanks(other=1.0), job_args(1))  # the other rank failed
    with pytest.raises(StoppedByPeer):
        peer.allocate(1024, "the sweep")
    # The peer's phase records no error of its own: the failing rank's message is the one reported.
    errors: dict[str, Any] = {}
    document: dict[str, Any] = {}
    peer.run_phase("allreduce", lambda: peer.allocate(1024, "the sweep"), document, errors)
    assert "allreduce" not in document and errors == {}


def test_pair_communicators_are_made_once_reused_by_retests_and_destroyed() -> None:
    torch = pytest.importorskip("torch")
    dist = _TwoRanks(other=0.0)
    job = Job(torch, dist, job_args(3, pair_bytes=64 * 1024, pair_budget_s=0.2))
    job.ranks_of_node = {0: [0], 1: [1], 2: [2]}
    tests = PairTests(job)
    tests.run([[(0, 1)], [(0, 2)], [(1, 2)]], job.settings("allreduce"), 0, retest=False)
    tests.run([[(0, 1)], [(1, 2)]], job.settings("allreduce"), 3, retest=True)
    assert dist.groups_made == 3
    tests.destroy()
    assert dist.groups_destroyed == 3 and tests.groups == {}


def test_a_setting_the_launcher_did_not_send_is_named_not_made_up() -> None:
    torch = pytest.importorskip("torch")
    args = job_args(1)
    del args["allreduce"]["sweep_factor"]
    job = Job(torch, _SlowLink(rate_bytes_per_s=1e12), args)
    with pytest.raises(
        MissingSetting, match=r"the launcher sent no 'sweep_factor' in the job's arguments\['allreduce'\]"
    ):
        sweep(job, job.settings("allreduce"))
    del args["join_timeout_s"]
    with pytest.raises(MissingSetting, match="the launcher sent no 'join_timeout_s'"):
        Job(torch, _SlowLink(rate_bytes_per_s=1e12), args)


def test_a_rank_started_in_a_fresh_interpreter_finds_every_module_in_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """What the node's host does where CUDA started in it and it cannot fork: the rank is a new
    interpreter given the host's script, the bundle, and nothing of preflight on its path."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)
    place = {"nproc": 1, "node_rank": 0, "nnodes": 1, "rank_offset": 0, "world_size": 1,
             "master_addr": "127.0.0.1", "master_port": free_port(), "env": {}}  # fmt: skip
    args = job_args(1, phases=["allreduce"], sweep_budget_s=1.0, max_bytes=64 * 1024)
    pid = _spawn_rank(rank_environment(place, 0), args, launch.job_script(args))
    _, status = os.waitpid(pid, 0)
    out, err = capfd.readouterr()
    assert os.waitstatus_to_exitcode(status) == 0, err[-3000:]
    document = parse_result_line(out)
    assert document is not None and document["phase_errors"] == {}, err[-3000:]
    assert document["world_size"] == 1 and document["allreduce"]["sweep"]


def test_the_job_bundle_runs_on_the_oldest_python_and_says_when_torch_is_missing(tmp_path: Path) -> None:
    """Every module of the job imports on Python 3.8 from the bundle alone (isolated: nothing of
    preflight on the path); without torch there, rank 0 prints a document that says so."""
    python = _oldest_python()
    assert python is not None, "no Python 3.8 interpreter on this machine (pyenv's 3.8 is expected)"
    args = job_args(1)
    done = subprocess.run(
        [python, "-I", "-", json.dumps(args)],
        input=launch.job_script(args),
        capture_output=True,
        cwd=tmp_path,
        env={"RANK": "0", "PATH": os.environ.get("PATH", "")},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    document = parse_result_line(done.stdout.decode())
    assert document is not None
    (error,) = document["phase_errors"]["init"]
    assert error["message"].startswith("torch cannot be imported on ")
    assert (error["rank"], error["local_rank"]) == (None, None)
