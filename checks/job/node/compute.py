"""The compute phase: every rank burns matrix multiplications at once for the same time (bf16, or
fp16, on a GPU timed with CUDA events; fp32 on a CPU), with what its GPU said through NVML
meanwhile; every rank's throughput, by rank.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from checks.job.node.nvml import NvmlSampler

if TYPE_CHECKING:
    from checks.job.node.harness import Job

# Matrix sides: one GPU GEMM of 8192 is ~1.1 TFLOP (about 2 ms on an H100); one CPU matmul of
# 256 is 34 MFLOP (a few ms on one core), fine grained enough for a burn of a second.
GPU_MATRIX = 8192
CPU_MATRIX = 256
# Each timed batch grows until it covers this long, so event and timer overheads stay small.
BATCH_TARGET_S = 0.05
MAX_BATCH = 1024


def run(job: Job) -> dict[str, Any]:
    """Every rank's burn, started together after a barrier."""
    settings = job.settings("compute")
    burn_s = float(settings["burn_s"])
    start = time.perf_counter()
    job.barrier()
    mine = burn(job.torch, job.device, job.cuda, burn_s, int(settings["matrix"]))
    mine.update(rank=job.rank, node_rank=job.node_rank, local_rank=job.local_rank, hostname=job.hostname)
    ranks = job.gather(mine)
    return {"burn_s": burn_s, "ranks": ranks, "duration_s": time.perf_counter() - start}


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
