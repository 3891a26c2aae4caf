"""The findings about the job itself, for the check of a phase: the nodes that failed in it
(:mod:`checks.job.failures` diagnoses them), a phase that raised on some rank, the job that could not
start, and the table a finding shows of its nodes' failures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checks.job.failures import (
    PEER_RE,
    TIMEOUT_RE,
    FailureKind,
    NodeFailure,
    clean_message,
    describe_ranks,
    explain_failures,
    missed_barrier_in,
    never_reached,
    phases_reached,
    rank_hosts,
)
from checks.job.node.harness import PhaseError
from checks.job.outcome import JobOutcome, phase_error_text
from checks.job.stalled_node import stalled_node
from preflight.model import CheckResult
from preflight.nodeset import fold
from preflight.view import MAX_TABLE_ROWS, Block, Table, TCell, plain

# The item (``details.item``) of a finding naming culprits of each kind (checks/job/explain.py).
_KIND_ITEMS: dict[FailureKind, str] = {
    "lost": "node_lost",
    "never_joined": "never_joined",
    "hung": "missed_barrier",
    "crashed": "node_crashed",
    "timed_out": "job_timed_out",
}


def failure_item(failure: NodeFailure) -> str:
    """The item of a finding that names ``failure``'s node as a culprit. Victims and nodes
    preflight ended are never culprits; a node that failed in a way of its own is ``node_crashed``."""
    if failure.kind == "crashed" and failure.by_signal:
        return "killed_by_signal"
    return _KIND_ITEMS.get(failure.kind, "node_crashed")


def _failure_summary(failures: Sequence[NodeFailure], phase: str | None = None) -> str:
    """One line for failures of one kind and reason, hosts folded: ``node[2-3] never joined: ...``;
    ``phase``: the phase the job failed in, where the finding is that phase's."""
    first = failures[0]
    hosts = fold([f.host for f in failures])
    if first.kind == "lost":
        return f"{hosts} {first.said(phase)}"
    if first.kind == "never_joined":
        return f"{hosts} never joined: {first.reason}"
    if first.kind == "hung":
        return first.reason if len(failures) == 1 else f"{hosts}: {first.reason}"
    if first.kind == "timed_out":
        return f"{hosts} did not finish before the job's deadline, and no node reported an error"
    if first.ranks or first.peer_lost:
        # What it saw at the barrier, or the connection it lost, reads on from its name.
        return f"{hosts} {first.reason}"
    return f"{hosts}: {first.reason}"


def failing_phase(outcome: JobOutcome) -> str | None:
    """The phase the job was in when it failed: the last one it started, else its first."""
    reached = phases_reached(outcome)
    if reached:
        return reached[-1]
    return outcome.phases[0] if outcome.phases else None


def job_results(check: str, outcome: JobOutcome, phase: str) -> list[CheckResult]:
    """Findings about the launch and the nodes, for the check that judges ``phase``.

    The phase the job failed in gets ``fail`` findings naming the culprits; a phase the job never
    reached refers to it ("not run ... (see allreduce)": one cause, one finding). A node that
    failed after rank 0 printed this phase's results (at teardown) is a ``warn``: the results
    stand. Nothing when every node finished cleanly.
    """
    if outcome.launch_error:
        first = outcome.phases[0] if outcome.phases else check
        if check != first:
            summary = f"not run: the job could not be started (see {first})"
            return [CheckResult(check, "skip", summary, (), {"item": "job_not_run"})]
        summary = f"the job could not be started: {outcome.launch_error}"
        return [CheckResult(check, "error", summary, (), {"item": "job_not_started"})]
    failures = explain_failures(outcome)
    culprits = [f for f in failures if f.culprit]
    if not culprits:
        return []
    ended = [f.host for f in failures if f.kind == "ended"]
    details: dict[str, Any] = {
        "failures": [
            {"host": f.host, "kind": f.kind, "reason": f.reason, "culprit": f.culprit, "ranks": list(f.ranks)}
            for f in failures
        ],
        "phases_reached": phases_reached(outcome),
        "exit_status": {n.host: n.exit_status for n in outcome.nodes},
    }
    silent = {
        n.host: {"silent_s": n.silent_s, "last_phase": n.last_phase, "since": n.silent_since}
        for n in outcome.nodes
        if n.silent_s
    }
    if silent:
        details["silent"] = silent
    groups: dict[tuple[str, str], list[NodeFailure]] = {}
    for failure in culprits:
        groups.setdefault((failure.kind, failure.reason if failure.kind != "lost" else ""), []).append(
            failure
        )
    where = failing_phase(outcome)
    reached = phases_reached(outcome)
    results_in = isinstance((outcome.document or {}).get(phase), Mapping)
    # Where the job failed in this phase, before its results were in, a node that stopped answering
    # did so during this phase.
    summaries = [
        _failure_summary(group, phase if where == phase and not results_in else None)
        for group in groups.values()
    ]
    if ended:
        summaries[0] += f"; preflight ended the job on {fold(ended)}"
    if results_in:
        return [
            CheckResult(
                check,
                "warn",
                f"{summary}, after the job's results were in",
                tuple(f.host for f in group),
                {**details, "item": failure_item(group[0])},
            )
            for summary, group in zip(summaries, groups.values(), strict=True)
        ]
    if where is not None and where != phase and phase not in reached:
        # One cause, one finding: the check of the phase the job ended in names the nodes; this one
        # refers to it, as the job's checks do when it does not start.
        when = f"the job ended in the {where} phase" if reached else "the job never started"
        return [CheckResult(check, "skip", f"not run: {when} (see {where})", (), {**details, "see": where})]
    return [
        CheckResult(
            check, "fail", summary, tuple(f.host for f in group), {**details, "item": failure_item(group[0])}
        )
        for summary, group in zip(summaries, groups.values(), strict=True)
    ]


