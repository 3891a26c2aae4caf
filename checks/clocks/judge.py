"""The ``clocks`` judge (pure): each node's clock offset from the controller, measured by the
midpoint method over the node's connection, compared between the nodes; and whether a time
service keeps each node's clock synchronised.

With three nodes or more, a node is judged against the median of the nodes (a controller whose own
clock is off moves every node alike, and is only said); with fewer, against the controller. A
node is named only when its offset is past the threshold by more than the measurement's
uncertainty (half the round trip).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

from checks.clocks.details import (
    ClocksDetails,
    NodeClock,
    Offset,
    Rows,
    ServiceState,
    Unsynchronised,
)
from checks.clocks.settings import ClocksSection
from preflight.facts import TimeFacts
from preflight.findings import finding, no_answer
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold, group_by_value, natural_key
from preflight.status import Status

NAME = "clocks"


@dataclass(frozen=True)
class ClockSample:
    """One request answered: the controller's clock when it was sent and when the answer came
    back, and the node's clock in between (seconds since the epoch)."""

    sent_s: float
    received_s: float
    node_s: float

    @property
    def round_trip_s(self) -> float:
        return self.received_s - self.sent_s

    @property
    def offset_s(self) -> float:
        """The node's clock minus the controller's, taking the node's reading at the midpoint."""
        return self.node_s - (self.sent_s + self.received_s) / 2

    @property
    def uncertainty_s(self) -> float:
        """The node read its clock somewhere within the round trip: half of it either way."""
        return self.round_trip_s / 2


def best_sample(samples: list[ClockSample]) -> ClockSample:
    """The sample with the shortest round trip: the least uncertain."""
    return min(samples, key=lambda s: s.round_trip_s)


@dataclass(frozen=True)
class ClocksObservation:
    """Each node's best sample, the nodes that gave none (and why), and each node's time facts."""

    samples: Mapping[str, ClockSample]
    errors: Mapping[str, str] = field(default_factory=dict)
    time: Mapping[str, TimeFacts | None] = field(default_factory=dict)


def service_state(time: TimeFacts | None) -> ServiceState:
    """What can honestly be said about a node's time service: the kernel's own flag where it
    gives one; a time service process alone does not prove the clock is in step."""
    if time is None or time.synchronised is None:
        return "unknown"
    return "synchronised" if time.synchronised else "unsynchronised"


def signed(seconds: float) -> str:
    """``+120 s``, ``+2.31 s``, ``-4.2 ms``; ``0.0 ms`` below a twentieth of a millisecond."""
    if abs(seconds) < 0.00005:
        return "0.0 ms"
    if abs(seconds) >= 100:
        return f"{seconds:+,.0f} s"
    return f"{seconds * 1000:+.1f} ms" if abs(seconds) < 1 else f"{seconds:+.2f} s"


def _result(status: Status, summary: str, hosts: list[str], details: ClocksDetails) -> CheckResult:
    return finding(NAME, status, summary, hosts, details, natural_order=True)


def _clock_rows(
    obs: ClocksObservation, reference: float, cfg: ClocksSection
) -> tuple[dict[str, NodeClock], dict[str, float]]:
    """Each node's row (offset, from the reference, time service) and the nodes past the allowed offset."""
    rows: dict[str, NodeClock] = {}
    skewed: dict[str, float] = {}
    for host, sample in obs.samples.items():
        deviation = sample.offset_s - reference
        rows[host] = {
            "offset_s": sample.offset_s,
            "uncertainty_s": sample.uncertainty_s,
            "from_nodes_s": deviation,
        }
        if abs(deviation) - sample.uncertainty_s > cfg.max_offset_s:
            skewed[host] = deviation
    for host, time in obs.time.items():
        row = rows.setdefault(host, {})
        row["service"] = service_state(time)
        row["services"] = list(time.services) if time is not None else []
    return rows, skewed


