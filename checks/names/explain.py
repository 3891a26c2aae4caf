"""What each item of ``names``' findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

# How every lookup is made, for the items that judge one.
_LOOKUP = (
    "Each node resolves, with its own resolver (`getaddrinfo`: /etc/hosts and DNS as nsswitch.conf "
    "orders them), the master's names, its own and those of up to `[names] max_peers` peers that "
    "follow it in the inventory (a node's names: the inventory name it is reached at, and its host "
    "name). The first address returned, the one gloo and most tools use, is compared with the "
    "address the controller reaches that node at (the inventory's IP, or what the controller "
    "resolves)."
)
# How a name wrong on many nodes is told from a resolver wrong on a few.
_WHERE = (
    "A name wrong on more than half of the nodes that looked it up is one finding on the name's "
    "own node (its DNS record or a shared hosts file); wrong on fewer, one finding per node whose "
    "resolver got it wrong."
)

EXPLAINS = (
    Explanation(
        item="own_loopback",
        means=(
            "A node's own name resolves, on that node, to a loopback address (127.0.1.1 from a "
            "Debian-style /etc/hosts line, say). gloo and torchrun's agents advertise the address "
            "their host name gives, so the peers are told to connect to 127.0.1.1 and rendezvous "
            "hangs or fails. Not judged in a one-node run, where the ranks meet on that node."
        ),
        measured=_LOOKUP + " Here the name is the node's own and the node is the one resolving it.",
        threshold="",
        first=(
            "On the node, run `getent hosts $(hostname)` and look at /etc/hosts: remove or change the "
            "127.0.1.1 line so the host name maps to the node's cluster address (and fix the image "
            "or cloud-init template that writes it). Until then, passing addresses rather than names "
            "(`--master-addr` as an IP, GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME set) works around it."
        ),
        healthy="`getent hosts $(hostname)` on each node gives the address the controller reaches it at.",
    ),
    Explanation(
        item="unresolvable",
        means=(
            "A node could not resolve the master's name or a peer's: the lookup failed or timed out. "
            "A rank on that node cannot reach the rendezvous or a peer it is given by name, so the "
            "job does not start there."
        ),
        measured=_LOOKUP + " A lookup that returns no address, or an error, does not resolve. " + _WHERE,
        threshold="A lookup that has not answered within {lookup_timeout_s} seconds counts as failed.",
        first=(
            "On the node named, run `getent hosts NAME` for the name in the finding and read "
            "/etc/resolv.conf and /etc/nsswitch.conf. A name missing everywhere: add it to DNS or to "
            "the managed hosts file. Missing on a few nodes: bring their /etc/hosts or resolver "
            "configuration in line with the others. A timeout: check the DNS servers those nodes use."
        ),
        healthy="`getent hosts NAME` answers at once on every node with the node's cluster address.",
    ),
    Explanation(
        item="loopback",
        means=(
            "A node resolves another node's name (the master's or a peer's) to a loopback address, "
            "so it would connect to itself instead: rendezvous or a peer connection fails or meets "
            "the wrong process. Usually a hosts file copied from another machine, or a name that "
            "maps to 127.0.1.1 in DNS or a shared hosts file."
        ),
        measured=_LOOKUP + " " + _WHERE,
        threshold="",
        first=(
            "On the node named, run `getent hosts NAME` and `grep NAME /etc/hosts`: remove the line "
            "that maps the other node's name to 127.x or ::1. Where the finding is on the name's own "
            "node (most nodes get it wrong), fix the shared record: the DNS entry or the hosts file "
            "every node is given."
        ),
        healthy="Every node resolves each peer's name to that peer's cluster address, never to 127.x or ::1.",
    ),
    Explanation(
        item="wrong",
        means=(
            "A node resolves a name to an address the named node does not have, or not the one the "
            "controller reaches it at: a stale DNS record, an old hosts line after a re-address, two "
            "nodes sharing a name. Ranks connect to the wrong machine or to none, and rendezvous "
            "hangs or mixes jobs."
        ),
        measured=(
            _LOOKUP + " Where the controller cannot resolve the name itself, any of the named "
            "node's own interface addresses is accepted. " + _WHERE
        ),
        threshold="",
        first=(
            "Compare `getent hosts NAME` on the node named with the address in the inventory (the "
            "finding gives both). A wrong answer on most nodes: fix the DNS record or the shared "
            "hosts file. On a few: fix their /etc/hosts or resolver, and flush any cache (`nscd -i "
            "hosts`, `resolvectl flush-caches`)."
        ),
        healthy=(
            "Every node gives the same first address for each name: the one the controller reaches "
            "that node at."
        ),
    ),
    Explanation(
        item="other_interface",
        means=(
            "A name resolves to another of the named node's own addresses, not the one the "
            "controller reaches it at: a management or storage network, say. The job may then meet "
            "or send its bootstrap traffic over a slower or firewalled network. A warning; a finding "
            "that also holds a failing answer fails."
        ),
        measured=(
            _LOOKUP + " The answer is an address of one of the named node's own interfaces, as its "
            "facts list them, but not the expected one. " + _WHERE
        ),
        threshold="",
        first=(
            "Decide which network the job should meet on and make the names say so: order the "
            "addresses in DNS or /etc/hosts so the cluster network's comes first, or reach the nodes "
            "by the name that does. Setting GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME pins the "
            "interfaces the job uses whatever the names say."
        ),
        healthy="Each name's first address is the one the controller reaches that node at.",
    ),
    Explanation(
        item="no_answer",
        means=(
            "A node did not answer the names probe, so how it resolves the cluster's names is "
            "unknown: the same node may fail rendezvous for reasons this run did not see. An error, "
            "not a verdict on its names."
        ),
        measured=(
            "The controller runs the names script on every reachable node over its connection and "
            "waits for its answer; the reason given is the connection's error, the script's failure "
            "or the time limit."
        ),
        threshold=(
            "No answer within {lookup_timeout_s} plus {run.probe_timeout_s} seconds (per wave of "
            "{run.fanout} nodes at once)."
        ),
        first=(
            "Read the reason in the finding, then on the node run `getent hosts $(hostname)` by hand: "
            "a resolver that hangs there (an unreachable DNS server in /etc/resolv.conf) is the "
            "likely cause. A lost connection: look at the node itself (`uptime`, its load)."
        ),
        healthy="Every node answers within a second or so; no node is listed as not answering.",
    ),
)
