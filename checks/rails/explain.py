"""What each item of ``rails``' findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

# How every rail finding is measured; each item adds what names it.
_TESTS = (
    "Inside the job the nodes stand in a ring, and each node's rail r (on a GPU node its local rank "
    "r: a GPU and the NIC NCCL pairs with it; on a CPU node, interface r of `[rails] interfaces` or "
    "GLOO_SOCKET_IFNAME) is all-reduced on its own with rail r of each neighbour, two ranks a test, "
    "at the pair message of `[allreduce]`. A test below the threshold is tested again, and is slow "
    "only when its best run stays below. A healthy rail test is the upper median of the rails' "
    "typical tests (each rail's median over nodes of a node's best test)."
)
_THRESHOLD = (
    "A test below {slow_ratio} times a healthy rail test's busbw, confirmed by its re-test; the message "
    "is {allreduce.pair_bytes} (0: 256 MiB on GPUs, 4 MiB on CPUs), each test within {test_budget_s} "
    "seconds."
)

EXPLAINS = (
    Explanation(
        item="slow_rail",
        means=(
            "One card of a node is slow: a rail (a GPU and the NIC nearest it, or one interface of a "
            "CPU node) is slow with both its ring neighbours while the node's other rails are not. "
            "Training drives every rail at once, so each all-reduce runs at that rail's pace; the pair "
            "tests, which spread over all of a node's NICs, can miss it."
        ),
        measured=f"{_TESTS} A node's rail is named when every test of it, with both neighbours, is slow.",
        threshold=_THRESHOLD,
        first=(
            "On the node, `nvidia-smi topo -m` shows the NIC nearest that GPU: check that NIC's port "
            "(`ibstat`: state and rate; `perfquery -x`: error counters), its cable and switch port, and "
            "the GPU's PCIe link (`nvidia-smi -q -d PCIE`). On a CPU node, the interface's speed and "
            "errors (`ethtool IFACE`, `ethtool -S IFACE`). Drain the node until the card is fixed."
        ),
        healthy=(
            "Every rail of every node near a healthy rail test with both neighbours; the pass lists each "
            "rail's typical GB/s."
        ),
    ),
    Explanation(
        item="slow_on_every_rail",
        means=(
            "Every rail of a node is slow with both its neighbours: the node itself, not one card. "
            "Something all its NICs share is at fault (its PCIe, its CPU, a setting or firmware of all "
            "its NICs), and the node holds back every collective of the job."
        ),
        measured=f"{_TESTS} Named when every rail of the node is slow with both neighbours.",
        threshold=_THRESHOLD,
        first=(
            "Look at the node before any one card: its NICs' PCIe links (`lspci -vv`, LnkSta against "
            "LnkCap), its CPU frequency and load, its NICs' firmware and settings (`ibv_devinfo`) "
            "against a peer's. Drain it until it runs like its peers."
        ),
        healthy="Every rail of the node near a healthy rail test, like the same rails of its peers.",
    ),
    Explanation(
        item="slow_rail_pair",
        means=(
            "With two nodes, a rail is slow between them, confirmed by its re-test, but which node's "
            "card is at fault cannot be told: each rail has one test. The job would run at that rail's "
            "pace all the same."
        ),
        measured=f"{_TESTS} Two nodes are one pair, so each rail is tested once (and re-tested).",
        threshold=_THRESHOLD,
        first=(
            "Rerun with a third node known to be good: the ring then tests each node's rail with two "
            "neighbours and names the card. Meanwhile check both nodes' NICs on that rail (`ibstat`, "
            "`perfquery -x`) and the cables between them."
        ),
        healthy="Every rail between the two nodes near the other rails' busbw.",
    ),
    Explanation(
        item="slow_rail_link",
        means=(
            "A rail is slow between two neighbouring nodes while both do well on it with their other "
            "neighbour: the path between them on that rail (a cable, a switch port, a route), not "
            "either node's card. Collectives crossing that path slow the whole job."
        ),
        measured=(f"{_TESTS} Named for a slow test whose two nodes' rail is not slow with every neighbour."),
        threshold=_THRESHOLD,
        first=(
            "Check the cables and switch ports between the two nodes on that rail and the route the "
            "switches take between them (the switch ports' error counters, `ibqueryerrors`)."
        ),
        healthy="Every test of the rail near a healthy rail test, whichever neighbours it joins.",
    ),
    Explanation(
        item="slow_rail_everywhere",
        means=(
            "One rail is slow between every pair of nodes: the rail's own switch (or leaf), or a setting "
            "every node's NIC on that rail shares, not any one node. Every collective runs at that "
            "rail's pace."
        ),
        measured=(
            f"{_TESTS} Rails are alike, so a rail slow on every node stands out against the others; "
            "named when every node's tests on it are slow."
        ),
        threshold=_THRESHOLD,
        first=(
            "Check that rail's switch (its ports' speeds and error counters, its uplinks) and the "
            "settings every node's NIC on that rail shares (link speed, firmware) against another "
            "rail's."
        ),
        healthy="Every rail's typical test alike; the pass lists them by rail.",
    ),
    Explanation(
        item="rail_latency",
        means=(
            "A rail is slow to answer small messages: its all-reduce of 8 bytes takes far longer than a "
            "healthy rail's, whatever its bandwidth. Latency-bound collectives (small buckets, "
            "barriers) wait on it at every step. `form` says which shape it takes (a node's card, every "
            "rail of a node, a pair, a link, a rail everywhere), as for bandwidth."
        ),
        measured=(
            "After the bandwidth tests, each rail test runs again with an all-reduce of 8 bytes, up to "
            "100 ops within the test's budget, and is judged by the same rules on its time (for two "
            "ranks, busbw is bytes over time). A latency re-test whose ranks waited for a CPU a quarter "
            "of the time or more (fixed) is not judged: it measured the node's load. A node already "
            "named for its bandwidth is not named again."
        ),
        threshold=(
            "An 8-byte all-reduce taking longer than a healthy rail test's divided by {slow_ratio}, "
            "confirmed by its re-test."
        ),
        first=(
            "Check that NIC's port (`ibstat`), its firmware and link settings against the same NIC on a "
            "peer, and the switch port's congestion or adaptive-routing settings on that rail."
        ),
        healthy="Every rail's 8-byte all-reduce alike; the pass gives their range in µs.",
    ),
    Explanation(
        item="see_compute",
        means=(
            "A rail finding on a node that another check found at fault first: slow at compute "
            "(`compute`), NVLinks down (`hardware`) or slow inside itself (`intranode`). That fault "
            "explains its slow rail tests, so the finding is turned into a warning that refers to it "
            "(`refers_to` names the check) and its network is cleared."
        ),
        measured=(
            "The rail tests, as for the other items; then the findings of compute, hardware and "
            "intranode in the same run. A rail failure that names a node one of them failed is referred "
            "to the first of them (compute first); `slow_at_compute` lists the nodes."
        ),
        threshold="As for the rail finding referred: {slow_ratio} times a healthy rail test.",
        first=(
            "Fix what the referred finding names for the node (the slow GPU, the NVLinks, the path "
            "inside the node), then rerun: its rails should then test like its peers'."
        ),
        healthy="No root-cause finding on the node, and its rails alike with both neighbours.",
    ),
)
