"""What each item of ``clocks``' findings means (``preflight explain``)."""

from __future__ import annotations

from checks.clocks.probe import _ANSWER_S, _READY_S
from preflight.explain import Explanation

EXPLAINS = (
    Explanation(
        item="offset",
        means=(
            "A node's clock is too far from the other nodes' (or, with fewer than three nodes, from "
            "the controller's). Logs and timeouts no longer line up between ranks, so a hang is hard "
            "to read; past five minutes Kerberos, and with it NFS and other network filesystems that "
            "use it, refuses the node's tickets, and object stores refuse its signed requests. A "
            "warning, a failure past the larger limit."
        ),
        measured=(
            "Over each node's open connection a small script answers requests with its wall clock; "
            "the controller times each round trip and takes the node's reading as made at its "
            "midpoint, keeping the shortest of `[clocks] samples` round trips. The offset's "
            "uncertainty is half that round trip. With three nodes or more each node is judged "
            "against the median of the nodes' offsets (a controller whose own clock is off moves "
            "them all alike); with fewer, against the controller's clock."
        ),
        threshold=(
            "Further than {max_offset_s} seconds from the reference beyond the measurement's "
            "uncertainty warns; further than {fail_offset_s} seconds fails. {samples} round trips "
            "per node."
        ),
        first=(
            "On the node, run `chronyc tracking` (or `timedatectl timesync-status`, `ntpq -p`) and "
            "compare its servers and offset with a peer's. Step the clock once it is pointed at the "
            "right servers (`chronyc makestep`, or restart chronyd/ntpd). With one or two nodes, "
            "check the controller's own clock first: it is the reference there."
        ),
        healthy=(
            "Every node within a few milliseconds of the others (the pass gives the spread and its "
            "uncertainty) and the kernel clock synchronised on each."
        ),
    ),
    Explanation(
        item="unsynchronised",
        means=(
            "The kernel says no time service keeps this node's clock synchronised, while other "
            "nodes' kernels say one does: its clock agrees today but drifts by seconds a week, until "
            "logs disagree and network filesystems or object stores refuse it."
        ),
        measured=(
            "The facts probe asks the kernel for its clock state (`adjtimex`, which `timedatectl` "
            "shows as 'System clock synchronized'): TIME_ERROR means no service has disciplined the "
            "clock. The time service processes running (chronyd, ntpd, systemd-timesyncd, ptp4l, "
            "phc2sys and others) are listed beside it; a process alone does not prove the clock is "
            "in step. Not judged on one node, or where no node is synchronised."
        ),
        threshold=(
            "{unsynchronised} sets what it is (fail, warn or ignore); {require_synchronised} judges "
            "it even where no node is synchronised (a cluster that keeps time some other way)."
        ),
        first=(
            "On the node, run `timedatectl` and `chronyc tracking` (or `ntpq -p`): no service "
            "running, start and enable the one the other nodes use; one running but not in step, "
            "check that it reaches its servers (`chronyc sources -v`) through the node's firewall."
        ),
        healthy=(
            "`timedatectl` says 'System clock synchronized: yes' and `chronyc tracking` shows a "
            "'Leap status: Normal' with a reachable server."
        ),
    ),
    Explanation(
        item="no_answer",
        means=(
            "A node's clock could not be read: the clock script did not start, stopped answering or "
            "the connection failed. Its offset is unknown, and the same fault may stop the job "
            "there. An error, not a verdict on its clock."
        ),
        measured=(
            "The controller starts the clock script over the node's connection, waits for it to say "
            "it is ready, then sends its requests one by one; the reason is the first thing that "
            "went wrong."
        ),
        threshold=(
            f"The script must start within {_READY_S:g} seconds and answer each request within "
            f"{_ANSWER_S:g} seconds (both fixed in code); {{samples}} requests per node."
        ),
        first=(
            "Read the reason in the finding; run the node's Python by hand over SSH (`ssh NODE "
            "python3 -c 'import time; print(time.time())'`) to see whether it starts at once. A node "
            "slow to start a process is loaded or short of memory: look at it (`uptime`, `free`)."
        ),
        healthy="Every node answers its clock requests within milliseconds; none is listed as not answering.",
    ),
)
