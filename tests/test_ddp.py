"""The ``ddp`` check, judged on recorded jobs (tests/data/jobs) and variants that change one thing."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from checks import ddp
from checks.ddp import judge_ddp
from checks.job.job_findings import job_results
from checks.job.outcome import JobNotRun
from checks.job.settings import DdpSection
from preflight.check import CheckContext
from preflight.config import Config
from preflight.deadline import Deadline
from preflight.model import CheckResult
from tests.test_allreduce import JOBS, failing, load_job, only, replace_node, with_document

HEALTHY = load_job("three_nodes")
ONE_NODE = load_job("one_node_three_ranks")
CONFIG = Config()


def changed_ddp(job: Any, **values: Any) -> Any:
    def change(document: dict[str, Any]) -> None:
        document["ddp"].update(values)

    return with_document(job, change)


def test_a_recorded_healthy_job_passes() -> None:
    result = only(judge_ddp(HEALTHY, CONFIG))
    assert result.status == "pass"
    assert re.fullmatch(
        r"3 ranks on 3 nodes trained 30 steps: loss 0\.753 -> 0\.141, parameters and gradients identical "
        r"on every rank, compute step [\d.]+ ms \(slowest [\d.]+ ms\)",
        result.summary,
    ), result.summary
    assert len(result.details["losses"]) == 30
    assert [r["host"] for r in result.details["ranks"]] == ["node1", "node2", "node3"]
    assert len(result.details["compute_step_s"]) == 3 and len(set(result.details["param_hashes"])) == 1


def test_one_node_with_three_ranks_passes() -> None:
    result = only(judge_ddp(ONE_NODE, CONFIG))
    assert result.status == "pass" and result.summary.startswith("3 ranks on 1 node trained 30 steps")


def test_a_straggler_is_named_by_rank_and_node() -> None:
    compute = list(HEALTHY.document["ddp"]["compute_step_s"])  # type: ignore[index]
    median = sorted(compute)[1]
    compute[2] = median + 0.012
    (result,) = failing(judge_ddp(changed_ddp(HEALTHY, compute_step_s=compute), CONFIG))
    assert result.hosts == ("node3",)
    assert re.fullmatch(
        r"rank 2 on node3 is a straggler: [\d.]+ ms per compute step vs the median [\d.]+ ms \([\d.]+x\)",
        result.summary,
    ), result.summary


def test_a_rank_slower_only_by_noise_is_no_straggler() -> None:
    compute = list(HEALTHY.document["ddp"]["compute_step_s"])  # type: ignore[index]
    compute[2] = sorted(compute)[1] * 3  # 3x, but well under a millisecond: below the noise floor
    assert only(judge_ddp(changed_ddp(HEALTHY, compute_step_s=compute), CONFIG)).status == "pass"
    tight = Config().with_sections(DdpSection(straggler_min_excess_s=0.0001))
    assert failing(judge_ddp(changed_ddp(HEALTHY, compute_step_s=compute), tight))


def test_differing_parameters_name_the_ranks_and_their_nodes() -> None:
    section = HEALTHY.document["ddp"]  # type: ignore[index]
    hashes = list(section["param_hashes"])
    sums = list(section["param_checksums"])
    hashes[1], sums[1] = "0123456789abcdef", sums[1] + 0.5
    job = changed_ddp(HEALTHY, param_hashes=hashes, param_checksums=sums)
    (result,) = failing(judge_ddp(job, CONFIG))
    assert result.hosts == ("node2",)
    assert result.summary == (
        f"parameters differ after 30 steps on rank 1 on node2: checksum {sums[1]:.10g} "
        f"vs {sums[0]:.10g} on the other ranks"
    )


def test_gradients_that_differ_with_no_majority_name_every_rank() -> None:
    job = changed_ddp(ONE_NODE, grad_hashes=["a", "b", "c"])
    (result,) = failing(judge_ddp(job, CONFIG))
    assert result.summary.startswith(
        "gradients differ after 30 steps, with no majority: ranks 0, 1, 2 on node1"
    )


def test_a_loss_that_does_not_fall_fails() -> None:
    job = changed_ddp(HEALTHY, loss_first=0.5, loss_last=0.48)
    (result,) = failing(judge_ddp(job, CONFIG))
    assert (
        result.summary
        == "the loss did not fall: 0.5 -> 0.48 in 30 steps (it must end below 0.9x where it started)"
    )


def test_a_loss_that_became_nan_fails_at_its_step() -> None:
    losses = list(HEALTHY.document["ddp"]["losses"])  # type: ignore[index]
    losses[17:] = [None] * 13  # the job writes NaN as null
    job = changed_ddp(HEALTHY, losses=losses, loss_last=None)
    (result,) = failing(judge_ddp(job, CONFIG))
    assert result.summary == "the loss became NaN or infinite at step 18"


def test_an_all_reduce_of_ones_that_is_not_the_world_size_fails() -> None:
    (result,) = failing(judge_ddp(changed_ddp(HEALTHY, ones_allreduce=2.0), CONFIG))
    assert result.summary == "an all-reduce of ones gave 2, not the world size 3"


def test_a_rank_that_never_reached_the_join_barrier_is_named() -> None:
    # The message gloo's monitored barrier raised on rank 0, as recorded.
    recorded = (JOBS / "monitored_barrier.stderr").read_text(encoding="utf-8")
    message = next(line for line in recorded.splitlines() if "RuntimeError: [Rank 0]" in line)
    message = message.split("]: ", 1)[1]

    def broke(document: dict[str, Any]) -> None:
        del document["ddp"]
        document["phase_errors"] = {"ddp": [{"rank": 0, "local_rank": 0, "message": message}]}

    (result,) = judge_ddp(with_document(HEALTHY, broke), CONFIG)
    assert result.status == "fail" and result.hosts == ("node3",)
    assert result.summary == "rank 2 on node3 never reached the join barrier (monitored_barrier waited 3 s)"


def test_a_job_that_died_before_this_phase_refers_to_the_phase_that_names_the_culprit() -> None:
    """One cause, one finding: allreduce names node3 (its phase is where the job ended); ddp says
    it did not run and where to look, naming no node of its own."""
    job = load_job("worker_killed")
    (result,) = judge_ddp(job, CONFIG)
    assert (result.status, result.hosts) == ("skip", ())
    assert result.summary == "not run: the job ended in the allreduce phase (see allreduce)"
    owner = job_results("allreduce", job, "allreduce")
    assert [r.status for r in owner] == ["fail"] and owner[0].hosts == ("node3",)
    assert "rank 2 was ended by SIGKILL" in owner[0].summary


def test_a_job_that_never_started_is_named_once_by_its_first_phase() -> None:
    job = load_job("master_unreachable")
    (result,) = judge_ddp(job, CONFIG)
    assert (result.status, result.hosts) == ("skip", ())
    assert result.summary == "not run: the job never started (see allreduce)"
    (owner,) = job_results("allreduce", job, "allreduce")
    assert owner.status == "fail" and owner.hosts == ("node2",) and "never joined" in owner.summary


def test_a_node_lost_during_training_fails_this_phase() -> None:
    job = load_job("worker_killed")
    job = replace_node(job, "node3", lost=True, exit_status=None)
    job = replace_node(job, "node3", stderr=job.nodes[2].stderr + 'PREFLIGHT-JOB-PHASE {"phase": "ddp"}\n')
    (result,) = judge_ddp(job, CONFIG)
    assert result.status == "fail"
    assert (
        result.summary == "node3 stopped answering during the ddp phase; preflight ended the job on node[1-2]"
    )


def test_the_check_reports_a_job_that_did_not_run_and_judges_a_job(monkeypatch: pytest.MonkeyPatch) -> None:
    from checks.job import launch

    ctx = CheckContext(config=CONFIG, sessions=[], deadline=Deadline.after(10))
    failed = JobNotRun("fail", "torch is not importable on node2", ("node2",), {"item": "torch"})
    monkeypatch.setattr(launch, "distributed_job", lambda _ctx: failed)
    # Alone in the run, ddp reports why the job did not start; a set-up fault, not the node's health.
    assert ddp.CHECK.run(ctx) == [
        CheckResult(
            "ddp",
            "fail",
            "torch is not importable on node2",
            ("node2",),
            {"item": "torch", "action": "fix_config"},
        )
    ]
    # With the other checks of the job in the run, the first of them reports it and ddp refers to it.
    ctx.selected = ("connect", "compute", "allreduce", "ddp")
    (refers,) = ddp.CHECK.run(ctx)
    assert refers.status == "skip" and refers.hosts == () and "see compute" in refers.summary
    ctx.selected = ()
    monkeypatch.setattr(launch, "distributed_job", lambda _ctx: HEALTHY)
    assert [r.status for r in ddp.CHECK.run(ctx)] == ["pass"]
    without = dataclasses.replace(HEALTHY, phases=("allreduce",))
    assert only(judge_ddp(without, CONFIG)).status == "skip"


def test_a_node_that_failed_after_the_results_were_in_is_a_warning() -> None:
    job = replace_node(
        HEALTHY, "node2", exit_status=1, stderr="terminate called without an active exception\n"
    )
    results = judge_ddp(job, CONFIG)
    assert [r.status for r in results] == ["warn", "pass"]
    assert results[0].summary == (
        "node2: failed (exit status 1): terminate called without an active exception, "
        "after the job's results were in"
    )
