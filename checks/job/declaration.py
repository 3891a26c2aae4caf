"""What a check judged in the job declares about its phase (:class:`JobPhase`), beside the check
(``checks/<check>/phase.py``): its name, what the node runs, its settings, what its node side is
sent, the time it takes, and what its findings say of a node as a root cause. The job's tables
are read from these declarations (:mod:`checks.job.phases`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checks.job.settings import JOB_START
from preflight.config import Config
from preflight.settings import Cost, Settings


@dataclass(frozen=True)
class Timed:
    """One timed part of a phase, sized by what the phase is sent: ``count`` runs (rounds of pair
    or rail tests, the burn, DDP's steps, the set-up) of at most ``budget_s`` seconds each, a
    healthy one taking ``healthy_s``; ``again``, the runs more the phase may make where some were
    slow (re-tests); ``over_s``, what each may take past its budget (a round's set-up and the
    ranks' agreement after it)."""

    what: str
    count: float
    budget_s: float
    healthy_s: float
    again: float = 0.0
    over_s: float = 0.0

    @property
    def expected_s(self) -> float:
        """Seconds on healthy nodes: every run at its healthy time, none again."""
        return self.count * self.healthy_s

    @property
    def most_s(self) -> float:
        """The most seconds it may take: every run and re-run at its whole budget."""
        return (self.count + self.again) * (self.budget_s + self.over_s)


# What a phase's node side is sent, from the run's config, the nodes' names (node rank order) and
# whether they have GPUs (None: not known yet, as when the run's duration is estimated before the
# nodes are asked).
SentSettings = Callable[[Config, Sequence[str], bool | None], dict[str, Any]]


@dataclass(frozen=True, eq=False)
class JobPhase:
    """One phase of the job, declared by the check that judges it and named as that check is.

    ``label`` is what a person calls it ("all-reduce"); ``node``, the node module whose
    ``run(job)`` runs it on every rank (shipped in the job's bundle); ``settings``, the check's
    settings (its section of the config, its options and what each profile changes); ``sent``,
    what its node side is sent; ``time``, its timed parts from what it was sent: the launcher's
    budget and the run's expected duration both count from them. ``root_causes``: the items of
    its findings that are a node's root cause for other checks' findings about the node's speed,
    and what each says of the node; ``refers_to``: the checks whose root causes its own findings
    may be referred to (``checks.compute.root_cause``), and ``speed_keys``, the keys of its
    findings' details that say a finding is about a node's speed (a ratio, a link, a floor), the
    findings such a root cause explains.

    Compared by identity: a phase is declared once.
    """

    name: str
    label: str
    node: str
    settings: Settings[Any]
    sent: SentSettings
    time: Callable[[Mapping[str, Any]], tuple[Timed, ...]]
    root_causes: Mapping[str, str] = field(default_factory=dict)
    refers_to: tuple[str, ...] = ()
    speed_keys: tuple[str, ...] = ()

    def budget_s(self, sent: Mapping[str, Any]) -> float:
        """The most seconds the phase may take with the settings it was ``sent``."""
        return sum(part.most_s for part in self.time(sent))

    def expected_s(self, config: Config, n_hosts: int) -> float:
        """About how long the phase takes on ``n_hosts`` healthy nodes, re-tests not counted."""
        sent = self.sent(config, [f"node{i}" for i in range(n_hosts)], None)
        return sum(part.expected_s for part in self.time(sent))

    @property
    def duration(self) -> tuple[Cost, ...]:
        """What the phase adds to a run's expected duration (``Check.duration``): the job's start,
        counted once however many phases run, and its own time."""
        return (JOB_START, Cost(f"the {self.label} phase", self.expected_s))
