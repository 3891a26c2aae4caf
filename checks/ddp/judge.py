"""The ``ddp`` judge: a seeded tiny model trained under DDP on every rank: all join, the loss falls,
parameters and gradients agree, no straggler in its own compute time. Findings name the rank and
its node. Pure: a job's outcome in, findings out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from checks.ddp.details import NAME, DdpDetails
from checks.job.failures import describe_ranks, rank_hosts
from checks.job.outcome import JobOutcome
from checks.job.phase import read_phase
from checks.job.settings import DdpSection
from preflight.config import Config
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import group_by_value
from preflight.status import by_severity


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms"


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _by_rank(values: Any, world: int) -> list[Any]:
    found = list(values) if isinstance(values, list) else []
    return (found + [None] * world)[:world] if world else found


def _differing(
    label: str, values: Sequence[Any], sums: Sequence[Any], hosts: Mapping[int, str], steps: int
) -> CheckResult | None:
    """The ranks whose ``values`` (hashes) differ from the majority's, with their checksums."""
    by_rank = {str(rank): str(v) for rank, v in enumerate(values) if v is not None}
    groups = group_by_value(by_rank)
    if len(groups) <= 1:
        return None
    majority, majority_ranks = groups[0]
    tie = len(groups[0][1]) == len(groups[1][1])
    odd = sorted(int(r) for r, v in by_rank.items() if tie or v != majority)
    shown = describe_ranks(odd, hosts)

    def checksum(rank: int) -> str:
        value = _finite(sums[rank]) if rank < len(sums) else None
        return "n/a" if value is None else f"{value:.10g}"

    if tie:
        summary = f"{label} differ after {steps} steps, with no majority: {shown}"
    else:
        summary = (
            f"{label} differ after {steps} steps on {shown}: checksum {checksum(odd[0])} "
            f"vs {checksum(int(majority_ranks[0]))} on the other ranks"
        )
    culprit_hosts = tuple(dict.fromkeys(hosts[r] for r in odd if r in hosts))
    details = {
        "item": label,
        "hashes": dict(by_rank),
        "checksums": {str(r): sums[r] for r in range(len(sums))},
    }
    return CheckResult(NAME, "fail", summary, culprit_hosts, details)


def _joining(section: Mapping[str, Any], world: int, joined: int) -> list[CheckResult]:
    """Failures when not every rank joined or the all-reduce of ones is not the world size."""
    results = []
    if world and joined != world:
        summary = f"only {joined} of {world} ranks joined the training"
        results.append(CheckResult(NAME, "fail", summary, (), {"item": "ranks_not_joined"}))
    ones = _finite(section.get("ones_allreduce"))
    if ones is None or (world and ones != world):
        shown = "no number" if ones is None else f"{ones:g}"
        summary = f"an all-reduce of ones gave {shown}, not the world size {world}"
        details = {"item": "wrong_ones_sum", "ones_allreduce": section.get("ones_allreduce")}
        results.append(CheckResult(NAME, "fail", summary, (), details))
    return results


def _loss(
    section: Mapping[str, Any], first: float | None, last: float | None, limit: float, steps: int
) -> list[CheckResult]:
    """A failure when the loss became NaN or infinite, or did not fall below ``limit`` times its start."""
    losses = [_finite(v) for v in section.get("losses") or []]
    if first is None or last is None or any(v is None for v in losses):
        bad = next((i for i, v in enumerate(losses) if v is None), None)
        where = f" at step {bad + 1}" if bad is not None else ""
        summary = f"the loss became NaN or infinite{where}"
        return [CheckResult(NAME, "fail", summary, (), {"item": "loss_not_finite"})]
    if not last < limit * first:
        summary = (
            f"the loss did not fall: {first:.3g} -> {last:.3g} in {steps} steps "
            f"(it must end below {limit:g}x where it started)"
        )
        details = {"item": "loss_not_falling", "losses": section.get("losses")}
        return [CheckResult(NAME, "fail", summary, (), details)]
    return []


def _stragglers(
    compute: Sequence[float | None], median: float, hosts: Mapping[int, str], cfg: DdpSection
) -> list[CheckResult]:
    """A failure for each rank whose compute step is far slower than the median rank's."""
    results = []
    stragglers = [
        rank
        for rank, value in enumerate(compute)
        if value is not None
        and median > 0
        and value > cfg.straggler_ratio * median
        and value - median >= cfg.straggler_min_excess_s
    ]
    for rank in stragglers:
        value = compute[rank]
        assert value is not None
        summary = (
            f"{describe_ranks([rank], hosts)} is a straggler: {_ms(value)} per compute step "
            f"vs the median {_ms(median)} ({value / median:.2g}x)"
        )
        culprit = (hosts[rank],) if rank in hosts else ()
        numbers = {
            "item": "straggler",
            "rank": rank,
            "compute_step_s": value,
            "median_compute_step_s": median,
        }
        results.append(CheckResult(NAME, "fail", summary, culprit, numbers))
    return results


