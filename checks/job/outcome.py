"""What the one job across the nodes produced (:class:`JobOutcome`, one
:class:`NodeOutcome` per node), or why it did not run (:class:`JobNotRun`); the errors its
document gives for its phases (:func:`phase_errors`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from checks.job.nccl_log import NcclTransport
from checks.job.node.harness import PhaseError
from checks.job.phases import job_phases
from preflight.model import CheckResult
from preflight.status import Status


class Beat(TypedDict):
    """One rank's heartbeat in a phase, as kept: when (``t``, its wall clock), the collectives it
    had completed in the phase (``ops``), whether it had done its part (``done``) or its part had
    failed (``failed``: a timeout, a peer gone)."""

    t: float
    ops: int | None
    done: bool
    failed: bool


class NetSample(TypedDict):
    """A node's network counters as its first rank's heartbeat carried them (``net``:
    :mod:`checks.job.node.netstat`), and when (``t``)."""

    t: float
    net: dict[str, Any]


class PhaseProgress(TypedDict):
    """What a node's heartbeats said of one phase: each rank's last beats in it (``ranks``, by
    global rank as a string: the key JSON keeps), and the node's counter samples (``net``: the
    phase's first, then its last ones)."""

    ranks: dict[str, list[Beat]]
    net: list[NetSample]


@dataclass(frozen=True)
class NodeOutcome:
    """How the job went on one node."""

    host: str  # the host's name in the inventory
    node_rank: int
    exit_status: int | None  # None: never reported one (killed, or the connection was lost)
    timed_out: bool  # ended at its deadline
    lost: bool  # the node stopped answering (its connection lost) during the job
    killed: bool  # ended by preflight because another node failed first
    stderr: str  # the node's stderr (its host's and ranks' lines, NCCL_DEBUG lines, tracebacks), capped
    # What NCCL's log said, parsed from the whole stream before it was capped (None: not parsed).
    nccl: NcclTransport | None = None
    # Seconds without a heartbeat when preflight gave up on the node (None: it never went silent),
    # and the phase its last heartbeat named.
    silent_s: float | None = None
    last_phase: str | None = None
    # When it was last heard from, UTC (ISO 8601), for its own logs of that moment.
    silent_since: str | None = None
    # The fabric's counters the node's host read before the ranks started and after they ended
    # (checks.job.node.counters: ``before`` and ``after``); None where it wrote none.
    counters: Mapping[str, Any] | None = None
    # What its heartbeats said, by phase: each rank's last progress in it, the node's network
    # counters at its start and at its last beat (:func:`checks.job.stalled_node.read_progress`).
    progress: Mapping[str, PhaseProgress] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not (self.timed_out or self.lost or self.killed)


@dataclass(frozen=True)
class JobOutcome:
    """What the one job across the nodes produced."""

    phases: tuple[str, ...]
    backend: str  # "nccl" | "gloo"
    master: str  # address the nodes rendezvoused at
    port: int
    nodes: tuple[NodeOutcome, ...]
    duration_s: float
    # The JSON document printed by global rank 0, None when it printed none.
    document: Mapping[str, Any] | None = None
    # Why the job could not be launched at all (None when it was).
    launch_error: str | None = None
    # Per-node environment the job ran with (NCCL_SOCKET_IFNAME, ...), secrets masked.
    environment: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Nodes where the job left GPUs untested (fewer ranks than GPUs), host -> why.
    untested_gpus: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobNotRun:
    """Why the job was not started (no reachable host, a blocked port, no torch on some node):
    every check of the job reports it as its own finding."""

    status: Status
    summary: str
    hosts: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def result(self, check: str, selected: Sequence[str] = ()) -> CheckResult:
        """This as the finding of ``check``. The checks of the job share this one cause: the first
        of them that the run has (``selected``) reports it, the others refer to that finding. Each
        reason the job cannot start is the training environment's set-up, not the node's health."""
        first = next((phase.name for phase in job_phases() if phase.name in selected), check)
        if check != first:
            summary = f"not run: the job did not start (see {first})"
            return CheckResult(check, "skip", summary, (), {"item": "job_not_run", "see": first})
        details = dict(self.details)
        if "blocked_by" in details:
            # Not launched for another check's finding (ports, hardware), which says why.
            details.setdefault("item", "job_blocked")
        if self.status == "fail":
            details.setdefault("action", "fix_config")
        return CheckResult(check, self.status, self.summary, self.hosts, details)


def node_names(outcome: JobOutcome) -> list[str]:
    """Inventory names by node rank: the document's list, else the launcher's."""
    document = outcome.document or {}
    names = [str(n) for n in document.get("nodes") or []]
    by_rank = {n.node_rank: n.host for n in outcome.nodes}
    count = max(len(names), 1 + max(by_rank, default=-1))
    return [by_rank.get(i) or (names[i] if i < len(names) else f"node rank {i}") for i in range(count)]


# The failed ranks' errors a finding's details quote; the others are counted.
QUOTED_ERRORS = 4


def _rank_field(value: Any) -> bool:
    """Whether ``value`` can be a :class:`PhaseError`'s rank: a number, or None."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def phase_errors(document: Mapping[str, Any] | None) -> dict[str, list[PhaseError]]:
    """The errors in rank 0's ``document`` (its ``phase_errors``), by phase: each phase's
    :class:`PhaseError` records, as the node wrote them (what is not such a record is left out)."""
    errors = (document or {}).get("phase_errors")
    found: dict[str, list[PhaseError]] = {}
    for phase, records in errors.items() if isinstance(errors, Mapping) else ():
        for record in records if isinstance(records, list) else ():
            if not isinstance(record, Mapping):
                continue
            rank, local_rank, message = record.get("rank"), record.get("local_rank"), record.get("message")
            if isinstance(message, str) and _rank_field(rank) and _rank_field(local_rank):
                found.setdefault(str(phase), []).append(
                    {"rank": rank, "local_rank": local_rank, "message": message}
                )
    return found


def phase_error_text(errors: Sequence[PhaseError]) -> str:
    """The errors in one line, as a person reads them: ``rank 3 (local_rank 1): RuntimeError: ...;
    rank 5 (local_rank 1): ...``, the first QUOTED_ERRORS of them, then how many more ranks failed."""
    said = []
    for error in errors[:QUOTED_ERRORS]:
        rank, local_rank = error["rank"], error["local_rank"]
        if rank is None:
            said.append(error["message"])
        elif local_rank is None:
            said.append(f"rank {rank}: {error['message']}")
        else:
            said.append(f"rank {rank} (local_rank {local_rank}): {error['message']}")
    if len(errors) > QUOTED_ERRORS:
        said.append(f"and {len(errors) - QUOTED_ERRORS} more ranks")
    return "; ".join(said)
