"""The inside-the-node phase of the job, declared beside the check that judges it: an all-reduce
among each node's ranks, every node at once, and each GPU's copies to and from the host
(``checks.job.node.intranode``). A node slow inside itself is the root cause of its slowness in
the network checks; its own findings refer to its GPUs' NVLinks down (``hardware``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checks.intranode.judge import NAME
from checks.intranode.settings import SETTINGS
from checks.job.declaration import JobPhase, Timed
from preflight.config import Config

# Inside each node: an all-reduce of this many bytes, best of this many trials, and each GPU's
# copies to and from the host.
INTRANODE_BYTES = 4 << 20
INTRANODE_ITERS = 3
COPY_BYTES = 256 << 20
# Seconds the phase may take: the all-reduce inside each node and the GPUs' copies, which take a
# fraction of a second on healthy nodes.
BUDGET_S = 15.0


def _sent(config: Config, names: Sequence[str], gpu: bool | None) -> dict[str, Any]:
    return {"size_bytes": INTRANODE_BYTES, "iters": INTRANODE_ITERS, "copy_bytes": COPY_BYTES}


def _time(sent: Mapping[str, Any]) -> tuple[Timed, ...]:
    return (Timed("the all-reduce inside each node and the copies", 1, BUDGET_S, 0.0),)


PHASE = JobPhase(
    name=NAME,
    label="inside-the-node",
    node="checks.job.node.intranode",
    settings=SETTINGS,
    sent=_sent,
    time=_time,
    root_causes={"slow_inside_node": "being slow inside itself"},
    refers_to=("hardware",),
    speed_keys=("ratio", "busbw_gbps"),
)
