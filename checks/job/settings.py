"""The settings of the checks judged in the job (``[allreduce]``, ``[rails]``, ``[ddp]``, ``[compute]``): kept
here because the job reads them to run its phases, and declared by those checks
(``checks/<check>/settings.py``); and what starting the job adds to a run's expected duration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from preflight.settings import Cost

# Seconds, measured on the lab cluster (3 nodes, 2 shared cores): the job's start (the hosts fork
# their ranks, which join). Every check judged in the job lists it; a run counts it once.
JOB_START = Cost.fixed("the job's start", 0.4)
# The largest all-reduce message of the sweep and the pair tests' message, by device: gloo between
# CPU nodes reaches its plateau by a few MiB; a GPU fabric needs large messages.
CPU_MAX_BYTES = 16 << 20
GPU_MAX_BYTES = 1 << 30
CPU_PAIR_BYTES = 4 << 20
GPU_PAIR_BYTES = 256 << 20


@dataclass(frozen=True)
class AllreduceSection:
    """All-reduce bandwidth, measured as nccl-tests does, and how slow is too slow."""

    # Seconds the whole-world sweep of message sizes may take; sizes stop growing past it.
    sweep_budget_s: float = 6.0
    # Each size of the sweep is this many times the one before (nccl-tests' -f); the top two
    # sizes are always a doubling apart. --deep sweeps with 2.
    sweep_factor: Literal[2, 4] = 4
    # Largest message of the sweep in bytes; 0 picks by device (16 MiB on CPU, 1 GiB on GPU).
    max_bytes: int = 0
    # Message size of the pairwise tests; 0 picks by device (4 MiB on CPU, 256 MiB on GPU).
    pair_bytes: int = 0
    # Seconds one pair test may take (a 100x slow link is named, not waited out).
    pair_budget_s: float = 2.0
    warmup_iters: int = 5
    iters: int = 20
    # A pair is slow (confirmed by a re-test) below the median of the run's healthy pairs minus
    # 2.5 robust standard deviations of them: at most quiet_slow_ratio x that median on a quiet
    # fabric (so a node 20% slow is named), at least slow_ratio x the typical pair on a noisy one.
    # With fewer than 8 healthy pairs (under 5 nodes) the threshold is slow_ratio alone.
    slow_ratio: float = 0.5
    quiet_slow_ratio: float = 0.9
    # Absolute floors, GB/s of busbw at the largest size; 0 means none.
    min_busbw_gbps: float = 0.0
    min_pair_busbw_gbps: float = 0.0
    # "auto": pairwise tests when there are 3 or more nodes; "always"; "never".
    pairwise: Literal["auto", "always", "never"] = "auto"
    # Which pairs the first wave tests. "full": every pair (n-1 rounds): finds any slow link.
    # "sparse": one round of disjoint pairs covering every node (a few rounds with re-tests at
    # any size): finds every slow node, but a slow link only if its pair was drawn.
    # "auto": full up to 16 nodes, sparse above. The sparse plan's partners are drawn anew each
    # run, so that no cut between node sets stays uncrossed run after run.
    pair_plan: Literal["auto", "full", "sparse"] = "auto"
    # The sparse plan's draw (the report's pair_seed): set it to replay a run's pairs; 0 draws.
    pair_seed: int = 0
    # The network NCCL must use between nodes: "auto" (IB where the nodes have IB devices), "ib", "socket".
    expect_transport: Literal["auto", "ib", "socket"] = "auto"
    # Interface for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME; empty: the route to the master.
    socket_ifname: str = ""
    # Seconds a collective may wait for a peer before the job gives up on it: how soon a dead
    # node is noticed. torchrun's own defaults are many minutes.
    collective_timeout_s: float = 20.0
    # Seconds the ranks may take to join (rendezvous and process group): longer, since eight
    # processes per node importing torch from a cold shared filesystem start far apart.
    join_timeout_s: float = 60.0

    def sweep_top_bytes(self, gpu: bool | None) -> int:
        """The sweep's largest message: ``max_bytes``, else by device (a CPU's where not known)."""
        return self.max_bytes or (GPU_MAX_BYTES if gpu else CPU_MAX_BYTES)

    def pair_message_bytes(self, gpu: bool | None) -> int:
        """The pair tests' message (and the rail tests'): ``pair_bytes``, else by device."""
        return self.pair_bytes or (GPU_PAIR_BYTES if gpu else CPU_PAIR_BYTES)


@dataclass(frozen=True)
class RailsSection:
    """Each rail between two nodes tested on its own (a GPU and the NIC nearest it, or one of a CPU
    node's interfaces), against the same rail of its neighbours in a ring."""

    # The interfaces of a CPU node's rails, the same names on every node (GPU nodes' rails are
    # their GPUs); empty: GLOO_SOCKET_IFNAME's list where a node names several.
    interfaces: tuple[str, ...] = ()
    # A rail test below this fraction of what a healthy test of the rail does is slow (re-tested,
    # then named).
    slow_ratio: float = 0.5
    # Seconds one rail test may take; its message is [allreduce]'s pair message.
    test_budget_s: float = 2.0
    # "auto": every rail of nodes with two or more; "never".
    test: Literal["auto", "never"] = "auto"


@dataclass(frozen=True)
class DdpSection:
    """The DDP smoke-training job."""

    steps: int = 30
    # A rank whose compute step takes longer than this multiple of the median is a straggler...
    straggler_ratio: float = 1.5
    # ...and only when it is also slower by at least this many seconds per step (noise floor).
    straggler_min_excess_s: float = 0.005
    # The global loss must end below this fraction of where it started.
    max_final_loss_ratio: float = 0.9


@dataclass(frozen=True)
class ComputeSection:
    """The compute burn every rank runs inside the job, judged against the other ranks."""

    # Seconds every rank multiplies matrices (bf16 GEMM on a GPU, fp32 on a CPU).
    burn_s: float = 1.0
    # Side of the square matrices; 0 picks by device (8192 on a GPU, 256 on a CPU).
    matrix: int = 0
    # A rank below this fraction of the median rank's throughput is slow (GPU ranks)...
    slow_ratio: float = 0.8
    # ...and CPU ranks (a CPU-only cluster): processes sharing cores vary with the scheduler.
    cpu_slow_ratio: float = 0.5
    # Absolute floor in TFLOPS per rank; 0 means none (ranks are compared with each other).
    min_tflops: float = 0.0
