"""What each item of ``allreduce``'s findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

# How the pair tests run and what a slow pair is, for the items the pair tests name.
_PAIRS = (
    "Where the job tests pairs (3 nodes or more, `[allreduce] pairwise`), pairs of nodes all-reduce "
    "over their own communicator, the pairs of a round at once and at one message size "
    "(`[allreduce] pair_bytes`, smaller in a round where a link is too slow for it); busbw is "
    "computed as nccl-tests does. The typical pair is the median over nodes of each node's best "
    "first test. "
)
_SLOW_PAIR = (
    "A pair is slow below the run's threshold: the healthy pairs' center less 2 of their standard "
    "deviations (fixed), kept between {slow_ratio} times the typical pair and {quiet_slow_ratio} times "
    "that center ({slow_ratio} times the typical pair alone with fewer than 8 healthy pairs)."
)

EXPLAINS = (
    Explanation(
        item="nccl_loaded",
        means=(
            "Some ranks of the job loaded a different NCCL library from the others (or a node's own "
            "ranks differ): ranks of one job on different NCCL versions can hang or fail collectives in "
            "ways that look like a network fault. The versions check sees the NCCL torch was built "
            "with; this is the one the job actually ran."
        ),
        measured=(
            "Each rank finds the libnccl.so mapped into its own process (`/proc/self/maps`) and asks it "
            "`ncclGetVersion` (torch's build version where NCCL is linked into torch). The versions are "
            "gathered by node: a node whose ranks differ is named, and the nodes that differ from the "
            "majority (every node, when there is none)."
        ),
        threshold="",
        first=(
            "On the named nodes, find where the job's NCCL comes from: `LD_LIBRARY_PATH` and "
            "`LD_PRELOAD`, an `nvidia-nccl-cu*` wheel beside torch (`pip show nvidia-nccl-cu12`), an "
            "NCCL in the container image. Make every node load the same one."
        ),
        healthy="Every rank of every node runs the same NCCL version; the pass's transport line names it.",
    ),
    Explanation(
        item="untested_gpus",
        means=(
            "A node runs fewer ranks than it has GPUs, so the job leaves some of its GPUs untested: "
            "the all-reduce, the rails, the compute burn and DDP say nothing of them, though training "
            "would use them. A warning, not a fault found."
        ),
        measured=(
            "Before the job starts: the GPUs the facts probe lists on the node (NVML or nvidia-smi) "
            "against the ranks the job runs there, the host's `slots=` in the hosts file, else the CUDA "
            "devices torch sees (`torch.cuda.device_count()`, which CUDA_VISIBLE_DEVICES limits)."
        ),
        threshold="",
        first=(
            "Read the reason in the finding. `slots=` below the GPU count: raise it in the hosts file, "
            "or drop it. Torch sees fewer devices than are listed: check `CUDA_VISIBLE_DEVICES` in the "
            "node's environment and compare `nvidia-smi -L` with `python -c 'import torch; "
            "print(torch.cuda.device_count())'` in the training environment."
        ),
        healthy="As many ranks as GPUs on every node, and no warning.",
    ),
    Explanation(
        item="see_compute",
        means=(
            "An all-reduce finding about a node's speed (a slow node, a slow link or cut that names it, a "
            "pair under the floor, a straggler) on a node that another check found at fault first: slow "
            "at compute, NVLinks down, slow inside itself, or a slow card on one of its rails. One root "
            "cause, one finding: it is turned into a warning that refers to that finding (`refers_to` "
            "names the check)."
        ),
        measured=(
            "The pair tests, as for the all-reduce's other findings; then the findings of `compute` "
            "(`slow_compute`), `hardware` (`gpu_nvlink`), `intranode` (`slow_inside_node`) and `rails` "
            "(`slow_rail`, `slow_on_every_rail`) in the same run. A failure that names a node one of "
            "them failed, and carries a speed (`ratio`, `link`, `floor_gbps` or `busbw_gbps`), is "
            "referred to the first of them, compute first. Where the cause is a rail's card the network "
            "is still to blame, and the rails finding names the card."
        ),
        threshold=(
            "As for the finding referred: pairs below the run's slow threshold (adapted to the healthy "
            "pairs' spread: at most {quiet_slow_ratio} times their center, at least {slow_ratio} times the "
            "typical pair), or under the floor {min_pair_busbw_gbps} (GB/s; 0: none)."
        ),
        first=(
            "Fix what the referred finding names for the node (the slow GPU, the NVLinks, the path "
            "inside the node, the rail's card), then rerun: the node's pairs should then run like the "
            "others'."
        ),
        healthy="No root-cause finding on the node, and its pairs near the typical pair.",
    ),
    Explanation(
        item="counter_growth",
        means=(
            "A node's fabric error counters grew while the job drove traffic over it: errors happening "
            "now, not old counts. A link that went down (`link_downed`) or symbol errors beyond the "
            "InfiniBand bit error rate on a port the job uses is a failing cable, transceiver or port, "
            "and fails; other error counters growing warn; interface drops and EFA's own recovery "
            "counters are a note, as healthy hosts count them too."
        ),
        measured=(
            "The node's host reads every InfiniBand, RoCE and EFA port's counters "
            "(`/sys/class/infiniband/DEV/ports/N/counters`, an EFA port's `hw_counters`) and every "
            "interface's error and drop counters (`/sys/class/net/IFACE/statistics`) before it starts "
            "the ranks and after they end. A port is the job's fabric when it is InfiniBand, or a RoCE "
            "device NCCL's log says it used. `port_xmit_wait` grows under any load and is not judged."
        ),
        threshold=(
            "On a port of the job's fabric, `link_downed` growing fails at any count and `symbol_error` "
            "fails above 120 an hour (the InfiniBand specification's bit error rate of 10^-12; fixed), "
            "warning at or below it. Any other error counter growing warns, as do those two on other "
            "ports; interface drops and EFA's `rx_drops`, `retrans_pkts` and `cmds_err` are a note."
        ),
        first=(
            "Look at the named port: `perfquery -x` or `ibqueryerrors` for its counters, `mlxlink -d DEV "
            "-c` for its error rate, then its cable, transceiver and switch port; `ethtool -S IFACE` for "
            "an interface. Drain the node where `link_downed` or `symbol_error` grew, and reseat or "
            "replace the cable."
        ),
        healthy="No error counter grows during the job; drops may, and are only noted.",
    ),
    Explanation(
        item="straggler",
        means=(
            "On a small cluster, a node is slow with every partner, beyond the run's own measured noise, "
            "though not slow enough for the slow-node rule: with few pairs the noise across them cannot "
            "be measured, and a node moderately slow (a link shaped to a lower rate) would hide. Every "
            "step of the job waits for it."
        ),
        measured=(
            "With at most 10 pairs, when a first-wave pair reads below 0.8x the typical pair, the job "
            "runs every pair twice more (all three fixed). The pairs' own repeats give the noise (their "
            "standard deviation, pooled); a node whose every pair averages 0.8x the pairs without it or "
            "slower, with a mean 4 standard errors below theirs (fixed), is named. A node already named "
            "slow is not named again."
        ),
        threshold=(
            "Fails below {slow_ratio} times the pairs without it; warns from there up to 0.8 times (fixed)."
        ),
        first=(
            "Check the node's NICs (`ibstat`: state and rate; `perfquery -x`; `ethtool IFACE` for the "
            "speed), its cable and switch port, and any traffic shaping on its ports; rerun without it "
            "to confirm the others are fast."
        ),
        healthy="Every node's pairs within the run's noise of each other; no repeats needed.",
    ),
    Explanation(
        item="stalled_sweep",
        means=(
            "The all-reduce across every node stalled: its ops crawled so that the sweep's time budget "
            "stopped it short of its largest message. A lossy node or link can do so while its pair "
            "tests happen to pass, and a training job would hang or crawl on the same collective. The "
            "node whose connections lost the traffic is named where its retransmissions say."
        ),
        measured=(
            "The whole-world sweep grows its message from 1 KiB to the largest within its budget. When "
            "the budget stopped it, its last size is judged: one op taking 0.1 s or more and moving "
            "under 1% of the typical pair's busbw (without pair tests: at 1 MiB or less), while its ranks "
            "did not wait for a CPU a quarter of the time or more. Reported only when no other failure "
            "names a node; the TCP retransmissions each node counted by peer during the phase name the "
            "node whose connections lost the traffic, where one holds most of them."
        ),
        threshold=(
            "The sweep's budget, {sweep_budget_s} seconds; a stalled op takes 0.1 s or more at under 1% "
            "of the typical pair (both fixed)."
        ),
        first=(
            "If a node is named, look at its network: retransmissions (`netstat -s`, `ss -ti`), drops "
            "and errors (`ethtool -S IFACE`), its cable and switch port; rerun with and without it. With "
            "no node named, check the interface NCCL and gloo bind to (`NCCL_SOCKET_IFNAME`) on every "
            "node, its MTU along the path and any firewall between the nodes."
        ),
        healthy="The sweep reaches its largest message within its budget, busbw rising to a plateau.",
    ),
    Explanation(
        item="no_sweep",
        means=(
            "The job's all-reduce results hold no row of the whole-world sweep, so neither the "
            "world's bandwidth nor the correctness of its sums can be judged. The sweep always measures "
            "its first size, so the phase's printed results were incomplete: an error of the run, not a "
            "finding about a node."
        ),
        measured=(
            "Rank 0 prints the phase's results when it ends; the judge reads their `sweep` (one row a "
            "message size) and finds none."
        ),
        threshold="",
        first=(
            "Rerun the check (`--only allreduce`). If it repeats, keep the JSON report (`--json`) with "
            "the job's output and report it as a preflight bug."
        ),
        healthy="A sweep of message sizes from 1 KiB up, each with its time, algbw and busbw.",
    ),
    Explanation(
        item="wrong_sums",
        means=(
            "The all-reduce returned corrupted data: elements of its result differed from the exact "
            "sums every rank put in. A training job on the same nodes would average wrong gradients "
            "without any error. The finding names no node: the sums are checked over the whole world."
        ),
        measured=(
            "At every size of the sweep, the first op is a correctness check: each rank fills the "
            "message with small integers of its own, repeating with a prime period (11, fixed) so that "
            "a chunk delivered at the wrong offset shows, and every element must come back as their "
            "exact sum. Each rank counts the elements that differ; the finding gives the largest count "
            "of any rank, by message size. Any wrong element fails."
        ),
        threshold="",
        first=(
            "Look at the same run's `hardware` XID and `gpu_memory` ECC findings and at `nccl_loaded` "
            "(ranks on another NCCL). Rerun; if it repeats, split the nodes in halves (`--nodes`, "
            "`--only allreduce`) until one node or pair is left, and drain it for a GPU diagnostic "
            "(`dcgmi diag -r 3`)."
        ),
        healthy="No wrong element at any size; the sweep's `wrong` is 0 in every row.",
    ),
    Explanation(
        item="below_floor",
        means=(
            "The all-reduce across every rank of the job moved less than the bus bandwidth floor "
            "configured for the cluster: collectives of a training job on these nodes would run slower "
            "than the fabric is expected to carry. The finding names no node; the pair tests, where they "
            "ran, say which node or link is slow."
        ),
        measured=(
            "The whole-world sweep's busbw at the largest message it reached (its time budget, "
            "`[allreduce] sweep_budget_s`, may stop it short of the top size): the slowest rank's mean "
            "time per op over the timed ops, turned into busbw as nccl-tests does (algbw times "
            "2(n-1)/n for n ranks)."
        ),
        threshold="busbw below {min_busbw_gbps} GB/s fails (0: no floor).",
        first=(
            "Read the pair findings of the same run for a slow node or link, and the transport line "
            "(NCCL over IB with GPUDirect RDMA, or a fall-back to TCP). With none, check the floor "
            "fits this fabric and its message size (the sweep stopped short gives a smaller message and "
            "a lower busbw), then the NICs' link rates (`ibstat`)."
        ),
        healthy="busbw at the largest size at or above the floor, near what the fabric's links carry.",
    ),
    Explanation(
        item="slow_node",
        means=(
            "A node's all-reduce with every partner it was tested with is slow, and a re-test against "
            "a node that is fast with others confirmed it: the node (its NICs, their links or PCIe "
            "path, or its load) holds back every collective it takes part in, and every step of a "
            "training job waits for it."
        ),
        measured=(
            f"{_PAIRS}A node is named when it has two or more partners and no fast pair, is slow in "
            "most of its measurements (even without its worst partner), its mean is 2.5 standard "
            "deviations of the healthy pairs below their center or lower (fixed), and a re-test against "
            "a partner fast with other nodes was slow too. The finding gives its best busbw over the "
            "typical pair."
        ),
        threshold=_SLOW_PAIR,
        first=(
            "Check the node's NICs: state and rate (`ibstat`), error counters (`perfquery -x`), "
            "`ethtool IFACE` and `ethtool -S IFACE` on Ethernet; then its cable and switch port, and "
            "what else runs on it. Rerun without it to confirm, and drain it until its pairs run like "
            "the others'."
        ),
        healthy="The node's pairs near the typical pair (its `node_ratio` near 1.0).",
    ),
    Explanation(
        item="cut",
        means=(
            "Traffic between two sets of nodes is slow while each set is fast inside: a switch uplink "
            "or a route between them, not any one node. A job spread over both sets runs its "
            "collectives at the pace of the cut. Where the smaller set is slow with every other node, it "
            "is a group cut off (`cut_off`), likely the uplink of the switch behind it."
        ),
        measured=(
            f"{_PAIRS}The nodes of the pairs slow in every measurement are joined into sets by their "
            "pairs that are not slow; two sets whose tested pairs across are all slow (two or more, "
            "one of them re-tested) are a cut when those pairs average 3 standard deviations of the "
            "healthy pairs below their center (fixed; where the run's noise is measured). With "
            "`--topology`, the switches of each side are named."
        ),
        threshold=_SLOW_PAIR,
        first=(
            "Look at the switch the finding names, or the uplinks and routes between the two sets: "
            "links at reduced width or speed (`iblinkinfo`), error counters (`ibqueryerrors`), the "
            "route between a node of each side (`ibtracert`). The nodes themselves are not at fault: "
            "the fabric between them is."
        ),
        healthy="Pairs across the sets as fast as pairs inside them.",
    ),
    Explanation(
        item="slow_link",
        means=(
            "One pair of nodes is slow in its test and its re-test while both nodes are fast with "
            "other partners: the path between them (a cable or port on one side, or the switch route "
            "between them), not either node. Collectives over that path run at its pace."
        ),
        measured=(
            f"{_PAIRS}A pair slow in its first test is re-tested; it is a slow link when its best "
            "measurement stays under the threshold, its mean 2.5 standard deviations of the healthy "
            "pairs below their center or lower, both nodes have a fast pair with another partner, and "
            "(where the run's noise is measured) it is 3 standard errors slower than either node is "
            "with its other partners (all fixed)."
        ),
        threshold=_SLOW_PAIR,
        first=(
            "Compare the two nodes' ports (`perfquery -x`, `ibqueryerrors`) and the route between them "
            "(`ibtracert LID LID`); rerun the pair's nodes alone (`--nodes A,B,C` with a third node "
            "fast with both) to confirm before replacing a cable or reporting the route."
        ),
        healthy="Every pair near the typical pair; a pair slow once is only a note, fast on re-test.",
    ),
    Explanation(
        item="pair_below_floor",
        means=(
            "Pairs of nodes moved less than the absolute busbw floor configured for a pair, in their "
            "best test: the nodes cannot carry what the fabric is expected to, whatever their peers do. "
            "Every node of such a pair is named."
        ),
        measured=(
            f"{_PAIRS}Each pair's best busbw, its first test or a re-test, is compared with the floor."
        ),
        threshold="A pair's best busbw below {min_pair_busbw_gbps} GB/s fails (0: no floor).",
        first=(
            "Look at the nodes the pairs share: a node in every pair under the floor is the one to "
            "check (`ibstat` for its link rate, `perfquery -x`). Where every pair is under it, check "
            "that the floor fits this fabric and the pair message size (`[allreduce] pair_bytes`)."
        ),
        healthy="Every pair's busbw at or above the floor.",
    ),
    Explanation(
        item="nccl_socket_fallback",
        means=(
            "NCCL carried traffic between nodes over plain TCP sockets (NET/Socket) on a node that has "
            "InfiniBand or RoCE ports, or where InfiniBand is required: the job runs, but its "
            "collectives move a fraction of what the fabric carries."
        ),
        measured=(
            "The job runs with `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET`; each node's NCCL log is "
            "parsed for the transport of its connections between nodes (`via NET/Socket`, or Socket "
            "named as NCCL's network). A node using it fails where its facts list InfiniBand or RoCE "
            "devices (`/sys/class/infiniband`), or on every node when InfiniBand is required. Judged "
            "with two nodes or more over NCCL."
        ),
        threshold=(
            'The network NCCL must use between nodes, {expect_transport}: "auto" fails a node with '
            'InfiniBand or RoCE devices, "ib" any node, "socket" none.'
        ),
        first=(
            "Read the finding's `fallback` (NCCL's devices, `ib_no_device`). On the node, check "
            "`ibv_devinfo` and `ibstat` (ports ACTIVE), and that the job's environment does not set "
            "`NCCL_IB_DISABLE=1`, `NCCL_NET=Socket` or an `NCCL_IB_HCA` naming absent devices. In a "
            "container, mount `/dev/infiniband` and install `libibverbs`."
        ),
        healthy="NCCL over NET/IB (or the fabric's plug-in) between nodes on every node.",
    ),
    Explanation(
        item="no_gpudirect_rdma",
        means=(
            "NCCL used an RDMA network between nodes without GPUDirect RDMA on some nodes: data "
            "between the GPU and the NIC is staged through host memory, costing bandwidth and CPU "
            "memory traffic. A warning: the job works, slower than the fabric allows."
        ),
        measured=(
            "From each node's NCCL log in a GPU job of two nodes or more: connections between nodes "
            "over an RDMA transport (NET/IB, a network plug-in, CollNet) where no connection line "
            "carries `GDRDMA` and no line says GPU Direct RDMA is enabled."
        ),
        threshold="",
        first=(
            "On the node, check the peer-memory module (`lsmod | grep -E 'nvidia_peermem|nv_peer_mem'`; "
            "`modprobe nvidia-peermem`), that the job's environment does not lower "
            "`NCCL_NET_GDR_LEVEL`, and the GPU-NIC distance (`nvidia-smi topo -m`: NCCL leaves "
            "GPUDirect off where they are far apart, as across CPU sockets, SYS)."
        ),
        healthy="Connection lines between nodes carry `GDRDMA`; the pass says NCCL ran with GPUDirect RDMA.",
    ),
    Explanation(
        item="nccl_warning",
        means=(
            "NCCL logged warnings (WARN lines) on some nodes during the job: something in its setup "
            "or its transport went wrong, though the all-reduce completed. A warning to read, not a "
            "failure by itself."
        ),
        measured=(
            "Each node's NCCL log (`NCCL_DEBUG=INFO`, on the job's stderr) is searched for WARN lines; "
            "up to 20 distinct ones are kept per node (fixed), and nodes are grouped by their first "
            "warning, with the total count."
        ),
        threshold="",
        first=(
            "Read the warnings in the finding's `warnings`. An `ibv_*` call failing or a completion "
            "with error points at the NIC or its link (`ibstat`, `perfquery -x`); a plug-in or "
            "library not found, at the NCCL setup of the node's environment or container."
        ),
        healthy="No NCCL WARN line on any node.",
    ),
    Explanation(
        item="one_rank",
        means=(
            "The job ran a single rank in all, so there is no traffic between ranks to measure: busbw "
            "is 0 by definition. The sums of the sweep are still checked. A skip, not a fault."
        ),
        measured=(
            "The world size rank 0 reports: one rank on one node (a node with one GPU, or `slots=1` "
            "in the hosts file). Skipped only when nothing else failed."
        ),
        threshold="",
        first=(
            "To test the network, run on two nodes or more; to test a node's own GPUs together, give "
            "it a rank per GPU."
        ),
        healthy="Two ranks or more, and a busbw for the sweep's largest message.",
    ),
)
