"""The DDP phase: a small model trained for a few steps under DistributedDataParallel, every rank on
its own data; the losses, each rank's parameter and gradient checksums (equal on every rank when
DDP works) and each rank's own compute time, which shows a straggler that DDP's wall steps hide.
"""

from __future__ import annotations

import copy
import hashlib
import statistics
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from checks.job.node.harness import StoppedByPeer, tensor_bytes
from preflight.node.shared import error_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from checks.job.node.harness import Job

    JsonDict = dict[str, Any]

# DDP smoke model: small enough to train in milliseconds on a CPU, big enough to need buckets.
DDP_SEED = 20240611
DDP_IN = 16
DDP_HIDDEN = 32
DDP_BATCH = 64
DDP_LR = 0.05
# Local forward+backward steps timed without DDP, to see a straggler's own compute.
COMPUTE_TIMING_STEPS = 10
# On a GPU the small MLP measures kernel launches, not the GPU: the straggler timing runs a
# forward+backward of one square half-precision layer instead (3 GEMMs, about 3.3 TFLOP).
COMPUTE_GPU_DIM = 8192


def run(job: Job) -> JsonDict:
    """Train, then gather every rank's checksums and step times."""
    torch = job.torch
    dist = job.dist
    settings = job.settings("ddp")
    steps = max(1, int(settings["steps"]))
    start = time.perf_counter()
    # Join check: gloo's monitored barrier (on a gloo side group when the job runs NCCL) names
    # the ranks that did not arrive.
    dist.monitored_barrier(group=job.side, timeout=timedelta(seconds=job.timeout_s), wait_all_ranks=True)
    ones = torch.ones(1, device=job.device)
    dist.all_reduce(ones, group=job.group)
    ones_value = float(ones.item())

    torch.manual_seed(DDP_SEED)
    model = torch.nn.Sequential(
        torch.nn.Linear(DDP_IN, DDP_HIDDEN), torch.nn.Tanh(), torch.nn.Linear(DDP_HIDDEN, 1)
    ).to(job.device)
    teacher = torch.Generator().manual_seed(DDP_SEED + 1)
    true_weights = torch.randn(DDP_IN, 1, generator=teacher)
    data = torch.Generator().manual_seed(DDP_SEED + 2 + job.rank)  # different data on every rank

    def batch() -> tuple[Any, Any]:
        x = torch.randn(DDP_BATCH, DDP_IN, generator=data)
        y = torch.tanh(x @ true_weights) + 0.01 * torch.randn(DDP_BATCH, 1, generator=data)
        return x.to(job.device), y.to(job.device)

    wrapped = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[job.local_rank] if job.cuda else None, process_group=job.group
    )
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=DDP_LR)
    loss_fn = torch.nn.MSELoss()
    losses: list[float] = []
    wall: list[float] = []
    for _ in range(steps):
        x, y = batch()
        job.sync()
        begin = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(wrapped(x), y)
        loss.backward()
        optimizer.step()
        job.sync()
        wall.append(time.perf_counter() - begin)
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, group=job.group)
        losses.append(float(global_loss.item()) / job.world)

    params = [p.detach() for p in model.parameters()]
    grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
    mine = {
        "param_checksum": float(sum(float(p.double().sum().item()) for p in params)),
        "grad_checksum": float(sum(float(g.double().sum().item()) for g in grads)),
        "param_hash": tensor_hash(params),
        "grad_hash": tensor_hash(grads),
        "wall_step_s": float(statistics.median(wall)),
        "compute_step_s": compute_step(job, model, loss_fn, batch),
    }
    everyone = job.gather(mine)
    return {
        "steps": steps,
        "losses": losses,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "joined": round(ones_value),  # every rank that joined added its 1
        "compute_work": (
            f"{COMPUTE_GPU_DIM}x{COMPUTE_GPU_DIM} half-precision layer, forward+backward, CUDA events"
            if job.cuda
            else f"{DDP_IN}-{DDP_HIDDEN}-1 MLP forward+backward on CPU"
        ),
        "ones_allreduce": ones_value,
        "param_checksums": [r["param_checksum"] for r in everyone],
        "grad_checksums": [r["grad_checksum"] for r in everyone],
        "param_hashes": [r["param_hash"] for r in everyone],
        "grad_hashes": [r["grad_hash"] for r in everyone],
        "compute_step_s": [r["compute_step_s"] for r in everyone],
        "wall_step_s": [r["wall_step_s"] for r in everyone],
        "duration_s": time.perf_counter() - start,
    }


def compute_step(job: Job, model: Any, loss_fn: Any, batch: Any) -> float:
    """Median seconds of a forward+backward on a local copy: this rank's compute, no all-reduce wait.

    Under DDP every rank's step ends when the slowest rank's gradients arrive, so wall
    step times are all equal; a straggler shows only in its own compute.
    """
    if job.cuda:
        return gpu_compute_step(job)
    local = copy.deepcopy(model)
    job.barrier()
    times: list[float] = []
    for _ in range(COMPUTE_TIMING_STEPS):
        x, y = batch()
        job.sync()
        begin = time.perf_counter()
        local.zero_grad()
        loss_fn(local(x), y).backward()
        job.sync()
        times.append(time.perf_counter() - begin)
    return float(statistics.median(times))


def gpu_compute_step(job: Job) -> float:
    """Median seconds of a forward+backward of one COMPUTE_GPU_DIM-square bf16 (or fp16) layer,
    timed with CUDA events; every rank agrees it could run before any rank gathers the result."""
    torch = job.torch
    times: list[float] = []
    failure: Exception | None = None
    try:
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        layer = torch.nn.Linear(COMPUTE_GPU_DIM, COMPUTE_GPU_DIM, bias=False, device=job.device, dtype=dtype)
        x = torch.randn(COMPUTE_GPU_DIM, COMPUTE_GPU_DIM, device=job.device, dtype=dtype)
        for step in range(COMPUTE_TIMING_STEPS + 1):  # the first step warms up cuBLAS
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            layer.zero_grad(set_to_none=True)
            layer(x).sum().backward()
            end.record()
            end.synchronize()
            if step:
                times.append(start.elapsed_time(end) / 1000.0)  # elapsed_time is in ms
        del layer, x
    except Exception as exc:
        failure = exc
    if job.agree_max([1.0 if failure is not None else 0.0])[0]:
        if failure is not None:
            raise RuntimeError(f"the GPU compute timing failed: {error_text(failure, first_line=True)}")
        raise StoppedByPeer("another rank's GPU compute timing failed")
    return float(statistics.median(times))


def tensor_hash(tensors: Sequence[Any]) -> str:
    """The first 16 hex digits of the SHA-256 of the tensors' bytes, in order."""
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(tensor_bytes(tensor))
    return digest.hexdigest()[:16]
