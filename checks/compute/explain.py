"""What each item of ``compute``'s findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

EXPLAINS = (
    Explanation(
        item="slow_compute",
        means=(
            "A rank (a GPU, or a CPU-only node's process) multiplied matrices markedly slower than "
            "the other ranks of the run, in the burn and again in its re-test beside typical ranks: "
            "the node will hold back every step of a data-parallel job, since each step waits for "
            "the slowest rank."
        ),
        measured=(
            "Inside the job, every rank multiplies square matrices for the same time (bf16 GEMM on a "
            "GPU, fp32 on a CPU) and counts the floating-point operations it completed; each rank's "
            "rate is compared with the median rank's. A rank that reads slow is burned again beside "
            "typical ranks, so a passing load is told from the node. On a GPU, NVML's throttle "
            "reasons, temperature and SM clock during the burn are read too, and named as the cause."
        ),
        threshold=(
            "Below {slow_ratio} times the median rank on GPUs, {cpu_slow_ratio} on CPU-only ranks "
            "(processes sharing cores vary more with the scheduler), or below the floor {min_tflops} "
            "(TFLOPS per rank; 0: none). The burn lasts {burn_s} seconds."
        ),
        first=(
            "Read the cause in the finding. A thermal or power slowdown: check the node's fans, "
            "airflow and power supplies (`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`). A "
            "hardware slowdown with no heat: drain the node and have the GPU looked at. No cause on a "
            "GPU: compare its clocks and application clocks with its peers' (`nvidia-smi -q -d "
            "CLOCK`). A CPU rank: look for a CPU quota, another process or a frequency cap on the "
            "node. Drain the node until it burns like the others."
        ),
        healthy=(
            "Every rank within a few percent of the median (ratios near 1.0x) and no throttle reason "
            "during the burn; the pass names the median rate and the slowest rank's ratio."
        ),
    ),
    Explanation(
        item="throttled",
        means=(
            "A GPU reported a reason of its own for running slower (thermal, power brake, hardware "
            "slowdown) during the burn, though its rate stayed near the others' or was low only once: "
            "a warning that it is near its limits."
        ),
        measured=(
            "NVML's clock event reasons, read on every GPU while the compute burn runs, with its "
            "temperature and SM clock."
        ),
        threshold="",
        first=(
            "Check the GPU's cooling and power as for a slow GPU; it is not slow yet, so it need not "
            "be drained, but it is the likely next culprit if a later run finds it slow."
        ),
        healthy="No throttle reason during the burn besides the idle and application-clock ones.",
    ),
    Explanation(
        item="slow_once",
        means=(
            "A rank was slow in the burn and normal when burned again beside typical ranks: a passing "
            "load (the scheduler, another process) rather than the node. A note, not a fault."
        ),
        measured="The compute burn and its re-test of the ranks that read slow, beside typical ranks.",
        threshold=(
            "Slow is below {slow_ratio} times the median rank on GPUs, {cpu_slow_ratio} on CPU-only "
            "ranks; normal on re-test is at or above that share of the typical ranks' rate."
        ),
        first=(
            "Nothing to fix in this run. If the same node is slow once run after run, look for what "
            "else runs on it (`preflight history` keeps its past findings)."
        ),
        healthy="No rank slow in the burn, so no re-test.",
    ),
)
