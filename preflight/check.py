"""What a check is, and what it is given.

A check declares what it needs and owns its whole path: the probes it asks for (I/O, run at
most once per run however many checks ask, :meth:`CheckContext.probe`), a pure judge that
turns what was observed into findings, its :class:`~preflight.view.Presentation`, and its
settings, options, profiles and expected duration (:mod:`preflight.settings`). Checks live in
the ``checks`` package and are found through its registry; the core knows none of them by name.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, cast

from preflight.config import Config
from preflight.deadline import Deadline
from preflight.explain import Explanation
from preflight.facts import NodeFacts
from preflight.handback import Action
from preflight.inventory import HostSpec
from preflight.measures import Measure, PartsNamed
from preflight.model import CheckResult, HostReport, RunReport
from preflight.settings import NOT_QUICK, Cost, Profile, Settings
from preflight.silence import SilenceWatch, keepalive_of
from preflight.timeline import Timeline
from preflight.transport import RemoteProcess, Transport
from preflight.view import Presentation

Backend = Literal["nccl", "gloo"]
T = TypeVar("T")


@dataclass
class HostSession:
    """A host during a run: how it was reached and what it said about itself."""

    spec: HostSpec
    report: HostReport
    transport: Transport | None = None
    # The facts probe, staying as the host's script host when a check asked for warm imports
    # (Check.warm_imports): the first check to use it takes it (:meth:`take_host`).
    host: RemoteProcess | None = None
    # Named silent in some phase: its connection is dropped at the end, not closed (what it runs
    # cannot be ended from here, and asking would only wait).
    silent: bool = False

    def take_host(self) -> RemoteProcess | None:
        """The staying facts probe, for one user: later callers get None."""
        host, self.host = self.host, None
        return host


@dataclass(frozen=True)
class Probe(Generic[T]):
    """I/O that one or more checks need: observing the ports between the nodes, the one
    training job that the five checks of its phases share (compute, intranode, rails, allreduce, ddp).
    ``run`` is called at most once per run, by the first check that asks; the others get the same
    value (or the same exception)."""

    name: str
    run: Callable[[CheckContext], T]


@dataclass
class CheckContext:
    config: Config
    sessions: Sequence[HostSession]  # every host of the inventory, in inventory order
    deadline: Deadline
    backend: Backend | None = None  # None: NCCL where the nodes have GPUs, gloo otherwise
    selected: tuple[str, ...] = ()  # names of the checks this run runs
    baseline: RunReport | None = None  # a previous known-good run to compare with
    # Findings of the checks already run, by check: a check sees those it declares in ``reads``.
    findings: Mapping[str, Sequence[CheckResult]] = field(default_factory=dict)
    # Where the run's time goes: the checks add their spans on the nodes (preflight.timeline).
    timeline: Timeline = field(default_factory=Timeline)
    _probed: dict[str, cf.Future[Any]] = field(default_factory=dict, repr=False)
    _probing: threading.Lock = field(default_factory=threading.Lock, repr=False)

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

    def silence_watch(self) -> SilenceWatch:
        """A watch over the live hosts' silence (:mod:`preflight.silence`) for one phase that talks
        to them; the caller closes it."""
        transports = {s.spec.name: s.transport for s in self.live_sessions}
        return SilenceWatch(transports, self.config.run.silence_s, keepalive_of(transports.get))

    def facts(self) -> Mapping[str, Mapping[str, Any]]:
        """Facts of every reachable host, by host name."""
        return {h.name: h.facts for h in self.reachable}

    def nodes(self) -> Mapping[str, NodeFacts]:
        """Typed facts of every reachable host, by host name."""
        return {h.name: h.node for h in self.reachable}

    def probe(self, probe: Probe[T]) -> T:
        """What ``probe`` observed in this run: run on first use (or waited for, when it was
        started early: :meth:`start`), then remembered."""
        claimed = self._claim(probe)
        if claimed is not None:
            self._run_into(probe, claimed)
        return cast(T, self._probed[probe.name].result())

    def start(self, probe: Probe[Any]) -> None:
        """Start ``probe`` now, in a thread of its own, unless it has started: the check that asks
        for it later waits for what it observed. Probes started together run side by side."""
        claimed = self._claim(probe)
        if claimed is not None:
            threading.Thread(
                target=self._run_into, args=(probe, claimed), name=f"probe-{probe.name}", daemon=True
            ).start()

    def _claim(self, probe: Probe[Any]) -> cf.Future[Any] | None:
        """The future ``probe``'s value goes in, for the one caller that is to run it; None when
        it has started already."""
        with self._probing:
            if probe.name in self._probed:
                return None
            future: cf.Future[Any] = cf.Future()
            self._probed[probe.name] = future
            return future

    def _run_into(self, probe: Probe[Any], future: cf.Future[Any]) -> None:
        try:
            future.set_result(probe.run(self))
        except Exception as exc:  # every check that asks sees the same failure
            future.set_exception(exc)
        except BaseException as exc:  # Ctrl-C in the probe's thread: whoever waits hears of it
            future.set_exception(exc)
            raise


@dataclass(frozen=True)
class Check:
    """A check: its stable name (the ``check`` of its findings in the JSON report, docs/names.md), a
    line for ``preflight list``, the function that observes and judges, and how it presents itself
    in a report.

    ``always``: runs whatever ``--only`` and ``--skip`` say (``connect``: every other check's
    facts come through it). ``needs_baseline``: runs exactly when a baseline run is given
    (unless skipped). ``reads``: the checks whose findings this one judges; they come earlier
    in the registry, and the runner hands their findings over in ``CheckContext.findings``.
    ``action``: what an operator does with a node this check fails (a finding may name its own
    in ``details["action"]``). ``node_local``: judges each node on its own, so it runs in
    ``--local`` mode (a Slurm prolog); checks between nodes do not. ``warm_imports``: modules
    the check's node script will need; when a selected check names some, the facts probe stays
    on every host with them imported (:attr:`HostSession.host`), so the script starts warm.
    ``names_unreached``: the hand-back lists a node that could not be checked under this check
    (``connect``, which reaches the nodes); one check of the registry says so.

    What the run's core reads from the check besides: ``settings``, its section of the config
    (the TOML table named after the check), the command-line options that set it and what each
    profile changes in it; ``profiles``, the profiles that run it (``--quick`` runs only the
    checks that list it, unless ``--only`` says otherwise); ``duration``, what it adds to the
    run's expected duration; ``measures``, the rates it measures (:mod:`preflight.measures`: what
    the history store keeps and Prometheus publishes); ``parts_named``, the parts one of its
    findings is about, in the facts' own terms (:class:`preflight.measures.PartRef`: what the
    history store keeps a finding's part under); ``starts_early``, the probes its run will ask for,
    which the run starts as soon as the facts are in, beside every other check's (a check whose
    probe would run beside the job, or disturb what another measures, declares none); ``prepare``,
    what it can do before any node answered (pack the script it ships), done while the hosts
    connect; ``explains``, what each item its findings carry means (:mod:`preflight.explain`:
    ``preflight explain``, the reports, docs/findings.md).
    """

    name: str
    title: str
    run: Callable[[CheckContext], Sequence[CheckResult]]
    presentation: Presentation
    always: bool = False
    needs_baseline: bool = False
    reads: tuple[str, ...] = ()
    action: Action = "drain"
    node_local: bool = False
    warm_imports: tuple[str, ...] = ()
    names_unreached: bool = False
    settings: Settings[Any] | None = None
    profiles: frozenset[Profile] = NOT_QUICK
    duration: tuple[Cost, ...] = ()
    measures: tuple[Measure, ...] = ()
    parts_named: PartsNamed | None = None
    starts_early: Callable[[CheckContext], Sequence[Probe[Any]]] | None = None
    prepare: Callable[[], None] | None = None
    explains: tuple[Explanation, ...] = ()


def on_live_nodes(*probes: Probe[Any]) -> Callable[[CheckContext], Sequence[Probe[Any]]]:
    """``Check.starts_early`` for a check that probes the reachable nodes: ``probes``, when any
    node is reachable."""
    return lambda ctx: probes if ctx.live_sessions else ()