def _skewed_clocks(
    obs: ClocksObservation, skewed: Mapping[str, float], against: str, cfg: ClocksSection
) -> list[CheckResult]:
    """A warning, or past the failing offset a failure, for each node whose clock is too far off."""
    findings: list[CheckResult] = []
    for host in sorted(skewed, key=natural_key):
        deviation = skewed[host]
        sample = obs.samples[host]
        status: Status = "fail" if abs(deviation) - sample.uncertainty_s > cfg.fail_offset_s else "warn"
        findings.append(
            _result(
                status,
                f"{host}: its clock is {signed(deviation)} (\u00b1{sample.uncertainty_s * 1000:.1f} ms) from "
                f"{against}, past the {cfg.max_offset_s:g} s allowed: logs and timeouts disagree between "
                "nodes, and past 5 minutes Kerberos and signed requests are refused",
                [host],
                Offset(
                    item="offset", offset_s=deviation, uncertainty_s=sample.uncertainty_s, reference=against
                ),
            )
        )
    return findings


def _unsynchronised(rows: Mapping[str, NodeClock], cfg: ClocksSection) -> list[CheckResult]:
    """A finding for the nodes no time service keeps synchronised, where that is judged."""
    # Judged against the other nodes: unsynchronised where others are synchronised is odd; every
    # node alike is the cluster's way of keeping time, only said unless required. One node alone
    # has no peer to drift from.
    states = {h: row.get("service") for h, row in rows.items()}
    loose = [h for h, state in states.items() if state == "unsynchronised"]
    judged = cfg.require_synchronised or "synchronised" in states.values()
    if not (cfg.unsynchronised != "ignore" and len(rows) > 1 and judged and loose):
        return []
    running = {h: ", ".join(rows[h].get("services", [])) for h in loose}
    seen = "; ".join(f"{fold(hosts)} runs {text}" for text, hosts in group_by_value(running) if text)
    return [
        _result(
            cfg.unsynchronised,
            f"{fold(loose)}: the kernel says no time service keeps the clock synchronised"
            + (f" ({seen}, not in step yet or without a reachable server)" if seen else "")
            + ": clocks that agree now drift apart",
            loose,
            Unsynchronised(item="unsynchronised"),
        )
    ]


def _in_step_summary(
    obs: ClocksObservation,
    rows: Mapping[str, NodeClock],
    reference: float,
    against_nodes: bool,
    cfg: ClocksSection,
) -> str:
    """The pass's summary: how close the clocks are, the controller's own offset, the kernel clocks."""
    offsets = {h: s.offset_s for h, s in obs.samples.items()}
    spread = max(offsets.values()) - min(offsets.values())
    worst = max(s.uncertainty_s for s in obs.samples.values())
    if len(offsets) == 1:
        summary = f"the node's clock is {signed(next(iter(offsets.values())))} from the controller's"
    else:
        summary = f"{len(offsets)} clocks within {spread * 1000:.0f} ms of each other"
    summary += f" (\u00b1{worst * 1000:.1f} ms)"
    if against_nodes and abs(reference) > cfg.max_offset_s:
        summary += f"; the controller's clock is {signed(-reference)} from theirs"
    for state, hosts in group_by_value({h: row.get("service", "unknown") for h, row in rows.items()}):
        summary += f"; kernel clock {state} on {fold(hosts)}"
    return summary


def judge_clocks(obs: ClocksObservation, cfg: ClocksSection) -> list[CheckResult]:
    offsets = {h: s.offset_s for h, s in obs.samples.items()}
    against_nodes = len(offsets) >= 3
    reference = statistics.median(offsets.values()) if against_nodes else 0.0
    rows, skewed = _clock_rows(obs, reference, cfg)
    against = "the other nodes' median" if against_nodes else "the controller's clock"
    findings = _skewed_clocks(obs, skewed, against, cfg)
    findings += _unsynchronised(rows, cfg)
    unanswered = no_answer(NAME, obs.errors, "the clock could not be read")
    findings += [unanswered] if unanswered else []
    details: Rows = {
        "nodes": rows,
        "reference": against,
        "controller_offset_s": reference if against_nodes else None,
    }
    if findings:
        return with_check_details(findings, details)
    if not obs.samples:
        return [_result("skip", "no node answered", [], details)]
    return [_result("pass", _in_step_summary(obs, rows, reference, against_nodes, cfg), [], details)]
