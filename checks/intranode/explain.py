"""What each item of ``intranode``'s findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

EXPLAINS = (
    Explanation(
        item="slow_inside_node",
        means=(
            "A node's all-reduce among its own GPUs (or CPU processes) is much slower than the other "
            "nodes': the path between its GPUs (NVLink, NVSwitch, PCIe; the loopback between CPU "
            "processes) is degraded. Every collective of the job crosses that path, so the node holds "
            "back every step whatever the network does; the network checks' findings about this node "
            "refer to this one."
        ),
        measured=(
            "Inside the job, the ranks of each node all-reduce a 4 MiB message among themselves, every "
            "node at once, each in its own group: the best of 3 trials of 3 back-to-back ops. A node's "
            "bus bandwidth is its slowest rank's, compared with the median node's. Nodes that run one "
            "rank are not measured (the phase is skipped when every node runs one)."
        ),
        threshold=(
            "Below {slow_ratio} times the median node's busbw. The message size and the trials are "
            "fixed (4 MiB, best of 3)."
        ),
        first=(
            "Look inside the node: `nvidia-smi topo -m` for how its GPUs connect, `nvidia-smi nvlink -s` "
            "for inactive NVLinks, `systemctl status nvidia-fabricmanager` on NVSwitch systems, and the "
            "GPUs' PCIe links (`nvidia-smi -q -d PCIE`) against a peer's. For CPU processes, look for "
            "another load on the node. Drain the node until it runs like its peers."
        ),
        healthy=(
            "Every node's busbw inside itself within a few percent of the median node's; the pass lists "
            "each node's GB/s."
        ),
    ),
    Explanation(
        item="slow_copy",
        means=(
            "A GPU copies data to or from host memory much slower than the other GPUs of the run: its "
            "PCIe link trained down (fewer lanes or a lower generation), or its path to host memory is "
            "poor. Input loading, checkpoints and any traffic staged through host memory slow on that "
            "rank, and the job waits for it."
        ),
        measured=(
            "Each rank with a GPU copies 256 MiB between pinned host memory and its GPU, one warm-up "
            "copy and 5 timed ones in each direction, timed with CUDA events (as bandwidthTest and "
            "nvbandwidth do). Host-to-device and device-to-host are each compared with the median GPU "
            "of the run in that direction; at least two GPUs must have been measured."
        ),
        threshold=(
            "Below {slow_ratio} times the median GPU's copy rate, in either direction. The copy size "
            "and count are fixed (256 MiB, 5 copies)."
        ),
        first=(
            "On the node, `nvidia-smi -q -d PCIE -i N` for the rank's GPU: compare the current link "
            "width and generation with the maximum and with its peers (the hardware check's "
            "`gpu_pcie_width` or `gpu_pcie_gen` finding names the same cause). Check its NUMA placement "
            "with `nvidia-smi topo -m`; reseat the GPU or drain the node if the link stays down."
        ),
        healthy=(
            "Every GPU's copy rates close to the median in both directions, alike for GPUs of one model "
            "in like slots (about 25 GB/s on PCIe Gen4 x16, about 50 on Gen5 x16)."
        ),
    ),
    Explanation(
        item="see_compute",
        means=(
            "A node found slow inside itself has GPUs with NVLinks down (the `hardware` check's "
            "`gpu_nvlink` finding): those links are why its inside-the-node all-reduce is slow. The "
            "finding is turned into a warning that refers to the hardware finding (`refers_to`: "
            "`hardware`), which is the one to fix."
        ),
        measured=(
            "The all-reduce among each node's ranks, as for `slow_inside_node`; then the hardware "
            "check's findings of the same run, read from the nodes before the job (each GPU's NVLink "
            "states from NVML). A `slow_inside_node` failure on a node that hardware failed for NVLinks "
            "down becomes this warning; a slow copy is never referred."
        ),
        threshold=(
            "The node below {slow_ratio} times the median node's busbw inside itself, as for "
            "`slow_inside_node`."
        ),
        first=(
            "Fix the NVLinks the hardware finding names (`nvidia-smi nvlink -s -i N`; reset the GPU or "
            "reboot, and have the baseboard or NVSwitch tray looked at if a link stays down), then "
            "rerun: the node should then run like its peers inside."
        ),
        healthy=(
            "Every GPU with as many NVLinks up as its peers, and the node's busbw inside itself near the "
            "median node's."
        ),
    ),
)
