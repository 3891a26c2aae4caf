"""What each item of ``gpu_memory``'s findings means (``preflight explain``), its pass (``gpus``)
included."""

from __future__ import annotations

from preflight.explain import Explanation

# Where the GPU readings come from, said once for every item.
_READ = "The facts probe reads every GPU through NVML (nvidia-smi's CSV query where NVML cannot be loaded)"

EXPLAINS = (
    Explanation(
        item="gpus",
        means=(
            "Nothing is wrong: the pass of the check. Every node has as many GPUs as expected, of one "
            "model and size, with their memory free and no pending memory fault. Its summary may add "
            "GPUs whose memory had faults in the past that were handled (history, nothing pending), "
            "and GPUs not judged because their memory readings were errors (the hardware check names "
            "those)."
        ),
        measured=(
            f"{_READ}: its name, total, used and free memory, ECC mode and uncorrected error counts, "
            "remapped rows, pending retired pages and MIG mode. The pass lists the GPU count, the "
            "GPUs per node and each model with its memory; its details keep every GPU's row and each "
            "node's count."
        ),
        threshold=(
            "Every GPU has at least {min_free_fraction} of its memory free and a total within "
            "{total_tolerance} of its model's majority; every node has {gpus_per_node} GPUs (0: as "
            "many as most nodes)."
        ),
        first=(
            "Nothing to do. A GPU listed with past memory faults is worth watching: if its lifetime "
            "counts grow from run to run, plan to replace it (`nvidia-smi -q -d ECC,ROW_REMAPPER`)."
        ),
        healthy=(
            'The pass itself: every GPU counted, one model and size, "free and healthy", with no '
            "past faults noted and no GPU left unjudged."
        ),
    ),
    Explanation(
        item="gpu_count",
        means=(
            "A node has fewer GPUs than expected, or none: the job cannot place all of its ranks "
            "there, and a launcher that assumes the same number per node fails or maps ranks to a "
            "missing device. A GPU usually drops off the bus after an Xid fault, a driver failure "
            "or a hardware problem."
        ),
        measured=(
            f"{_READ}, and counts the GPUs listed on each node; a node with none gives the reason "
            "(no driver, NVML not loadable). The count is compared with `[gpu_memory] "
            "gpus_per_node` where it is set, else with the count most nodes have (on a tie, the "
            "largest). With no GPU on any node and no count stated, the check is skipped as a CPU-only "
            "cluster."
        ),
        threshold=(
            "Fewer than {gpus_per_node} GPUs (0: fewer than most nodes have, judged with two nodes or "
            "more). A failure."
        ),
        first=(
            "On the node: `nvidia-smi -L` against `lspci -d 10de:`, and `dmesg | grep -i xid` for a "
            "GPU that fell off the bus; check CUDA_VISIBLE_DEVICES in the session. A lost GPU needs a "
            "GPU reset or a reboot; drain the node until it shows all its GPUs."
        ),
        healthy="The same number of GPUs on every node (8 on an 8-GPU node), and gpus_per_node where set.",
    ),
    Explanation(
        item="gpu_model",
        means=(
            "The nodes do not all have the same GPU model: a data-parallel job runs at the pace of its "
            "slowest GPU, and a model with less memory may not fit the job's batch. A warning, naming "
            "the nodes of the minority model."
        ),
        measured=(
            f"{_READ}; each node's GPU model names (joined where a node mixes models) are compared "
            "between nodes, and the nodes outside the majority are named (every side where there is "
            "none). A GPU whose name could not be read is left out."
        ),
        threshold="",
        first=(
            "Check that the inventory is what you meant (`nvidia-smi --query-gpu=name "
            "--format=csv` on each node); run the job on nodes of one model, or size it for the "
            "slowest."
        ),
        healthy="One GPU model on every node of the run.",
    ),
    Explanation(
        item="memory_total",
        means=(
            "A GPU has more or less total memory than the other GPUs of the same model: another SKU, "
            "a GPU in MIG mode, or ECC set differently. Ranks sized "
            "for the larger GPUs run out of memory on the smaller one."
        ),
        measured=(
            f"{_READ}; the total memory of every GPU of one model, on every node, is compared with the "
            "most common total of that model. Where two totals are equally common, the model fails "
            "when its smallest and largest differ by more than the tolerance."
        ),
        threshold="A total that differs from the model's majority by more than {total_tolerance} of it.",
        first=(
            "Compare `nvidia-smi -q -d MEMORY,ECC` on the named GPU with a sibling's: look for MIG "
            "mode, ECC off, or another board part number. Reset the GPU or fix its mode; replace "
            "it if it is another SKU."
        ),
        healthy="Every GPU of one model with the same total memory, within a fraction of a percent.",
    ),
    Explanation(
        item="memory_free",
        means=(
            "Memory on a GPU is already in use by another process: someone else's job or a leftover "
            "of an earlier one. The job will run out of memory on that GPU or share its compute; "
            "either way the node is not free for the run."
        ),
        measured=(
            f"{_READ}: free memory against the GPU's total (nvmlDeviceGetMemoryInfo, version 2 where "
            "the driver has it, so the driver's own reserve is not counted as used), and the "
            "processes holding it (nvmlDeviceGetComputeRunningProcesses, with pid and name). A "
            "process in another container or PID namespace holds memory without being listed."
        ),
        threshold="Less than {min_free_fraction} of the GPU's total memory free. A failure.",
        first=(
            "On the node, `nvidia-smi` lists the processes: stop a stale one (`kill PID`) or wait for "
            "the other job to end. Where no process is listed, look in other containers (`fuser -v "
            "/dev/nvidia*` as root)."
        ),
        healthy="Nearly all of every GPU's memory free and no compute process listed.",
    ),
    Explanation(
        item="ecc_errors",
        means=(
            "A GPU had uncorrectable ECC memory errors since the driver loaded: data in its memory "
            "was corrupted. A job on it can crash with an Xid error or, worse, train on corrupted "
            "values; the node should not take the run."
        ),
        measured=(
            f"{_READ}: the volatile uncorrected ECC count (nvmlDeviceGetTotalEccErrors, uncorrected, "
            "volatile), which a driver reload or a GPU reset clears. The lifetime (aggregate) count is "
            "shown beside it but not judged: on A100/H100 it stays above zero after row remapping "
            "handled an error."
        ),
        threshold="",
        first=(
            "Drain the node and reset the GPU (`nvidia-smi -r -i N` with nothing running, or reboot); "
            "check `nvidia-smi -q -d ECC,ROW_REMAPPER` afterwards. Replace the GPU if the errors "
            "return."
        ),
        healthy="0 uncorrected errors since the driver loaded on every GPU.",
    ),
    Explanation(
        item="remapped_rows",
        means=(
            "A GPU (Ampere or later) has a memory row remap pending or failed. Pending: rows with "
            "errors are marked but the spare rows are used only after a GPU reset, so the faulty "
            "rows are still in use. Failed: the GPU has run out of spare rows and cannot repair its "
            "memory any more."
        ),
        measured=(
            f"{_READ}: nvmlDeviceGetRemappedRows gives the rows remapped for correctable and "
            "uncorrectable errors and the pending and failure flags; the flags are judged, the "
            "counts shown."
        ),
        threshold="",
        first=(
            "Pending: reset the GPU (`nvidia-smi -r -i N` with nothing running) or reboot the node "
            "before the run. Failed: drain the node and have the GPU replaced."
        ),
        healthy=(
            "No remap pending and no failure; rows remapped in the past with nothing pending are "
            "history, noted by the pass."
        ),
    ),
    Explanation(
        item="retired_pages",
        means=(
            "A GPU older than Ampere has memory pages waiting to be retired: pages with errors are "
            "still in use until the driver reloads, so the job may hit them again."
        ),
        measured=(
            f"{_READ}: nvmlDeviceGetRetiredPagesPendingStatus, asked only of GPUs before Ampere (later "
            "ones remap rows instead)."
        ),
        threshold="",
        first=(
            "Reboot the node (or reset the GPU with nothing running) before the run; replace the GPU "
            "if pages keep being retired (`nvidia-smi -q -d PAGE_RETIREMENT`)."
        ),
        healthy="No page retirement pending on any GPU.",
    ),
    Explanation(
        item="ecc_mode",
        means=(
            "ECC is off on some GPUs while it is on elsewhere in the run. Those GPUs have no memory "
            "error checks and show more memory than their peers; a memory error there would go "
            "unnoticed and corrupt the job's values. A warning, naming the GPUs with ECC off."
        ),
        measured=f"{_READ}: the current ECC mode (nvmlDeviceGetEccMode), compared across all GPUs.",
        threshold="",
        first=(
            "Enable ECC on the named GPUs (`nvidia-smi -i N -e 1`) and reset them or reboot; a mode "
            "set but not yet applied is the hardware check's gpu_ecc_pending."
        ),
        healthy="ECC enabled on every GPU of the run.",
    ),
    Explanation(
        item="mig_mode",
        means=(
            "MIG is on for some GPUs while it is off on the others: the ranks placed there would get "
            "MIG instances, a fraction of a GPU, instead of whole GPUs, and NCCL does not run across "
            "instances. A warning, naming the GPUs with MIG on."
        ),
        measured=f"{_READ}: the current MIG mode (nvmlDeviceGetMigMode), compared across all GPUs.",
        threshold="",
        first=(
            "Disable MIG on the named GPUs (`nvidia-smi -i N -mig 0`, then reset them), or run the job "
            "only on nodes whose GPUs are alike; a mode set but not yet applied is the hardware "
            "check's gpu_mig_pending."
        ),
        healthy="MIG disabled on every GPU of a training run.",
    ),
)
