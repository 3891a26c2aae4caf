"""A job phase is declared once, beside its check, and registered by one line: a made-up phase
(``nap``: every rank naps for ``[nap] nap_s``) declared here as its package would declare it
(``checks/nap/__init__.py`` its check, ``checks/nap/phase.py`` its phase, ``checks/nap/node.py``
its node code) and registered by one more name in ``checks.job.phases.JOB_PHASES`` reaches every
table of the job: the registry's order, the config's tables, the launcher's arguments (its node
code and settings), the launcher's budget, the node's table of phases, the expected duration, the
root causes other checks' findings refer to, and the phase's findings when the job ran without
it."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

import checks
from checks.allreduce.phase import PHASE as ALLREDUCE_PHASE
from checks.compute import root_cause
from checks.job import launch, phases
from checks.job.declaration import JobPhase, Timed
from checks.job.node.harness import Job
from checks.job.node.phases import sent_phases
from checks.job.outcome import JobNotRun
from checks.job.phase import read_phase
from checks.job.settings import AllreduceSection
from preflight.check import Check, CheckContext
from preflight.config import Config
from preflight.deadline import Deadline
from preflight.model import CheckResult
from preflight.profiles import FACTS_S, expected_duration_s
from preflight.registry import all_checks, setting_tables
from preflight.settings import Settings
from preflight.view import Presentation
from tests.test_allreduce import load_job

NAMES = ["node1", "node2", "node3"]


@dataclass(frozen=True)
class NapSection:
    """``[nap]``: how long every rank naps."""

    nap_s: float = 0.25


def _sent(config: Config, names: Sequence[str], gpu: bool | None) -> dict[str, Any]:
    return {"nap_s": config.section(NapSection).nap_s}


def _time(sent: Mapping[str, Any]) -> tuple[Timed, ...]:
    # Each rank naps all its time; the budget allows a second for the phase's start.
    nap_s = float(sent["nap_s"])
    return (Timed("the start", 1, 1.0, 0.0), Timed("the nap", 1, nap_s, nap_s))


def _node_run(job: Job) -> dict[str, Any]:
    """The node's part: what a rank would have napped."""
    return {"napped_s": float(job.settings("nap")["nap_s"]), "rank": job.rank}


# checks/nap/phase.py
PHASE = JobPhase(
    name="nap",
    label="napping",
    node="checks.nap.node",
    settings=Settings(NapSection),
    sent=_sent,
    time=_time,
    root_causes={"overslept": "having overslept"},
    refers_to=("compute",),
)
# checks/nap/__init__.py
CHECK = Check(
    name="nap",
    title="every rank naps",
    run=lambda ctx: launch.judge_job(ctx, "nap", lambda outcome: []),
    presentation=Presentation(heading="Nap", about="every rank naps"),
    warm_imports=launch.JOB_IMPORTS,
    reads=("ports", *PHASE.refers_to),
    settings=PHASE.settings,
    duration=PHASE.duration,
)


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


@pytest.fixture
def nap(monkeypatch: pytest.MonkeyPatch) -> Iterator[JobPhase]:
    """The made-up phase's package, and its one registration line."""
    monkeypatch.setitem(sys.modules, "checks.nap", _module("checks.nap", CHECK=CHECK))
    monkeypatch.setitem(sys.modules, "checks.nap.phase", _module("checks.nap.phase", PHASE=PHASE))
    monkeypatch.setitem(sys.modules, "checks.nap.node", _module("checks.nap.node", run=_node_run))
    monkeypatch.setattr(phases, "JOB_PHASES", (*phases.JOB_PHASES, "nap"))
    _clear_caches()
    yield PHASE
    monkeypatch.undo()
    _clear_caches()


def _clear_caches() -> None:
    """The tables read from the registered phases once per process, read again."""
    checks.registry.cache_clear()
    root_cause.root_causes.cache_clear()
    root_cause.cause_checks.cache_clear()


def test_the_declared_phase_is_the_jobs_last_and_its_check_is_in_the_registry_in_that_place(
    nap: JobPhase,
) -> None:
    assert phases.job_phase("nap") is nap
    assert [p.name for p in phases.job_phases()] == [
        "compute",
        "intranode",
        "rails",
        "allreduce",
        "ddp",
        "nap",
    ]
    order = [c.name for c in all_checks()]
    assert order[order.index("ddp") + 1 : order.index("ddp") + 3] == ["nap", "baseline"]
    assert setting_tables()["nap"] is NapSection


