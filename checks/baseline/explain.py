"""What each item of ``baseline``'s findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

EXPLAINS = (
    Explanation(
        item="nodes",
        means=(
            "The cluster's nodes changed since the known-good baseline run: a node of the baseline is "
            "gone from this run (a failure: the job would run on fewer nodes than the good one), or this "
            "run has a node the baseline did not. A node reached by another name is the same node "
            "where its identity says so."
        ),
        measured=(
            "This run's hosts against the baseline run's (`--baseline RUN.json`), each matched by its "
            "identity from the facts (host name, machine ID or serials) where both runs read one, else "
            "by its name in the hosts file."
        ),
        threshold='A node gone always fails; a new node is what {new_node} says ("ignore" leaves it out).',
        first=(
            "For a node gone, find why it is not in this run (the hosts file, or see the connect "
            "check's finding) and bring it back. For a new node, confirm it belongs; once this run is "
            "good, keep its report as the new baseline."
        ),
        healthy="The same nodes as the baseline run; the pass says so.",
    ),
    Explanation(
        item="version",
        means=(
            "A version changed on some nodes since the baseline run: the NVIDIA driver, CUDA, torch, "
            "torch's CUDA, cuDNN or NCCL, the system's NCCL or cuDNN, nvcc, Python, the kernel, the OS "
            "or a Python package. An upgrade may be intended, but a change is the first suspect when a "
            "run that was good is not."
        ),
        measured=(
            "Each reachable node's versions from its facts against the same node's in the baseline run: "
            "the versions check's items, and each package the node had in both runs."
        ),
        threshold='What a change is follows {version_change} ("fail", "warn" or "ignore").',
        first=(
            "If the change was planned and this run is otherwise good, keep its report as the new "
            "baseline. If not, find what changed it on those nodes (`pip list`, `nvidia-smi`, the "
            "package manager's log) and roll it back."
        ),
        healthy="No version changed since the baseline run.",
    ),
    Explanation(
        item="gpus",
        means=(
            "A node has fewer GPUs than it had in the baseline run: a GPU fell off the bus, was "
            "disabled or was taken out. The job would run fewer ranks there, or fail to start."
        ),
        measured=(
            "The GPUs each reachable node lists in its facts (NVML, or nvidia-smi) against the same "
            "node's count in the baseline run."
        ),
        threshold="",
        first=(
            "On the node, `nvidia-smi -L` and `lspci | grep -i nvidia` against a peer's, and the kernel "
            "log for an XID 79 (fallen off the bus). Drain the node, then reset or reseat the GPU."
        ),
        healthy="Every node lists as many GPUs as it did in the baseline run.",
    ),
    Explanation(
        item="sweep",
        means=(
            "The whole world's all-reduce bus bandwidth dropped against the baseline run: the fabric as "
            "a whole is slower than when it was known good (a switch, firmware, an NCCL version or "
            "variable, a setting on every node)."
        ),
        measured=(
            "The `allreduce` check's sweep at the largest message size both runs measured (the small "
            "sizes measure latency): this run's busbw against the baseline's."
        ),
        threshold=(
            "Fails when it fell by more than {max_busbw_drop} (a share) of the baseline's busbw at that size."
        ),
        first=(
            "Compare the two runs' all-reduce transport lines (NET/IB or NET/Socket, GPUDirect RDMA) "
            "and this run's `version` findings; look for a change every node shares: switch firmware, "
            "NCCL variables, the NCCL version."
        ),
        healthy="The busbw at the largest common size at or near the baseline's.",
    ),
    Explanation(
        item="pair",
        means=(
            "One pair of nodes got slower since the baseline run, against its own busbw then and "
            "against this run's other pairs: the link between them (or one of the two nodes) changed, "
            "while the fabric as a whole did not."
        ),
        measured=(
            "Each pair both runs tested in the `allreduce` check's pair tests (its best test, first or "
            "re-test), nodes matched by identity: its busbw against the baseline's, and its share of "
            "this run's median pair against its share of the baseline's."
        ),
        threshold=(
            "Fails when it fell by more than {max_busbw_drop} (a share) of its baseline busbw, and its "
            "share of this run's median pair fell by more than that against its share then."
        ),
        first=(
            "Check both nodes' NICs (`ibstat`, `perfquery -x`) and the cables and switch ports between "
            "them; the all-reduce pair matrix shows whether either node is slow with other partners too."
        ),
        healthy="Every pair both runs tested at or near its baseline busbw.",
    ),
)
