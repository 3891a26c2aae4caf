"""One root cause, one finding: a node that ``compute`` found slow is slow in every collective too,
so the network checks' findings about that node's speed (a slow node or link, a pair under the
floor, a DDP straggler) are turned into references to the compute finding instead of sending the
user to the node's NIC; so are they for a node slow inside itself (``intranode``) or with NVLinks
down (``hardware``), and ``intranode``'s own for the latter; and for a node with a slow card on one
rail (``rails``), which names the card. Pure: findings in, findings out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from checks.compute.details import NAME as COMPUTE
from preflight.model import CheckResult
from preflight.nodeset import fold

ITEM = "see_compute"
ADVICE = (
    "Fix what the finding it points to names for this node first (a slow GPU or CPU, NVLinks down), "
    "then rerun: its network was not the cause."
)
# Keys by which a network finding says it is about speed (checks.allreduce, checks.ddp judges).
_SPEED_KEYS = ("ratio", "link", "floor_gbps", "compute_step_s", "busbw_gbps")


# Root-cause findings the network checks refer to: the item, and what it says of the node
# (compute's, intranode's, and hardware's NVLinks down, which slow every collective of the node).
ROOT_CAUSES = {
    "slow_compute": "being slow at compute",
    "slow_inside_node": "being slow inside itself",
    "gpu_nvlink": "having NVLinks down",
    "slow_rail": "having a slow card on one of its rails",
    "slow_on_every_rail": "being slow on every rail",
}


# The checks whose findings can be a node's root cause, in the order they take precedence.
CAUSE_CHECKS = ("compute", "hardware", "intranode", "rails")


def causes_in(findings: Mapping[str, Sequence[CheckResult]]) -> list[CheckResult]:
    """The findings of ``CAUSE_CHECKS`` among a check's ``findings``, compute's first."""
    return [result for name in CAUSE_CHECKS for result in findings.get(name, ())]


def slow_at_compute(compute: Sequence[CheckResult]) -> dict[str, CheckResult]:
    """Host -> the finding (compute, or inside the node) that names it slow."""
    found: dict[str, CheckResult] = {}
    for result in compute:
        if result.status == "fail" and result.details.get("item") in ROOT_CAUSES:
            for host in result.hosts:
                found.setdefault(host, result)
    return found


def _about_speed(details: Mapping[str, Any]) -> bool:
    return any(key in details for key in _SPEED_KEYS)


def refer_to_compute(
    results: Sequence[CheckResult], compute: Sequence[CheckResult], not_by: str | None = "the network"
) -> list[CheckResult]:
    """``results`` of a network check, each finding about the speed of a node that is slow at
    compute (or has another root cause of ``compute``, the findings of the checks it reads)
    turned into a warning that refers to that finding; ``not_by``: what it clears."""
    slow = slow_at_compute(compute)
    if not slow:
        return list(results)
    referred: list[CheckResult] = []
    for result in results:
        named = [h for h in result.hosts if h in slow]
        if result.status not in ("fail", "warn") or not named or not _about_speed(result.details):
            referred.append(result)
            continue
        cause = slow[named[0]]
        ratio = cause.details.get("ratio")
        unit = "rank" if cause.check == COMPUTE else "node"
        # A slow rail is the node's network: its ratio is against the rail's healthy tests.
        in_network = cause.details.get("item") in ("slow_rail", "slow_on_every_rail")
        how = f" at {ratio:.2g}x the median {unit}" if isinstance(ratio, float) and not in_network else ""
        being = ROOT_CAUSES[str(cause.details.get("item"))]
        summary = f"{result.summary.rstrip('.')}; caused by {fold(named)} {being}{how}"
        summary += f" (see the {cause.check} finding)"
        if not_by and not in_network:
            summary += f", not by {not_by}"
        details = {**result.details, "item": ITEM, "refers_to": cause.check, "slow_at_compute": named}
        referred.append(dataclasses.replace(result, status="warn", summary=summary, details=details))
    return referred
