"""The compute phase: every rank burns matrix multiplications at once for the same time (bf16, or
fp16, on a GPU timed with CUDA events; fp32 on a CPU), with what its GPU said through NVML
meanwhile; every rank's throughput, by rank. A rank slow in that burn is re-tested at once in a
shorter one beside a few ranks that were typical (``retest_plan``), so that a rank slowed once by
the scheduler or a passing load is told apart from one that stays slow.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from checks.job.node.nvml import NvmlSampler

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from checks.job.node.harness import Job

# Matrix sides: one GPU GEMM of 8192 is ~1.1 TFLOP (about 2 ms on an H100); one CPU matmul of
# 256 is 34 MFLOP (a few ms on one core), fine grained enough for a burn of a second.
GPU_MATRIX = 8192
CPU_MATRIX = 256
# Each timed batch grows until it covers this long, so event and timer overheads stay small.
BATCH_TARGET_S = 0.05
MAX_BATCH = 1024
# The re-test burns this share of burn_s, the suspects beside up to RETEST_CONTROLS typical ranks.
RETEST_SHARE = 0.5
RETEST_CONTROLS = 3
# A CPU rank's turn in the re-test burns at least this long (a CPU matmul of 256 takes a few ms).
MIN_TURN_S = 0.1


def run(job: Job) -> dict[str, Any]:
    """Every rank's burn, started together after a barrier; the re-test when a rank was slow."""
    settings = job.settings("compute")
    burn_s = float(settings["burn_s"])
    matrix = int(settings["matrix"])
    start = time.perf_counter()
    job.barrier()
    mine = burn(job.torch, job.device, job.cuda, burn_s, matrix)
    mine.update(rank=job.rank, node_rank=job.node_rank, local_rank=job.local_rank, hostname=job.hostname)
    ranks = job.gather(mine)
    result: dict[str, Any] = {"burn_s": burn_s, "ranks": ranks}
    ratio = float(settings["slow_ratio"] if job.cuda else settings["cpu_slow_ratio"])
    plan = retest_plan(ranks, ratio, float(settings["min_flops_per_s"]))
    if plan is not None:
        suspects, controls = plan
        result["retest"] = retest(job, suspects, controls, burn_s * RETEST_SHARE, matrix)
    result["duration_s"] = time.perf_counter() - start
    return result


def _flops(record: Any) -> float | None:
    value = record.get("flops_per_s") if isinstance(record, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def retest_plan(
    ranks: Sequence[Mapping[str, Any]], slow_ratio: float, min_flops_per_s: float
) -> tuple[list[int], list[int]] | None:
    """The ranks to re-test and the typical ranks to re-test them beside; None when no rank was
    slow. Every rank computes the same plan from the same gathered burn.

    A suspect is below ``slow_ratio`` of the median rank, or below ``min_flops_per_s`` when that
    floor is set (the judge's own rule). The controls are the other ranks nearest the median,
    those on the suspects' nodes last: a node-wide cause (a CPU quota, a power supply) would
    slow its other ranks too, and they would hide it.
    """
    measured = sorted(v for r in ranks if (v := _flops(r)) is not None)
    if not measured:
        return None
    middle = len(measured) // 2
    median = measured[middle] if len(measured) % 2 else (measured[middle - 1] + measured[middle]) / 2

    def slow(value: float) -> bool:
        return value < slow_ratio * median or (min_flops_per_s > 0 and value < min_flops_per_s)

    suspects = sorted(int(r["rank"]) for r in ranks if (v := _flops(r)) is not None and slow(v))
    if not suspects:
        return None
    suspect_nodes = {r.get("node_rank") for r in ranks if int(r["rank"]) in suspects}
    others = [(r, v) for r in ranks if (v := _flops(r)) is not None and int(r["rank"]) not in suspects]
    others.sort(
        key=lambda rv: (rv[0].get("node_rank") in suspect_nodes, abs(rv[1] - median), int(rv[0]["rank"]))
    )
    return suspects, sorted(int(r["rank"]) for r, _ in others[:RETEST_CONTROLS])


def retest(
    job: Job, suspects: Sequence[int], controls: Sequence[int], burn_s: float, matrix: int
) -> dict[str, Any]:
    """The suspects and the controls burn again for ``burn_s``, after a barrier of every rank (the
    others wait in the gather that follows); their throughput, by rank.

    GPUs burn together, under the same load as in the first burn: a node whose power or cooling
    gives way only when all its GPUs work must not pass because one burned alone. CPU ranks burn
    in turn, each alone for ``burn_s`` split among them: ranks that share cores (several per node,
    or nodes on one machine) slow each other down by the scheduler's luck, and only a rank slow on
    cores of its own is slow.
    """
    retested = [*suspects, *controls]
    mine: dict[str, Any] | None = None
    if job.cuda:
        job.barrier()
        if job.rank in retested:
            mine = burn(job.torch, job.device, job.cuda, burn_s, matrix)
    else:
        turn_s = max(MIN_TURN_S, burn_s / max(1, len(retested)))
        for rank in retested:
            job.barrier()
            if job.rank == rank:
                mine = burn(job.torch, job.device, job.cuda, turn_s, matrix)
    if mine is not None:
        mine["rank"] = job.rank
    burned = [r for r in job.gather(mine) if r is not None]
    in_turn = not job.cuda
    return {
        "burn_s": burn_s,
        "suspects": list(suspects),
        "controls": list(controls),
        "ranks": burned,
        "in_turn": in_turn,
    }


def burn(torch: Any, device: Any, cuda: bool, burn_s: float, matrix: int) -> dict[str, Any]:
    """Matrix multiplications on ``device`` for about ``burn_s`` seconds; the rank's throughput.

    On a GPU each batch is timed with CUDA events (the GPU's own time, not the launch queue's);
    on a CPU with the wall clock. The throughput is the whole burn's FLOPs over its time, so a
    GPU that slows down part way through (heat, a power brake) counts for what it lost.
    """
    if cuda:
        dtype_name = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float16
        n = matrix or GPU_MATRIX
    else:
        dtype_name, dtype, n = "fp32", torch.float32, matrix or CPU_MATRIX
    generator = torch.Generator(device="cpu").manual_seed(1234)
    a = torch.randn(n, n, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=generator).to(device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    torch.matmul(a, b, out=out)  # warm-up: kernel choice, allocation
    if cuda:
        torch.cuda.synchronize(device)
    sampler = NvmlSampler(torch, device.index if device.index is not None else 0) if cuda else None
    if sampler is not None:
        sampler.start()
    batch, ops, busy_s = 1, 0, 0.0
    deadline = time.perf_counter() + burn_s
    while True:
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(batch):
                torch.matmul(a, b, out=out)
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end) / 1000.0
        else:
            begin = time.perf_counter()
            for _ in range(batch):
                torch.matmul(a, b, out=out)
            elapsed = time.perf_counter() - begin
        ops += batch
        busy_s += elapsed
        if time.perf_counter() >= deadline:
            break
        if elapsed < BATCH_TARGET_S:
            batch = min(batch * 2, MAX_BATCH)
    result: dict[str, Any] = {
        "dtype": dtype_name,
        "matrix": n,
        "ops": ops,
        "busy_s": busy_s,
        "flops_per_s": 2.0 * n**3 * ops / busy_s if busy_s > 0 else None,
    }
    if cuda:
        result["device_name"] = torch.cuda.get_device_name(device)
    if sampler is not None:
        result["gpu"] = sampler.stop()
    return result
