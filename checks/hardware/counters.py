"""The fabric's error counters, judged twice: as the facts found them (counted since they were last
cleared, so mostly the noise every healthy fabric accumulates: notes), and by how much they grew
while the job drove traffic over the fabric (evidence, with its rate).

What the facts found is a note, with one exception: a counter of :data:`ALONE_COUNTERS` above 0 on
a port where every other node reports the same port at 0 (a warning). A working H100 node in
service has shown ``port_rcv_errors`` 14 on every port and ``link_downed`` 255 (the counter's
maximum) on one of them (tests/data/hardware/counters): a count since the last clear says little
until it grows. An AWS EFA port's error counters (its ``hw_counters``, counted since the driver
loaded) are judged the same way: ``rdma_read_wr_err`` and ``rdma_write_wr_err`` (RDMA operations
that failed), ``retrans_timeout_events`` (SRD traffic that timed out and changed its network
path), ``unresponsive_remote_events``, ``impaired_remote_conn_events`` (a connection throttled to
a lower rate) and ``no_completion_cmds`` (an admin command the device never completed, after which
the driver closes its admin queue) warn on a port alone in counting them; ``rx_drops``,
``retrans_pkts`` (SRD's own loss recovery) and ``cmds_err`` (which counts commands the device
refused, such as a process's over its limits) are notes however they compare.

During the job: ``link_downed`` growing is a link that went down and came back while the job ran
(a fail on a port the job's fabric uses); ``symbol_error`` growing faster than the InfiniBand
specification's bit error rate allows (120 an hour, for a rate of 10^-12) is a cable or transceiver
going bad (a fail on such a port, a warning below that rate); the other error counters growing are
a warning. ``port_xmit_wait`` counts the ticks a port waited for credit to send, and grows under any
load: it is kept in the samples and judged nowhere. Interface drops (``rx_dropped``, ``tx_dropped``)
grow on healthy hosts too (the kernel counts frames of protocols nobody on the host listens to):
a note; interface errors growing are a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checks.hardware.details import CounterGrowth, GrowthRow, IbCounters
from checks.hardware.ib_ports import port_label
from checks.job.outcome import JobOutcome, NodeOutcome
from preflight.facts import IbPort, NodeFacts
from preflight.model import CheckResult
from preflight.status import Status

HARDWARE = "hardware"
# Counters that count time or traffic, not errors: never judged.
NOT_ERRORS = frozenset({"port_xmit_wait"})
# The largest value each port counter holds (the InfiniBand PortCounters attribute's widths): a
# counter there has stopped counting, and cannot show growth until it is cleared.
COUNTER_MAX = {
    "symbol_error": 0xFFFF,
    "link_error_recovery": 0xFF,
    "link_downed": 0xFF,
    "port_rcv_errors": 0xFFFF,
    "port_rcv_remote_physical_errors": 0xFFFF,
    "port_xmit_discards": 0xFFFF,
    "port_xmit_wait": 0xFFFFFFFF,
}
# Counters that warn on a port counting them where every other node's same port counts none.
ALONE_COUNTERS = (
    "link_downed",
    "no_completion_cmds",
    "rdma_read_wr_err",
    "rdma_write_wr_err",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
)
# Counters whose growth on a port of the job's fabric fails the node.
LINK_COUNTERS = ("link_downed", "symbol_error")
# Counters whose growth during the job is a note: EFA's own recovery under load (SRD retransmits
# and drops it recovers from) and commands the device refused.
QUIET_GROWTH = frozenset({"rx_drops", "retrans_pkts", "cmds_err"})
# The InfiniBand specification's bit error rate (10^-12) as symbol errors an hour.
SYMBOL_ERRORS_PER_HOUR = 120.0
NET_ERRORS = ("rx_errors", "tx_errors")
SINCE_CLEARED = "(since the counters were last cleared; what grows during the job is judged there)"
NET_DROPS = ("rx_dropped", "tx_dropped")


def _counted(port: IbPort) -> dict[str, int]:
    return {k: v for k, v in sorted(port.counters.items()) if v and k not in NOT_ERRORS}


def _value_text(counter: str, value: int) -> str:
    full = " (its maximum: it counts no more until cleared)" if value == COUNTER_MAX.get(counter) else ""
    return f"{counter} {value}{full}"


def _peer_counts(nodes: Mapping[str, NodeFacts]) -> dict[tuple[str, str, str], dict[str, int]]:
    """(device, port, counter) -> node -> count, for the counters of :data:`ALONE_COUNTERS`."""
    counts: dict[tuple[str, str, str], dict[str, int]] = {}
    for host, node in nodes.items():
        for port in node.ib_ports:
            for counter in ALONE_COUNTERS:
                if counter in port.counters:
                    counts.setdefault((port.device, str(port.port), counter), {})[host] = port.counters[
                        counter
                    ]
    return counts


def _alone(host: str, port: IbPort, counts: Mapping[tuple[str, str, str], Mapping[str, int]]) -> list[str]:
    """The counters of :data:`ALONE_COUNTERS` ``port`` counts where every other node that reports
    the same port counts none (a port no other node reports is not compared)."""
    alone = []
    for counter in ALONE_COUNTERS:
        others = {
            h: v for h, v in counts.get((port.device, str(port.port), counter), {}).items() if h != host
        }
        if port.counters.get(counter) and others and not any(others.values()):
            alone.append(counter)
    return alone


def _node_counters(
    host: str, node: NodeFacts, counts: Mapping[tuple[str, str, str], Mapping[str, int]]
) -> CheckResult | None:
    """A node's note, or its warning where a port counts an error alone."""
    counted = {port_label(p): c for p in node.ib_ports if (c := _counted(p))}
    if not counted:
        return None
    alone = {port_label(p): found for p in node.ib_ports if (found := _alone(host, p, counts))}
    shown = "; ".join(
        f"{name} " + ", ".join(_value_text(k, v) for k, v in values.items())
        for name, values in counted.items()
    )
    details: IbCounters = {"item": "ib_counters", "node": host, "counters": counted}
    if not alone:
        summary = f"{host}: {shown} {SINCE_CLEARED}"
        return CheckResult.note(HARDWARE, summary, (host,), dict(details))
    downed = [name for name, found in alone.items() if "link_downed" in found]
    if downed:
        details["link_downed_alone"] = downed
    where = "; ".join(f"{', '.join(found)} on {name}" for name, found in alone.items())
    summary = (
        f"{host}: {shown} (since the counters were last cleared); {where} where the other nodes' same port "
        "counts none"
    )
    details["alone"] = alone
    return CheckResult(HARDWARE, "warn", summary, (host,), dict(details))


