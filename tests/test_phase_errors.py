"""A phase's errors travel from rank 0's document to the controller as records with named fields
(``rank``, ``local_rank``, ``message``): the node writes one per failed rank, the controller names
the failed rank's node from its ``rank``, and the finding's details quote them in one line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from checks.job.failures import Silence, explain_failures
from checks.job.job_findings import job_results
from checks.job.node.harness import Job, PhaseError, phase_error
from checks.job.outcome import JobOutcome, phase_error_text, phase_errors
from checks.job.phase import read_phase
from tests.test_allreduce import load_job, replace_node, with_document
from tests.test_distributed_job import job_args

HEALTHY = load_job("three_nodes")


def _failed_in(phase: str, job: JobOutcome, errors: list[PhaseError]) -> JobOutcome:
    """``job`` whose document says ``phase`` failed with ``errors`` instead of its results."""

    def broke(document: dict[str, Any]) -> None:
        del document[phase]
        document["phase_errors"] = {phase: errors}

    return with_document(job, broke)


# --------------------------------------------------------------------------- the controller


def test_a_ranks_error_record_names_the_ranks_node() -> None:
    error = phase_error("RuntimeError: CUDA error: an illegal memory access", rank=1, local_rank=0)
    (finding,) = read_phase("allreduce", _failed_in("allreduce", HEALTHY, [error])).findings
    assert (finding.status, finding.hosts) == ("fail", ("node2",))
    assert finding.details["item"] == "phase_error"
    assert finding.summary == (
        "the allreduce phase failed on rank 1 on node2: RuntimeError: CUDA error: an illegal memory access"
    )
    assert finding.details["phase_error"] == (
        "rank 1 (local_rank 0): RuntimeError: CUDA error: an illegal memory access"
    )


def test_the_first_failed_rank_is_named_and_the_details_quote_four_then_count_the_rest() -> None:
    errors = [phase_error(f"RuntimeError: rank {rank} broke", rank=rank, local_rank=0) for rank in (2, 0, 1)]
    errors += [phase_error("RuntimeError: more", rank=rank, local_rank=rank - 3) for rank in (3, 4, 5)]
    (finding,) = read_phase("allreduce", _failed_in("allreduce", HEALTHY, errors)).findings
    assert finding.hosts == ("node3",)
    assert finding.summary == "the allreduce phase failed on rank 2 on node3: RuntimeError: rank 2 broke"
    assert finding.details["phase_error"] == (
        "rank 2 (local_rank 0): RuntimeError: rank 2 broke; rank 0 (local_rank 0): RuntimeError: rank 0 "
        "broke; rank 1 (local_rank 0): RuntimeError: rank 1 broke; rank 3 (local_rank 0): RuntimeError: "
        "more; and 2 more ranks"
    )


def test_a_message_is_read_whole_whatever_it_says() -> None:
    # A semicolon or a "rank N: " inside the message is the message's, not a separator or a rank.
    message = (
        "RuntimeError: CUDA out of memory. Tried to allocate 1.00 GiB; rank 0: GPU 0 has 79.10 GiB in use"
    )
    error = phase_error(message, rank=2, local_rank=0)
    (finding,) = read_phase("allreduce", _failed_in("allreduce", HEALTHY, [error])).findings
    assert finding.hosts == ("node3",)
    assert finding.summary == f"the allreduce phase failed on rank 2 on node3: {message}"


def test_an_error_of_no_rank_names_no_node() -> None:
    job = load_job("lab_inside_path_throttled")
    assert phase_errors(job.document)["allreduce"] == [
        {
            "rank": None,
            "local_rank": None,
            "message": "not run: the process group stopped answering in an earlier phase",
        }
    ]
    (finding,) = read_phase("allreduce", job).findings
    assert (finding.status, finding.hosts) == ("fail", ())
    assert finding.summary == (
        "the allreduce phase failed: not run: the process group stopped answering in an earlier phase"
    )
    assert (
        finding.details["phase_error"] == "not run: the process group stopped answering in an earlier phase"
    )


def test_the_recorded_ranks_errors_are_records() -> None:
    (error,) = phase_errors(load_job("worker_killed").document)["allreduce"]
    assert (error["rank"], error["local_rank"]) == (0, 0)
    assert error["message"].startswith("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/")
    assert phase_error_text([error]) == f"rank 0 (local_rank 0): {error['message']}"
    (finding,) = read_phase("allreduce", load_job("lab_loss_25_waiter_behind")).findings
    assert finding.summary.endswith(
        "(rank 0 on 10.199.1.11 timed out waiting: RuntimeError: Timed out waiting 20000ms for recv "
        "operation to complete)"
    )


def test_what_is_not_a_record_is_left_out() -> None:
    document = {
        "phase_errors": {
            "allreduce": [
                {"rank": 1, "local_rank": 0, "message": "RuntimeError: kept"},
                {"rank": "1", "local_rank": 0, "message": "RuntimeError: a rank that is not a number"},
                {"rank": 1, "local_rank": 0},
                "rank 1: RuntimeError: a sentence",
            ],
            "ddp": "rank 1: RuntimeError: a sentence",
        }
    }
    assert phase_errors(document) == {
        "allreduce": [{"rank": 1, "local_rank": 0, "message": "RuntimeError: kept"}]
    }
    assert phase_errors(None) == {} and phase_errors({"phase_errors": None}) == {}


# --------------------------------------------------------------------------- a node that stopped answering


def test_a_lost_node_is_said_to_have_stopped_in_the_phase_the_job_failed_in() -> None:
    job = replace_node(load_job("worker_killed"), "node3", lost=True, exit_status=None)
    (finding,) = job_results("allreduce", job, "allreduce")
    assert finding.summary == (
        "node3 stopped answering during the allreduce phase; preflight ended the job on node[1-2]"
    )
    assert finding.details["item"] == "node_lost"
    # What each node saw says it as the node's failure was diagnosed, before any phase was judged.
    (failure,) = [f for f in finding.details["failures"] if f["host"] == "node3"]
    assert failure["reason"] == "stopped answering during the job"
    # After the phase's results were in, the phase is not where it stopped.
    (late,) = job_results("allreduce", with_document(job, lambda d: d.update(allreduce={})), "allreduce")
    assert (late.status, late.details["item"]) == ("warn", "node_lost")
    assert late.summary == (
        "node3 stopped answering during the job; preflight ended the job on node[1-2], after the job's "
        "results were in"
    )


def test_a_silent_node_is_said_in_its_own_last_phase_else_in_the_phase_the_job_failed_in() -> None:
    job = replace_node(load_job("worker_killed"), "node3", lost=True, exit_status=None, silent_s=10.4)
    (failure,) = [f for f in explain_failures(job) if f.host == "node3"]
    assert failure.silence == Silence(10.4, None, None)
    assert failure.reason.startswith("went silent during the job: no heartbeat for 10.4 s (its link")
    (finding,) = job_results("allreduce", job, "allreduce")
    assert finding.summary.startswith("node3 went silent during the allreduce phase: no heartbeat for 10.4 s")
    named = replace_node(job, "node3", last_phase="ddp")
    (finding,) = job_results("allreduce", named, "allreduce")
    assert finding.summary.startswith("node3 went silent in the ddp phase: no heartbeat for 10.4 s")


# --------------------------------------------------------------------------- the node


class _World:
    """torch.distributed on rank 0 of a world whose other ranks gather ``others`` (by rank, from 1)."""

    def __init__(self, torch: Any, others: list[Any]) -> None:
        self.torch = torch
        self.others = [json.dumps(value).encode("utf-8") for value in others]

    def all_gather(self, out: list[Any], tensor: Any, group: Any = None) -> None:
        out[0].copy_(tensor)
        for rank, data in enumerate(self.others, 1):
            if tensor.dtype == self.torch.int64:  # the sizes of the values
                out[rank].fill_(len(data))
            else:
                out[rank][: len(data)] = self.torch.frombuffer(bytearray(data), dtype=self.torch.uint8)


def _rank_0(torch: Any, others: list[Any]) -> Job:
    job = Job(torch, _World(torch, others), job_args(3))
    job.rank, job.local_rank, job.world = 0, 0, 1 + len(others)
    return job


def test_the_node_writes_a_record_for_each_rank_that_failed() -> None:
    torch = pytest.importorskip("torch")
    other = phase_error("RuntimeError: CUDA error: device-side assert triggered", rank=2, local_rank=1)
    job = _rank_0(torch, [None, other])

    def phase() -> dict[str, Any]:
        raise RuntimeError("cannot allocate 4096 bytes for the sweep\nC++ frames")

    errors: dict[str, list[PhaseError]] = {}
    document: dict[str, Any] = {}
    job.run_phase("allreduce", phase, document, errors)
    assert errors == {
        "allreduce": [
            {"rank": 0, "local_rank": 0, "message": "RuntimeError: cannot allocate 4096 bytes for the sweep"},
            {"rank": 2, "local_rank": 1, "message": "RuntimeError: CUDA error: device-side assert triggered"},
        ]
    }
    assert "allreduce" not in document
    # The controller names the first failed rank's node, as it would from the job's document.
    (finding,) = read_phase("allreduce", _failed_in("allreduce", HEALTHY, errors["allreduce"])).findings
    assert finding.hosts == ("node1",)
    assert finding.summary == (
        "the allreduce phase failed on rank 0 on node1: "
        "RuntimeError: cannot allocate 4096 bytes for the sweep"
    )


def test_the_node_says_which_phases_were_not_run_and_which_it_does_not_know() -> None:
    torch = pytest.importorskip("torch")
    job = _rank_0(torch, [None, None])
    errors: dict[str, list[PhaseError]] = {}
    job.run_phases({}, ["allreduce", "unknown"], {}, errors)
    job.usable = False
    job.run_phases({"ddp": lambda _job: {}}, ["ddp"], {}, errors)
    assert errors == {
        "allreduce": [{"rank": None, "local_rank": None, "message": "unknown phase 'allreduce'"}],
        "unknown": [{"rank": None, "local_rank": None, "message": "unknown phase 'unknown'"}],
        "ddp": [
            {
                "rank": None,
                "local_rank": None,
                "message": "not run: the process group stopped answering in an earlier phase",
            }
        ],
    }


class _Gone:
    """torch.distributed on a rank whose peers stopped answering: every gather fails."""

    def all_gather(self, out: list[Any], tensor: Any, group: Any = None) -> None:
        raise RuntimeError("Connection closed by peer [10.0.0.2]:29500")


def test_a_rank_whose_peers_stopped_answering_writes_its_own_record() -> None:
    torch = pytest.importorskip("torch")
    job = Job(torch, _Gone(), job_args(3))
    job.rank, job.local_rank, job.world, job.usable = 0, 0, 3, True
    errors: dict[str, list[PhaseError]] = {}
    job.run_phase("allreduce", lambda: {}, {}, errors)
    assert not job.usable
    assert errors == {
        "allreduce": [
            {
                "rank": 0,
                "local_rank": 0,
                "message": "the process group stopped answering after this phase: "
                "RuntimeError: Connection closed by peer [10.0.0.2]:29500",
            }
        ]
    }