def test_the_launcher_sends_its_node_code_and_settings_and_counts_its_budget(nap: JobPhase) -> None:
    config = Config().with_sections(NapSection(nap_s=2.0))
    ctx = CheckContext(config=config, sessions=[], deadline=Deadline.after(60))
    args = launch._job_args(ctx, ("allreduce", "nap"), NAMES, False)
    assert args["phases"] == ["allreduce", "nap"]
    assert args["runs"]["nap"] == "checks.nap.node" and args["nap"] == {"nap_s": 2.0}
    cfg = config.section(AllreduceSection)
    start = launch.STARTUP_S + cfg.join_timeout_s + cfg.collective_timeout_s
    allreduce = phases.job_phase("allreduce").budget_s(args["allreduce"])
    assert launch._budget_s(args) == pytest.approx(start + allreduce + 1.0 + 2.0)


def test_a_run_that_selects_it_launches_it_in_its_place(
    nap: JobPhase, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[tuple[str, ...]] = []
    monkeypatch.setattr(launch, "launch", lambda ctx, names: launched.append(names))
    ctx = CheckContext(config=Config(), sessions=[], deadline=Deadline.after(60))
    ctx.selected = ("connect", "nap", "allreduce")
    launch._launch_selected(ctx)
    assert launched == [("allreduce", "nap")]
    # Alone in the run, it says why the job did not start; behind another phase, it refers to it.
    not_run = JobNotRun("skip", "no reachable host to run the job on")
    assert not_run.result("nap", ("nap",)).summary == "no reachable host to run the job on"
    assert not_run.result("nap", ("allreduce", "nap")).details == {"item": "job_not_run", "see": "allreduce"}


def test_the_node_runs_it_with_the_settings_it_was_sent(nap: JobPhase) -> None:
    import torch
    import torch.distributed as dist

    ctx = CheckContext(config=Config(), sessions=[], deadline=Deadline.after(60))
    args = launch._job_args(ctx, ("nap",), NAMES, False)
    table = sent_phases(args["runs"])
    assert list(table) == ["compute", "intranode", "rails", "allreduce", "ddp", "nap"]
    assert table["nap"](Job(torch, dist, args)) == {"napped_s": 0.25, "rank": 0}


def test_the_expected_duration_counts_its_time_and_the_jobs_start_once(nap: JobPhase) -> None:
    config = Config().with_sections(NapSection(nap_s=3.0))
    # One host: the facts, the job's start and the nap.
    assert expected_duration_s(config, 1, ["nap"]) == pytest.approx(FACTS_S + 0.4 + 3.0)
    with_ddp = expected_duration_s(config, 1, ["nap", "ddp"])
    assert with_ddp == pytest.approx(expected_duration_s(config, 1, ["ddp"]) + 3.0)


def test_a_job_without_it_says_so_by_its_label(nap: JobPhase) -> None:
    (finding,) = read_phase("nap", load_job("three_nodes")).findings
    assert (finding.check, finding.status) == ("nap", "skip")
    assert finding.summary == "not run: the job ran without the napping phase"


def test_the_declared_root_causes_take_precedence_in_the_order_the_phases_refer_to_them() -> None:
    # compute runs first; intranode refers to hardware, rails to both.
    assert root_cause.cause_checks() == ("compute", "hardware", "intranode", "rails")
    assert list(root_cause.root_causes()) == [
        "slow_compute",
        "gpu_nvlink",
        "slow_inside_node",
        "slow_rail",
        "slow_on_every_rail",
    ]


def test_its_root_cause_is_one_other_checks_findings_refer_to(nap: JobPhase) -> None:
    assert root_cause.cause_checks() == ("compute", "hardware", "intranode", "rails", "nap")
    assert root_cause.root_causes()["overslept"] == "having overslept"
    overslept = CheckResult("nap", "fail", "node2 overslept", ("node2",), {"item": "overslept"})
    slow = CheckResult("allreduce", "fail", "node2 is slow", ("node2",), {"ratio": 0.4})
    (referred,) = root_cause.refer_to_compute(
        [slow], root_cause.causes_in({"nap": [overslept]}), ALLREDUCE_PHASE.speed_keys
    )
    assert (referred.status, referred.details["refers_to"]) == ("warn", "nap")
    assert referred.summary == (
        "node2 is slow; caused by node2 having overslept (see the nap finding), not by the network"
    )
