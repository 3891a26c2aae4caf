"""What each item of ``ddp``'s findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

# How the smoke training runs, for both of its agreement items.
_TRAINING = (
    "A seeded tiny model (a 16-32-1 MLP) trains for `[ddp] steps` under DistributedDataParallel, every "
    "rank on its own data, so that DDP's all-reduce of the gradients is all that keeps the replicas "
    "alike. "
)

EXPLAINS = (
    Explanation(
        item="parameters",
        means=(
            "After training, the model's parameters differ between ranks, where DDP keeps every replica "
            "identical: some rank's gradient all-reduce returned other numbers (data corrupted in "
            "transit, a GPU computing wrong results) or a rank runs another torch or NCCL. A real job "
            "would train diverging replicas without an error."
        ),
        measured=(
            f"{_TRAINING}Afterwards each rank hashes its parameters' bytes (SHA-256) and sums them (the "
            "checksum); the ranks whose hash differs from the majority's are named with their nodes "
            "(every rank, when no hash has a majority)."
        ),
        threshold="",
        first=(
            "On the named ranks' nodes, read the hardware check's XID and the gpu_memory check's ECC "
            "findings (`nvidia-smi -q -d ECC`), and check with the versions check that torch, CUDA and "
            "NCCL agree. Run a GPU diagnostic (`dcgmi diag -r 3`) and drain the node until the hashes "
            "agree."
        ),
        healthy="The same parameter hash on every rank; the pass says parameters are identical.",
    ),
    Explanation(
        item="gradients",
        means=(
            "After the last step, the gradients differ between ranks, where DDP's all-reduce leaves "
            "every rank the same averaged gradients: that all-reduce returned other numbers on some "
            "ranks (data corrupted in transit or in a GPU's memory) or a rank runs another torch or "
            "NCCL. A real job would apply different updates on different ranks."
        ),
        measured=(
            f"{_TRAINING}After the last step each rank hashes its gradients' bytes (SHA-256) and sums "
            "them (the checksum); the ranks whose hash differs from the majority's are named with their "
            "nodes (every rank, when no hash has a majority)."
        ),
        threshold="",
        first=(
            "As for differing parameters: the named nodes' XID and ECC findings, the versions of torch, "
            "CUDA and NCCL, a GPU diagnostic (`dcgmi diag -r 3`); rerun with the `allreduce` check, "
            "whose sweep checks every element of its sums."
        ),
        healthy="The same gradient hash on every rank; the pass says gradients are identical.",
    ),
    Explanation(
        item="see_compute",
        means=(
            "A DDP straggler (a rank whose own compute step is far slower than the median rank's) on a "
            "node that another check found at fault first: slow at compute, NVLinks down, slow inside "
            "itself, or a slow card on one of its rails. The straggler is that fault seen from training, "
            "so the finding is turned into a warning that refers to it (`refers_to` names the check)."
        ),
        measured=(
            "Each rank times a forward and backward pass on its own, without DDP (on a GPU one "
            "8192-square half-precision layer, timed with CUDA events; on a CPU the small model), the "
            "median of 10; a rank far above the median rank is a straggler. Then the findings of "
            "`compute`, `hardware`, `intranode` and `rails` in the same run: a straggler on a node one "
            "of them failed is referred to the first of them, compute first."
        ),
        threshold=(
            "A straggler's compute step is above {straggler_ratio} times the median rank's and at least "
            "{straggler_min_excess_s} seconds longer; the node's fault is as the referred check judged it."
        ),
        first=(
            "Fix what the referred finding names for the node (the slow GPU, the NVLinks, the path "
            "inside the node, the rail's card), then rerun: its ranks should then step like the others."
        ),
        healthy="No root-cause finding on the node, and every rank's compute step near the median.",
    ),
    Explanation(
        item="ranks_not_joined",
        means=(
            "The count of ranks in the training's first all-reduce is not the job's world size: ranks "
            "missing from the process group, or a collective that sums wrong. Either way a real job's "
            "collectives over it would hang or be wrong. It comes with `wrong_ones_sum`: both are read "
            "from the same all-reduce."
        ),
        measured=(
            "After a monitored barrier (gloo, which waits for every rank and names the ones that do not "
            "arrive), every rank adds 1 in an all-reduce over the job's process group; the sum, "
            "rounded, is the number of ranks that joined, compared with the world size rank 0 reports "
            "(0 where the results give none)."
        ),
        threshold="",
        first=(
            "Read the job's failures in the same report (each node's exit status and errors) and the "
            "`wrong_ones_sum` finding. Rerun; if it repeats, run the `allreduce` check alone "
            "(`--only allreduce`), whose sweep checks every element of its sums, and compare the "
            "nodes' torch and NCCL versions."
        ),
        healthy="Every rank joins: the sum of ones is the world size.",
    ),
    Explanation(
        item="wrong_ones_sum",
        means=(
            "The simplest collective gave a wrong answer: an all-reduce of one 1 from every rank did not "
            "return the world size (or returned no number). Collectives that cannot count ranks cannot "
            "be trusted to average gradients."
        ),
        measured=(
            "At the start of the DDP phase, after every rank passed a monitored barrier, each rank "
            "all-reduces a tensor holding 1 over the job's process group, on its device; the result "
            "must be exactly the world size."
        ),
        threshold="",
        first=(
            "Look at the same run's `allreduce` findings (`wrong_sums`, `nccl_loaded`) and the "
            "`hardware` XID findings; make every node load the same NCCL and torch. Rerun, splitting "
            "the nodes (`--nodes`) until the node that brings the wrong sum is left, and drain it."
        ),
        healthy="The all-reduce of ones gives the world size exactly.",
    ),
    Explanation(
        item="loss_not_finite",
        means=(
            "The training loss became NaN or infinite: a seeded model that trains smoothly on healthy "
            "nodes blew up, so some rank computed or received bad numbers (a GPU's arithmetic or "
            "memory, or a gradient all-reduce that returned garbage). A real job would diverge the "
            "same way."
        ),
        measured=(
            f"{_TRAINING}Each step's loss is all-reduced and averaged over the ranks; the finding names "
            "the first step whose average is NaN or infinite. Since the average mixes every rank's "
            "loss, it names no rank."
        ),
        threshold="",
        first=(
            "Look for the rank at fault in the same run: the `parameters` and `gradients` findings name "
            "ranks that diverged; `hardware` XIDs and `gpu_memory` ECC errors point at a node (the "
            "`allreduce` sweep's wrong sums, at the fabric or a GPU somewhere in the job). Drain that "
            "node for a GPU diagnostic (`dcgmi diag -r 3`)."
        ),
        healthy="A finite loss at every step, falling from the first to the last.",
    ),
    Explanation(
        item="loss_not_falling",
        means=(
            "The training loss did not fall: a seeded model that learns its target on healthy nodes "
            "did not learn, so the updates DDP applied were not what the ranks' averaged gradients "
            "give (a gradient all-reduce returning wrong values or zeros). A real job would waste its "
            "compute the same way."
        ),
        measured=(
            f"{_TRAINING}Each step's loss is all-reduced and averaged over the ranks; the last step's "
            "is compared with the first's."
        ),
        threshold=(
            "The loss after {steps} steps must end below {max_final_loss_ratio} times where it started; "
            "with very few steps it has no time to fall."
        ),
        first=(
            "Check the run's `[ddp] steps` and `max_final_loss_ratio`: too few steps or a ratio set "
            "low fail a healthy run. Then read the same run's `parameters`, `gradients` and `allreduce` "
            "findings for the node at fault, and compare the nodes' torch and NCCL versions."
        ),
        healthy="The loss falls step by step and ends well below where it started.",
    ),
    Explanation(
        item="straggler",
        means=(
            "A rank's own compute is far slower than the median rank's: under DDP every step waits "
            "for the slowest rank's gradients, so the whole job runs at that rank's pace. The rank and "
            "its node are named."
        ),
        measured=(
            "After training, each rank times a forward and backward pass on its own, without DDP (on a "
            "GPU one 8192-square half-precision layer, timed with CUDA events; on a CPU the small "
            "model), the median of 10 (fixed); each rank is compared with the median rank. DDP's own "
            "step times are all alike, as every rank waits for the slowest. Referred to a root-cause "
            "finding on the same node (`see_compute`) where another check found one."
        ),
        threshold=(
            "A compute step above {straggler_ratio} times the median rank's and at least "
            "{straggler_min_excess_s} seconds longer fails."
        ),
        first=(
            "On the node, look at the GPU's clocks, temperature and throttle reasons (`nvidia-smi -q -d "
            "PERFORMANCE,CLOCK,TEMPERATURE`) and at other processes on it (`nvidia-smi`); for a CPU "
            "rank, a CPU quota, another load or a frequency cap. Drain the node until its ranks step "
            "like the others."
        ),
        healthy="Every rank's compute step near the median; the pass names the median and the slowest.",
    ),
)
