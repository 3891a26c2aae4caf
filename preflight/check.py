"""What a check is: a name, a line for ``preflight list``, and a function from context to findings.

Checks live in the ``checks`` package and are found through its registry; a check that
only judges gathered facts is a pure function of :class:`CheckContext`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from preflight.config import Config
from preflight.deadline import Deadline
from preflight.inventory import HostSpec
from preflight.model import CheckResult, HostReport, RunReport
from preflight.transport import Transport

Backend = Literal["nccl", "gloo"]


@dataclass
class HostSession:
    """A host during a run: how it was reached and what it said about itself."""

    spec: HostSpec
    report: HostReport
    transport: Transport | None = None


@dataclass
class CheckContext:
    config: Config
    sessions: Sequence[HostSession]  # every host of the inventory, in inventory order
    deadline: Deadline
    backend: Backend | None = None  # None: NCCL where the nodes have GPUs, gloo otherwise
    earlier: list[CheckResult] = field(default_factory=list)  # findings of checks already run
    selected: tuple[str, ...] = ()  # names of the checks this run runs
    baseline: RunReport | None = None  # a previous known-good run to compare with
    # What one check measured that a later one reuses (the ports check's routes, the one
    # torchrun job that allreduce and ddp share), by key.
    shared: dict[str, Any] = field(default_factory=dict)

    @property
    def hosts(self) -> list[HostReport]:
        return [s.report for s in self.sessions]

    @property
    def reachable(self) -> list[HostReport]:
        return [s.report for s in self.sessions if s.report.reachable]

    @property
    def live_sessions(self) -> list[HostSession]:
        """Reachable hosts with an open transport, in inventory order."""
        return [s for s in self.sessions if s.report.reachable and s.transport is not None]

    def facts(self) -> Mapping[str, Mapping[str, Any]]:
        """Facts of every reachable host, by host name."""
        return {h.name: h.facts for h in self.reachable}


@dataclass(frozen=True)
class Check:
    name: str
    title: str
    run: Callable[[CheckContext], Sequence[CheckResult]]