def phase_error_result(
    check: str, outcome: JobOutcome, phase: str, errors: Sequence[PhaseError]
) -> CheckResult:
    """A phase that raised on some rank (``errors``: its records, at least one): the ranks a
    monitored barrier names, else the rank that failed first."""
    hosts = rank_hosts(outcome)
    details: dict[str, Any] = {"phase_error": phase_error_text(errors)}
    messages = [error["message"] for error in errors]
    barrier = next((found for m in messages if (found := missed_barrier_in(m)) is not None), None)
    if barrier:
        culprit_hosts = tuple(dict.fromkeys(hosts[r] for r in barrier.ranks if r in hosts))
        summary = f"{never_reached(barrier.ranks, hosts)} ({barrier.waited})"
        return CheckResult(check, "fail", summary, culprit_hosts, {**details, "item": "missed_barrier"})
    rank = errors[0]["rank"]
    message = clean_message(errors[0]["message"])
    waiting = any(TIMEOUT_RE.search(m) or PEER_RE.search(m) for m in messages)
    stalled = stalled_node(outcome, phase) if waiting else None
    if stalled is not None:
        waited = describe_ranks([rank], hosts) if rank is not None else "a rank"
        summary = (
            f"{stalled.host} stalled the {phase} phase ({stalled.evidence}); {waited} timed out waiting: "
            f"{message}"
        )
        evidence = {"host": stalled.host, "by": stalled.by, **stalled.details}
        return CheckResult(
            check,
            "fail",
            summary,
            (stalled.host,),
            {**details, "item": "stalled_by_node", "attribution": evidence},
        )
    if rank is not None and waiting:
        # The rank that timed out waited on another; with no evidence of which, naming its node
        # would drain a healthy node and keep the bad one: no node is named.
        where = describe_ranks([rank], hosts)
        summary = (
            f"the {phase} phase stalled and no node's heartbeats or counters tell which one stalled it "
            f"({where} timed out waiting: {message})"
        )
        return CheckResult(
            check, "fail", summary, (), {**details, "item": "stall_unattributed", "unattributed": True}
        )
    if rank is not None:
        where = describe_ranks([rank], hosts)
        summary = f"the {phase} phase failed on {where}: {message}"
        named = (hosts[rank],) if rank in hosts else ()
        return CheckResult(check, "fail", summary, named, {**details, "item": "phase_error"})
    return CheckResult(
        check, "fail", f"the {phase} phase failed: {message}", (), {**details, "item": "phase_error"}
    )


def failures_table(result: CheckResult) -> list[Block]:
    """Why a distributed job died, node by node: the culprits first, then those that only suffered."""
    failures = [f for f in result.details.get("failures") or [] if isinstance(f, Mapping)]
    if not failures:
        return []
    rows = [
        [
            TCell(plain(f.get("host", "?")), "mono"),
            TCell("culprit" if f.get("culprit") else "affected", "st-text-fail" if f.get("culprit") else ""),
            TCell(plain(str(f.get("kind", "")).replace("_", " "))),
            TCell(plain(f.get("reason", ""))),
        ]
        for f in sorted(failures, key=lambda f: not f.get("culprit"))[:MAX_TABLE_ROWS]
    ]
    return [Table(("node", "role", "what happened", "detail"), rows, title="What each node saw")]