def _ddp_details(
    section: Mapping[str, Any],
    hosts: Mapping[int, str],
    *,
    world: int,
    steps: int,
    first: float | None,
    last: float | None,
    joined: int,
    median: float,
    compute: list[float | None],
    wall: list[float | None],
    param_hashes: list[Any],
    grad_hashes: list[Any],
) -> DdpDetails:
    """The phase's evidence: its numbers, then the per-rank lists and each rank with its node."""
    details: DdpDetails = {
        "world_size": world,
        "steps": steps,
        "losses": section.get("losses"),
        "loss_first": first,
        "loss_last": last,
        "joined": joined,
        "ones_allreduce": section.get("ones_allreduce"),
        "median_compute_step_s": median,
        "duration_s": section.get("duration_s"),
        # Per-rank lists, by rank, for charts; "ranks" has the same numbers with each rank's node.
        "compute_step_s": compute,
        "wall_step_s": wall,
        "param_hashes": param_hashes,
        "grad_hashes": grad_hashes,
        "param_checksums": _by_rank(section.get("param_checksums"), world),
        "grad_checksums": _by_rank(section.get("grad_checksums"), world),
        "ranks": [
            {
                "rank": rank,
                "host": hosts.get(rank),
                "compute_step_s": compute[rank],
                "wall_step_s": wall[rank],
                "param_hash": param_hashes[rank],
                "grad_hash": grad_hashes[rank],
            }
            for rank in range(world)
        ],
    }
    if section.get("compute_work"):
        details["compute_work"] = str(section["compute_work"])
    return details


def judge_ddp(outcome: JobOutcome, config: Config) -> list[CheckResult]:
    """Findings for the DDP phase of a job: joining, the ones all-reduce, the loss, checksums, stragglers."""
    phase = read_phase(NAME, outcome)
    if phase.section is None:
        return phase.findings
    results, section, document = phase.findings, phase.section, phase.document

    section_cfg = config.section(DdpSection)
    hosts = rank_hosts(outcome)
    world = int(document.get("world_size") or 0)
    steps = int(section.get("steps") or 0)
    n_nodes = len({info.get("node_rank") for info in document.get("ranks") or []}) or len(outcome.nodes)

    joined = int(section.get("joined") or 0)
    results += _joining(section, world, joined)
    first = _finite(section.get("loss_first"))
    last = _finite(section.get("loss_last"))
    results += _loss(section, first, last, section_cfg.max_final_loss_ratio, steps)

    param_hashes = _by_rank(section.get("param_hashes"), world)
    grad_hashes = _by_rank(section.get("grad_hashes"), world)
    for label, values, sums in (
        ("parameters", param_hashes, _by_rank(section.get("param_checksums"), world)),
        ("gradients", grad_hashes, _by_rank(section.get("grad_checksums"), world)),
    ):
        finding = _differing(label, values, sums, hosts, steps)
        if finding is not None:
            results.append(finding)

    # Under DDP every rank's wall step waits for the slowest rank: only compute shows which one is slow.
    compute = [_finite(v) for v in _by_rank(section.get("compute_step_s"), world)]
    wall = [_finite(v) for v in _by_rank(section.get("wall_step_s"), world)]
    measured = [v for v in compute if v is not None]
    median = float(statistics.median(measured)) if measured else 0.0
    results += _stragglers(compute, median, hosts, section_cfg)

    details = _ddp_details(
        section,
        hosts,
        world=world,
        steps=steps,
        first=first,
        last=last,
        joined=joined,
        median=median,
        compute=compute,
        wall=wall,
        param_hashes=param_hashes,
        grad_hashes=grad_hashes,
    )
    if not any(r.status in ("fail", "error") for r in results):
        slowest = max(measured) if measured else 0.0
        summary = (
            f"{world} rank{'s' if world != 1 else ''} on {n_nodes} node{'s' if n_nodes != 1 else ''} "
            f"trained {steps} steps: "
            f"loss {first:.3g} -> {last:.3g}, parameters and gradients identical on every rank, "
            f"compute step {_ms(median)} (slowest {_ms(slowest)})"
        )
        results.append(CheckResult(NAME, "pass", summary, (), details))
        return results
    return with_check_details(by_severity(results), details)
