"""One rank's life: a heartbeat from its first moment, torch imported out of the collector's way,
joining the world, the phases the launcher asked for (each run by the node module it named:
``phases.sent_phases``), rank 0's document on stdout, and the teardown.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

from checks.job.node.harness import (
    Job,
    MissingSetting,
    Settings,
    enter_phase,
    phase_error,
    start_heartbeat,
)
from checks.job.node.markers import JOB_VERSION, print_document
from checks.job.node.phases import sent_phases
from preflight.node.shared import collector_paused, error_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from checks.job.node.harness import PhaseErrors

    JsonDict = dict[str, Any]


def _not_started(message: str) -> int:
    """Before the world is joined: rank 0 prints a document with ``message`` as the init error (the
    node's, no rank's own)."""
    if os.environ.get("RANK", "0") == "0":
        print_document({"job_version": JOB_VERSION, "phase_errors": {"init": [phase_error(message)]}})
        return 0
    return 1


def run(args: Mapping[str, Any]) -> int:
    """Run the job as this process's rank (its place in the environment, as torchrun sets it);
    this rank's exit status."""
    started = time.perf_counter()
    start_heartbeat()
    try:
        # The phases' modules first: one this node's Python cannot import is named before any
        # rank joins and waits for it.
        table = sent_phases(Settings("the job's arguments", args)["runs"])
    except MissingSetting as exc:
        traceback.print_exc(file=sys.stderr)
        return _not_started(f"the job's arguments on {socket.gethostname()} are incomplete: {exc}")
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        cause = error_text(exc, first_line=True)
        return _not_started(f"the job's phases cannot be imported on {socket.gethostname()}: {cause}")
    try:
        # A warm host imported torch the same way, before it forked this rank.
        with collector_paused():
            import torch
            import torch.distributed as dist
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return _not_started(
            f"torch cannot be imported on {socket.gethostname()}: {error_text(exc, first_line=True)}"
        )
    try:
        job = Job(torch, dist, args)
        names = list(job.args["phases"])
    except MissingSetting as exc:
        traceback.print_exc(file=sys.stderr)
        return _not_started(f"the job's arguments on {socket.gethostname()} are incomplete: {exc}")

    errors: PhaseErrors = {}
    document: JsonDict = {}
    try:
        job.start()
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        errors["init"] = [job.own_error(error_text(exc, first_line=True))]
    if job.usable:
        job.run_phases(table, names, document, errors)
    enter_phase("finish")
    printed = False
    if job.rank == 0:
        result = job.document(started)
        result.update(document)
        result["phase_errors"] = errors
        result["duration_s"] = time.perf_counter() - started
        print_document(result)
        printed = True
    try:
        if job.usable:
            # Nobody tears down while a peer still finishes its last collective.
            job.barrier()
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as exc:
        sys.stderr.write(f"destroy_process_group failed: {error_text(exc, first_line=True)}\n")
    if job.rank == 0:
        return 0 if printed else 1
    return 0 if job.usable or "init" not in errors else 1
