"""The ``intranode`` judge: the all-reduce among the ranks of each node (run on every node at once)
against the median node, and each GPU's host-device copy bandwidth against the median GPU. A slow
node is named for its inside-the-node path, so that the network checks can refer to it instead of
its NIC. Pure: a job's outcome in, findings out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from checks.intranode.details import Measured, SlowCopy, SlowInside
from checks.intranode.settings import IntranodeSection
from checks.job.failures import rank_hosts
from checks.job.outcome import JobOutcome, node_names
from checks.job.phase import read_phase
from preflight.config import Config
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold

NAME = "intranode"
SLOW_ITEM = "slow_inside_node"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def judge_intranode(outcome: JobOutcome, config: Config) -> list[CheckResult]:
    phase = read_phase(NAME, outcome)
    if phase.section is None:
        return phase.findings
    results, section = phase.findings, phase.section
    ratio_limit = config.section(IntranodeSection).slow_ratio
    names = node_names(outcome)
    hosts = rank_hosts(outcome)
    records = [r for r in section.get("ranks") or [] if isinstance(r, Mapping)]
    by_node: dict[str, float] = {}
    for record in records:
        busbw = _number(record.get("busbw_gbps"))
        node_rank = record.get("node_rank")
        if busbw is not None and isinstance(node_rank, int) and node_rank < len(names):
            by_node[names[node_rank]] = min(busbw, by_node.get(names[node_rank], busbw))
    details: Measured = {
        "node_busbw_gbps": by_node,
        "slow_hosts": [],
        "duration_s": section.get("duration_s"),
    }
    if by_node:
        median = float(statistics.median(by_node.values()))
        details["median_busbw_gbps"] = median
        for host, busbw in by_node.items():
            if busbw < ratio_limit * median:
                summary = (
                    f"{host} is slow inside itself: the all-reduce among its own ranks runs at "
                    f"{busbw / median:.2g}x the median node ({busbw:.3g} vs {median:.3g} GB/s busbw), "
                    "so the path between its GPUs or processes is the cause, not its network"
                )
                item: SlowInside = {
                    "item": SLOW_ITEM,
                    "node": host,
                    "ratio": busbw / median,
                    "busbw_gbps": busbw,
                }
                results.append(CheckResult(NAME, "fail", summary, (host,), dict(item)))
                details["slow_hosts"].append(host)
    copies: dict[str, dict[str, float]] = {}
    for record in records:
        copy = record.get("copy") if isinstance(record.get("copy"), Mapping) else None
        if copy is not None and isinstance(record.get("rank"), int):
            copies[str(record["rank"])] = {
                k: v for k in ("h2d_gbps", "d2h_gbps") if (v := _number(copy.get(k)))
            }
    details["copy_gbps"] = copies
    for direction, label in (("h2d_gbps", "host-to-device"), ("d2h_gbps", "device-to-host")):
        values = {rank: c[direction] for rank, c in copies.items() if direction in c}
        if len(values) < 2:
            continue
        median = float(statistics.median(values.values()))
        slow = sorted(int(rank) for rank, v in values.items() if v < ratio_limit * median)
        for rank in slow:
            host = hosts.get(rank, f"rank {rank}")
            summary = (
                f"{host}: rank {rank}'s GPU copies {label} at {values[str(rank)] / median:.2g}x the "
                f"median GPU ({values[str(rank)]:.3g} vs {median:.3g} GB/s): check its PCIe link"
            )
            slow_copy: SlowCopy = {"item": "slow_copy", "rank": rank}
            results.append(CheckResult(NAME, "fail", summary, (host,), dict(slow_copy)))
    if not any(r.status in ("fail", "error") for r in results):
        shown = ", ".join(f"{h} {v:.3g}" for h, v in list(by_node.items())[:8])
        summary = f"the all-reduce inside each of {fold(by_node)} runs alike ({shown} GB/s busbw)"
        if copies:
            summary += f"; host-device copies alike on {len(copies)} GPUs"
        results.append(CheckResult(NAME, "pass", summary, (), dict(details)))
        return results
    return with_check_details(results, details)