def facts_results(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Per node with error counters above 0: a note naming each port and its counts, or a warning
    where a port counts a counter of :data:`ALONE_COUNTERS` while every other node's same port
    reads 0 (``alone``: port -> those counters; ``link_downed_alone`` lists the ports counting
    ``link_downed``)."""
    counts = _peer_counts(nodes)
    return [r for host, node in nodes.items() if (r := _node_counters(host, node, counts)) is not None]


def _grown(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Counter -> (before, after) for the counters that grew (a counter that went down was cleared)."""
    grown = {}
    for name, start in before.items():
        end = after.get(name)
        if isinstance(start, int) and isinstance(end, int) and end > start:
            grown[name] = (start, end)
    return grown


def _row(where: str, counter: str, start: int, end: int, seconds: float) -> GrowthRow:
    growth = end - start
    return {
        "where": where,
        "counter": counter,
        "before": start,
        "after": end,
        "growth": growth,
        "per_s": round(growth / seconds, 4) if seconds > 0 else None,
    }


def _ib_status(counter: str, row: GrowthRow, fabric: bool, seconds: float) -> Status:
    if counter in QUIET_GROWTH:
        return "pass"
    if counter not in LINK_COUNTERS or not fabric:
        return "warn"
    if counter == "symbol_error" and seconds > 0 and row["growth"] * 3600 / seconds <= SYMBOL_ERRORS_PER_HOUR:
        return "warn"
    return "fail"


def _rate_text(row: GrowthRow) -> str:
    per_s = row["per_s"]
    return f"{row['where']} {row['counter']} +{row['growth']}" + (f" ({per_s:.3g}/s)" if per_s else "")


def _node_growth(node: NodeOutcome, check: str) -> CheckResult | None:
    samples = node.counters or {}
    before, after = samples.get("before"), samples.get("after")
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return None
    start_t, end_t = before.get("t"), after.get("t")
    seconds = 0.0
    if isinstance(start_t, int | float) and isinstance(end_t, int | float):
        seconds = max(0.0, float(end_t) - float(start_t))
    used = {d.name for d in node.nccl.ib_devices} if node.nccl else set()
    judged: list[tuple[Status, GrowthRow]] = []
    for key, port in (after.get("ib") or {}).items():
        earlier = (before.get("ib") or {}).get(key)
        if not isinstance(port, Mapping) or not isinstance(earlier, Mapping):
            continue
        device, _, number = str(key).partition("/")
        # A port of the job's fabric: InfiniBand, or a RoCE device NCCL said it used.
        fabric = port.get("link_layer") == "InfiniBand" or device in used
        grown = _grown(earlier.get("counters") or {}, port.get("counters") or {})
        for counter, (start, end) in grown.items():
            if counter in NOT_ERRORS:
                continue
            row = _row(f"{device} port {number}", counter, start, end, seconds)
            judged.append((_ib_status(counter, row, fabric, seconds), row))
    for name, stats in (after.get("net") or {}).items():
        earlier = (before.get("net") or {}).get(name)
        if not isinstance(stats, Mapping) or not isinstance(earlier, Mapping):
            continue
        for counter, (start, end) in _grown(earlier, stats).items():
            if counter in NET_ERRORS or counter in NET_DROPS:
                status: Status = "warn" if counter in NET_ERRORS else "pass"
                judged.append((status, _row(str(name), counter, start, end, seconds)))
    if not judged:
        return None
    order: Sequence[Status] = ("fail", "warn", "pass")
    worst = next(s for s in order if any(status == s for status, _ in judged))
    judged.sort(key=lambda item: order.index(item[0]))
    shown = "; ".join(_rate_text(row) for _, row in judged)
    during = f"during the {seconds:.0f} s job" if seconds else "during the job"
    details: CounterGrowth = {
        "item": "counter_growth",
        "node": node.host,
        "seconds": round(seconds, 3),
        "growth": [row for _, row in judged],
    }
    if worst == "pass":
        summary = f"{node.host}: {shown} {during} (drops and retransmits a healthy host counts too)"
        return CheckResult.note(check, summary, (node.host,), dict(details))
    summary = f"{node.host}: {shown} {during}, while preflight drove traffic over the fabric"
    return CheckResult(check, worst, summary, (node.host,), details)


def growth_results(outcome: JobOutcome, check: str) -> list[CheckResult]:
    """Per node whose counters grew during the job: one finding naming each port or interface, the
    counter, its growth and its rate (the worst counter sets its status), or a note for drops."""
    return [r for node in outcome.nodes if (r := _node_growth(node, check)) is not None]
