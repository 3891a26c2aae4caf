"""The verdict as a person would say it, shared by every human-facing format."""

from __future__ import annotations

from preflight.model import CheckResult, RunReport
from preflight.status import by_severity
from preflight.timeline import JOB_START, job_phases, phase_seconds, slowest_node_seconds

# A phase shorter than this is left out of the line that says where the time went.
SHOWN_PHASE_S = 0.05


def ordered(results: tuple[CheckResult, ...] | list[CheckResult]) -> list[CheckResult]:
    """Failures first, then errors, warnings, skips, passes; stable within each."""
    return by_severity(results)


def headline(report: RunReport) -> str:
    """The verdict in one line: ``FAIL — node3: torch 2.12.0 where node[1-2] have 2.13.0`` for one
    cause; for several, how many on how many nodes and the first (the list is below it):
    ``FAIL — 3 findings on 2 nodes; first: node3: torch 2.12.0 ...``."""
    if report.interrupted:
        return "INTERRUPTED — the run was stopped before it finished; findings so far are below"
    worst = "fail" if report.verdict == "fail" else "error"
    culprits = [r for r in ordered(list(report.results)) if r.status == worst]
    if report.verdict == "pass":
        warnings = sum(1 for r in report.results if r.status == "warn")
        hosts = sum(1 for h in report.hosts if h.reachable)
        note = f" ({warnings} warning{'s' if warnings != 1 else ''})" if warnings else ""
        return f"PASS — {hosts} host{'s' if hosts != 1 else ''} ready{note}"
    label = "FAIL" if worst == "fail" else "ERROR"
    # One cause can fail several checks with the same words (in a run saved by an earlier preflight,
    # a node without torch failed each of the job's checks): it is said once.
    summaries = list(dict.fromkeys(r.summary for r in culprits))
    if len(summaries) <= 1:
        return f"{label} — {summaries[0] if summaries else report.verdict}"
    nodes = {host for r in culprits for host in r.hosts}
    on = f" on {len(nodes)} node{'s' if len(nodes) != 1 else ''}" if nodes else ""
    return f"{label} — {len(summaries)} findings{on}; first: {summaries[0]}"


def kept_as(report: RunReport) -> list[tuple[str, str, str]]:
    """The run's nodes that the history store keeps under an identity other than the name that
    reached them (docs/node-identity.md): ``(name, identity, source)``, as the report's ``history``
    key lists them; none for a run without the store."""
    rows = (report.history or {}).get("identities")
    if not isinstance(rows, list):
        return []
    return [
        (str(row.get("name", "")), str(row.get("node", "")), str(row.get("source", "")))
        for row in rows
        if isinstance(row, dict)
    ]


def kept_as_line(report: RunReport, most: int = 4) -> str | None:
    """``history keeps sl-n01 as n01, sl-n02 as n02 (host names)``, the first ``most`` of them and
    how many more; None when every node is kept under the name that reached it."""
    rows = kept_as(report)
    if not rows:
        return None
    shown = ", ".join(f"{name} as {node}" for name, node, _ in rows[:most])
    more = f" and {len(rows) - most} more" if len(rows) > most else ""
    sources = sorted({source for _, _, source in rows})
    return f"history keeps {shown}{more} (by {', '.join(sources)})"


def time_spent(report: RunReport) -> str | None:
    """Where the run's time went, in one line: the controller's phases (the facts, each check that
    took time), then the job with its own phases at its slowest node's seconds:
    ``facts 1.7 s · ports 0.4 s · the job 4.0 s (start 0.2 s, compute 1.1 s, allreduce 2.0 s)``.
    None for a run that kept no timeline."""
    if not report.timeline:
        return None
    in_job = job_phases(report.timeline)
    controller = phase_seconds(report.timeline)
    shown = [
        f"{phase} {s:.1f} s" for phase, s in controller.items() if phase not in in_job and s >= SHOWN_PHASE_S
    ]
    job_s = sum(s for phase, s in controller.items() if phase in in_job)
    if job_s:
        inside = slowest_node_seconds(report.timeline, in_job)
        named = {JOB_START: "start"}
        parts = [f"{named.get(p, p)} {s:.1f} s" for p, s in inside.items() if s >= SHOWN_PHASE_S]
        shown.append(f"the job {job_s:.1f} s" + (f" ({', '.join(parts)})" if parts else ""))
    return " · ".join(shown) or None
