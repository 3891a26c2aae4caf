"""The run model: frozen dataclasses for hosts, findings and the whole run.

``RunReport`` is the one model every renderer reads; its JSON form (schema_version 1,
docs/report-schema.md) is canonical and round-trips through :func:`RunReport.from_dict`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, cast

from preflight.errors import ExitCode
from preflight.facts import NodeFacts
from preflight.status import STATUSES, Status
from preflight.timeline import Span

SCHEMA_VERSION = 1

Verdict = Literal["pass", "fail", "error"]

# Host error kinds: why a host could not be checked.
HostErrorKind = Literal[
    "unreachable",
    "timeout",
    "auth_refused",
    "host_key_unknown",
    "host_key_changed",
    "python_missing",
    "probe_failed",
    "interrupted",
]


@dataclass(frozen=True)
class HostError:
    """Why one host could not be checked; ``message`` is one line a person can act on."""

    kind: HostErrorKind
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostError:
        return cls(kind=cast(HostErrorKind, data["kind"]), message=str(data["message"]))


@dataclass(frozen=True)
class HostReport:
    """One host as checked: ``name`` as written in the inventory, ``hostname`` as it calls itself."""

    name: str
    address: str
    hostname: str | None = None
    reachable: bool = False
    error: HostError | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def node(self) -> NodeFacts:
        """The facts, typed (built on first use)."""
        return NodeFacts(self.facts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "hostname": self.hostname,
            "reachable": self.reachable,
            "error": self.error.to_dict() if self.error else None,
            "facts": dict(self.facts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostReport:
        error = data.get("error")
        return cls(
            name=str(data["name"]),
            address=str(data.get("address", data["name"])),
            hostname=data.get("hostname"),
            reachable=bool(data.get("reachable", False)),
            error=HostError.from_dict(error) if error else None,
            facts=dict(data.get("facts") or {}),
        )


# The details key that marks a passing finding as a note (CheckResult.note).
NOTE = "note"


@dataclass(frozen=True)
class CheckResult:
    """One finding of one check. ``hosts`` names the culprits, not every host checked.

    A *note* (:meth:`note`) is a finding that passes: something a reader should see (benign
    counters, an application's XID, a shell that prints on stdout) that fails nothing and sends no
    node away; its details say ``"note": true``."""

    check: str
    status: Status
    summary: str
    hosts: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def note(
        cls, check: str, summary: str, hosts: tuple[str, ...] = (), details: Mapping[str, Any] | None = None
    ) -> CheckResult:
        """A note about ``hosts``: status pass, ``details["note"]`` true."""
        return cls(check, "pass", summary, hosts, {**(details or {}), NOTE: True})

    @property
    def is_note(self) -> bool:
        return self.status == "pass" and bool(self.details.get(NOTE))

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status,
            "hosts": list(self.hosts),
            "summary": self.summary,
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckResult:
        status = data["status"]
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        return cls(
            check=str(data["check"]),
            status=cast(Status, status),
            summary=str(data.get("summary", "")),
            hosts=tuple(str(h) for h in data.get("hosts") or ()),
            details=dict(data.get("details") or {}),
        )


def with_check_details(
    results: Sequence[CheckResult], details: Mapping[str, Any], *, kept: Collection[str] = ()
) -> list[CheckResult]:
    """``results`` with the check-wide ``details`` (the tables a pass or skip would carry) added
    to the first finding's, so a report shows them once whatever the check found.

    The check-wide keys come first. Where the finding has a key of the same name its own value
    stays: it says what that finding found, and other checks read it (a slow rail's ``rails``, a
    straggler's ``compute_step_s``, the GPUs a hardware finding names). A key in ``kept`` keeps the
    check-wide value instead: the check names those whose table the report, the measures or other
    checks read from the first finding whichever finding that is."""
    found = list(results)
    if found:
        first = found[0]
        merged = {**details, **first.details, **{key: details[key] for key in kept if key in details}}
        found[0] = CheckResult(first.check, first.status, first.summary, first.hosts, merged)
    return found


def exit_code_for(results: Sequence[CheckResult]) -> ExitCode:
    """A failed check wins; then a host that could not be checked; warnings pass."""
    statuses = {r.status for r in results}
    if "fail" in statuses:
        return ExitCode.CHECK_FAILED
    if "error" in statuses:
        return ExitCode.HOSTS_UNCHECKED
    return ExitCode.OK


def verdict_for(code: ExitCode) -> Verdict:
    if code == ExitCode.OK:
        return "pass"
    if code == ExitCode.CHECK_FAILED:
        return "fail"
    return "error"


@dataclass(frozen=True)
class RunReport:
    """A whole run: the hosts with their facts and every check's findings."""

    tool_version: str
    started_at: str
    duration_s: float
    hosts: tuple[HostReport, ...]
    results: tuple[CheckResult, ...]
    exit_code: ExitCode
    interrupted: bool = False
    # Seconds spent in each phase of the run: "facts", then each check by name.
    timings: Mapping[str, float] = field(default_factory=dict)
    # The nodes a launcher should use and those to leave out (preflight.handback.Handback.to_dict).
    handback: Mapping[str, Any] | None = None
    # What the history store says about the run's nodes (preflight.history.report_section).
    history: Mapping[str, Any] | None = None
    # Each phase of the run on the controller and on every node (preflight.timeline).
    timeline: tuple[Span, ...] = ()
    schema_version: int = SCHEMA_VERSION

    @property
    def verdict(self) -> Verdict:
        return verdict_for(self.exit_code)

    @classmethod
    def build(
        cls,
        *,
        tool_version: str,
        started_at: str,
        duration_s: float,
        hosts: Sequence[HostReport],
        results: Sequence[CheckResult],
        interrupted: bool = False,
        timings: Mapping[str, float] | None = None,
        handback: Mapping[str, Any] | None = None,
        enough_nodes: bool = False,
        timeline: Sequence[Span] = (),
    ) -> RunReport:
        """``enough_nodes``: ``--min-nodes`` was met, so failures of the nodes left out do not
        fail the run."""
        code = ExitCode.INTERRUPTED if interrupted else exit_code_for(results)
        if enough_nodes and not interrupted:
            code = ExitCode.OK
        return cls(
            tool_version=tool_version,
            started_at=started_at,
            duration_s=round(duration_s, 3),
            hosts=tuple(hosts),
            results=tuple(results),
            exit_code=code,
            interrupted=interrupted,
            timings={k: round(v, 3) for k, v in (timings or {}).items()},
            handback=handback,
            timeline=tuple(timeline),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "tool_version": self.tool_version,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "verdict": self.verdict,
            "exit_code": int(self.exit_code),
            "interrupted": self.interrupted,
            "timings": dict(self.timings),
            "hosts": [h.to_dict() for h in self.hosts],
            "results": [r.to_dict() for r in self.results],
            **({"handback": dict(self.handback)} if self.handback is not None else {}),
            **({"history": dict(self.history)} if self.history is not None else {}),
            **({"timeline": [s.to_dict() for s in self.timeline]} if self.timeline else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunReport:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"schema_version {version!r} is not supported (expected 1)")
        return cls(
            schema_version=SCHEMA_VERSION,
            tool_version=str(data["tool_version"]),
            started_at=str(data["started_at"]),
            duration_s=float(data["duration_s"]),
            hosts=tuple(HostReport.from_dict(h) for h in data["hosts"]),
            results=tuple(CheckResult.from_dict(r) for r in data["results"]),
            exit_code=ExitCode(int(data["exit_code"])),
            interrupted=bool(data.get("interrupted", False)),
            timings={str(k): float(v) for k, v in (data.get("timings") or {}).items()},
            handback=dict(data["handback"]) if isinstance(data.get("handback"), Mapping) else None,
            history=dict(data["history"]) if isinstance(data.get("history"), Mapping) else None,
            timeline=tuple(Span.from_dict(s) for s in data.get("timeline") or ()),
        )

    def results_for(self, check: str) -> list[CheckResult]:
        return [r for r in self.results if r.check == check]
