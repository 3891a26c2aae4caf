"""What each item of the history store's findings means (``preflight explain``): they are not a
check's, and come under ``history``."""

from __future__ import annotations

from preflight.explain import Explanation
from preflight.history.annotate import MIN_PAST_RUNS, PAST_RUNS, SLOWER
from preflight.history.local import (
    GPU_MISSING,
    GPU_SWAPPED,
    HCA_MISSING,
    HCA_RATE_CHANGED,
    PARTS_ADDED,
    VERSIONS_CHANGED,
)
from preflight.history.session import IDENTITY_CLASH

# How a --local run (a job's prolog) finds what it compares the node with.
_LAST_FULL_RUN = (
    "A `--local` run (a job's prolog) reads the node's last full run from the store (the latest run "
    "without `--local` that reached it, found by its identity whatever name reached it) and compares "
)

EXPLAINS = (
    Explanation(
        item="store",
        means=(
            "The history store could not be read or written, so this run is not in the history and "
            "its parts were not compared with their own past. The run's verdict is the checks' own."
        ),
        measured="Opening, reading and writing the SQLite file or the PostgreSQL database the run uses.",
        threshold="",
        first=(
            "Read the error in the finding: a path the user cannot write, a full disk, a database "
            "that refused the connection. Fix it, or point the run at another store with "
            "`[history] store`, or turn the store off with `--no-history`."
        ),
        healthy="No finding under history: the run was written and read back.",
    ),
    Explanation(
        item=SLOWER,
        means=(
            "A rate judged against its own past (a GPU's compute rate, a node's all-reduce bus "
            "bandwidth) is well below what the same part measured in its recent runs, though it may "
            "still pass against this run's other nodes: a part that is wearing, or was changed."
        ),
        measured=(
            f"The rate is compared with the median of the same part's last {PAST_RUNS} runs in the "
            f"window (at least {MIN_PAST_RUNS} of them), and with a prediction bound from those runs' "
            "own spread, so a part whose rate moves a lot run to run is not named for moving."
        ),
        threshold=(
            "More than {history.slower_margin} (a share: 0.1 is 10 %) below its own median, and below "
            "the bound, within the last {history.window_days} days."
        ),
        first=(
            "Look at the part's trend (`preflight history`): a step down on one date points at what "
            "changed then (a driver, a firmware, a move); a slope points at the part itself (a GPU's "
            "cooling, a cable). Re-run to confirm before draining."
        ),
        healthy="Its rate within its own run-to-run spread of its median: no warning.",
    ),
    Explanation(
        item=GPU_SWAPPED,
        means=(
            "A GPU slot of the node holds another GPU (another serial) than at its last full run: a "
            "GPU was replaced or moved since the whole cluster was last checked together, and the "
            "new one has not been through the checks that compare it with its peers."
        ),
        measured=_LAST_FULL_RUN + "each GPU slot's serial.",
        threshold="",
        first=(
            "If the swap was planned, run a full check (without `--local`) on the node's group to burn "
            "and compare the new GPU; if not, find out who changed the node before using it."
        ),
        healthy="Every slot holds the serial it held at the last full run.",
    ),
    Explanation(
        item=GPU_MISSING,
        means=(
            "A GPU slot that held a GPU at the node's last full run is empty now: the GPU fell off the "
            "bus, was pulled, or the driver no longer sees it. The job would start with fewer GPUs "
            "on this node than on its peers, or fail."
        ),
        measured=_LAST_FULL_RUN + "its GPU slots with the GPUs NVML or nvidia-smi lists now.",
        threshold="",
        first=(
            "Look for XID 79 or PCIe errors in the node's kernel log (`dmesg -T | grep -i xid`), then "
            "drain the node and reboot it; if the GPU is still missing, have it reseated or replaced."
        ),
        healthy="Every slot of the last full run holds a GPU.",
    ),
    Explanation(
        item=VERSIONS_CHANGED,
        means=(
            "The driver, CUDA, cuDNN, NCCL, torch or Python on the node differ from its last full "
            "run: an upgrade or a changed environment that the full check has not seen, which may "
            "now differ from the node's peers."
        ),
        measured=_LAST_FULL_RUN + "the versions both runs report.",
        threshold="",
        first=(
            "If the change was meant for every node, run a full check to see that they agree; if "
            "not, restore the node's image or environment (`versions` in a full run names the nodes "
            "that differ)."
        ),
        healthy="The same versions as at the last full run.",
    ),
    Explanation(
        item=HCA_MISSING,
        means=(
            "An InfiniBand or RoCE port the node had at its last full run (by node GUID and port) is "
            "gone: an HCA the driver no longer sees, or a card removed. NCCL would use fewer rails "
            "on this node, or fall back to slower paths."
        ),
        measured=_LAST_FULL_RUN + "its HCA ports by node GUID and port number.",
        threshold="",
        first=(
            "Check `ibstat` and `dmesg` on the node for the missing device; drain the node until it "
            "has all its ports, then run a full check."
        ),
        healthy="Every HCA port of the last full run is present.",
    ),
    Explanation(
        item=HCA_RATE_CHANGED,
        means=(
            "An HCA port runs at another rate than at the node's last full run: a link that trained "
            "down (a cable, a transceiver, a switch port) or up. A slower port slows every "
            "collective that crosses it."
        ),
        measured=_LAST_FULL_RUN + "each HCA port's rate (`/sys/class/infiniband/*/ports/*/rate`).",
        threshold="",
        first=(
            "Read the port's rate and width with `ibstat`; a lower rate: reseat or replace the cable "
            "or transceiver and check the switch port, then run a full check."
        ),
        healthy="Every port at the rate it had at the last full run.",
    ),
    Explanation(
        item=PARTS_ADDED,
        means=(
            "The node has a part its last full run did not see: a GPU in a slot that was empty, or an "
            "HCA port it did not have. A note: nothing is wrong, but the new part has not been "
            "compared with its peers yet."
        ),
        measured=_LAST_FULL_RUN + "its GPU slots and HCA ports.",
        threshold="",
        first="Run a full check on the node's group so the new part is burned and compared.",
        healthy="The same parts as at the last full run.",
    ),
    Explanation(
        item=IDENTITY_CLASH,
        means=(
            "Two nodes of the run gave the same identity (the same host name, say, on machines "
            "cloned from one image), so the history cannot tell their parts apart; each is kept "
            "under the name that reached it."
        ),
        measured="The identity each node's facts give (docs/node-identity.md), compared across the run.",
        threshold="",
        first=(
            "Give each machine its own host name and machine id (`hostnamectl`, "
            "`/etc/machine-id` regenerated after cloning)."
        ),
        healthy="Every node with an identity of its own.",
    ),
)
