"""What each item of ``ports``' findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

EXPLAINS = (
    Explanation(
        item="probe",
        means=(
            "A port a job needs is closed on the node named: every other node that probed it "
            "failed to connect, or two or more failed and no more reached it. On the master's "
            "rendezvous port the job cannot start; on an ephemeral or a job port NCCL and gloo cannot "
            "connect, and the job hangs or fails at its first collective. As an error, the item means "
            "instead that the ports probe itself could not run on the node (it did not start, went "
            "silent or gave no result)."
        ),
        measured=(
            "Each node runs a small script that listens on the rendezvous port (`[run] port`), on "
            "`[ports] extra_ports` and on one ephemeral port the kernel picks; then every node opens a "
            "TCP connection to every other node's ports. A completed handshake is open, a refusal "
            "refused, no answer dropped (asked once more with twice the time before it is called "
            "so), and no route unreachable. A port is named on its node when no node reached it, or two "
            "or more failed it and no more reached it."
        ),
        threshold=(
            "A connection with no answer within {connect_timeout_s} seconds is dropped; the ports are "
            "{run.port} and {extra_ports}, and one ephemeral port per node with {probe_ephemeral}. A "
            "failure on the master's rendezvous port, an ephemeral or a job port; a warning on another "
            "node's rendezvous port. A node quiet for {run.silence_s} seconds during the probe is an "
            "error."
        ),
        first=(
            "Read how it failed. Dropped: a firewall DROP rule or security group on the named node "
            "(`iptables -S INPUT`, `nft list ruleset`, the cloud's security group); refused: nothing "
            "listens there (`ss -ltnp` on the node) or a REJECT rule; unreachable: fix the route. "
            "Open the port range between the job's nodes, or leave the node out of the job."
        ),
        healthy=(
            "Every port open from every other node; the pass names the ports, the node count and the "
            "number of probes, and the report's matrix is green."
        ),
    ),
    Explanation(
        item="cannot_reach",
        means=(
            "The named nodes cannot connect to ports that the other nodes reach: the fault is on the "
            "path out of them, not on the target. Their ranks would fail to join the job's rendezvous "
            "or its NCCL and gloo connections while the rest of the job waits for them. Two nodes that "
            "fail only toward each other are named together: the link between them."
        ),
        measured=(
            "The same probe as for a closed port: every node connects to every other node's "
            "rendezvous, job and ephemeral ports. A port that some nodes reached while one failed it, "
            "or fewer failed than reached it, is put on the nodes that failed it; each such node is "
            "named once, with every port it failed and how."
        ),
        threshold=(
            "A connection with no answer within {connect_timeout_s} seconds (and none in twice that "
            "on the second try) is dropped. A failure where a port the job needs is among them; a "
            "warning where only other nodes' rendezvous ports are."
        ),
        first=(
            "On the named node, look at its outbound firewall (`iptables -S OUTPUT`), its route to the "
            "nodes it cannot reach (`ip route get ADDRESS`), and on those nodes any rule that admits "
            "the others by address but not this one (an allow-list, a security group). Run the job "
            "without the node until it reaches the others."
        ),
        healthy="Every node reaches every other node's ports; no node is singled out.",
    ),
    Explanation(
        item="listen",
        means=(
            "A node could not open a port the job needs: it is already in use, or binding it was "
            "denied or failed. On the master's rendezvous port the training job cannot start (another "
            "job, or a stale one, holds it); on another node it is a warning, since that node would "
            "fail only if it were the master or the job used that port there."
        ),
        measured=(
            "The ports script binds each port the job needs (`[run] port` and `[ports] extra_ports`) "
            "on all addresses of the node before any probe, and reports each as ok, in use, denied, "
            "or the error the kernel gave."
        ),
        threshold="",
        first=(
            "Find what holds the port on the node (`ss -ltnp 'sport = :PORT'`) and stop it if it is a "
            "leftover of an earlier job; otherwise run the job on another port (`--port`)."
        ),
        healthy="Every port of the job free to bind on every node (listening: ok).",
    ),
    Explanation(
        item="route",
        means=(
            "A node has no usable route to the job's master, or its route goes out another interface "
            "or MTU than its peers'. With no route (or a master name that does not resolve) the "
            "node's ranks cannot rendezvous. Different interfaces or MTUs let NCCL and gloo pick "
            "different networks per node, or drop large packets on one path: slow or hung "
            "collectives."
        ),
        measured=(
            "Each node resolves the master (`[ports] master_addr`, else the first host of the "
            "inventory) and asks `ip route get` for it; without `ip`, the kernel's choice for a UDP "
            "socket connected to the master (nothing is sent) and the routing table. The MTU is read "
            "from /sys/class/net. Interface names and MTUs are compared between nodes; a route no "
            "tool could determine is a note."
        ),
        threshold="",
        first=(
            "For no route: `getent hosts MASTER` and `ip route get ADDRESS` on the node, and fix its "
            "resolver or routing. For a different interface: pin it with NCCL_SOCKET_IFNAME and "
            "GLOO_SOCKET_IFNAME on every node. For a different MTU: set the same MTU on that interface "
            "on every node (`ip link show DEV`)."
        ),
        healthy=(
            "Every node reaches the master through the same interface name with the same MTU; the "
            "report's listener table shows one route device and MTU down its column."
        ),
    ),
    Explanation(
        item="neighbours",
        means=(
            "A node has more peers of the run on its own subnets than its kernel keeps neighbour (ARP) "
            "entries for. Under a job's all-to-all traffic every node resolves every peer on its "
            "layer-2 network; past the limit the kernel refuses new entries and some peers look "
            "unreachable, which surfaces as NCCL or gloo connection timeouts."
        ),
        measured=(
            "From the facts probe: every node's IPv4 interface addresses (loopback and /32 left out), "
            "grouped into subnets, give each node's peers in this run; that count is compared with the "
            "node's own /proc/sys/net/ipv4/neigh/default/gc_thresh3."
        ),
        threshold=(
            "More peers on the node's subnets than its own `net.ipv4.neigh.default.gc_thresh3` (a "
            "kernel setting of the node, not of preflight). A warning."
        ),
        first=(
            "Raise net.ipv4.neigh.default.gc_thresh1, gc_thresh2 and gc_thresh3 on the named nodes "
            "above the number of peers on their subnet (`sysctl -w`, and a file in /etc/sysctl.d to "
            "keep it across reboots)."
        ),
        healthy=(
            "gc_thresh3 above the number of nodes on the subnet on every node; no finding, and "
            "`ip neigh show | wc -l` stays below it during a job."
        ),
    ),
)
