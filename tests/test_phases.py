"""The job's phases: registered once (checks/job/phases.py), each declared beside the check that
judges it (checks/<check>/phase.py) and named as it, run on the nodes by the node module it names
(shipped in the job's bundle), its budget and its expected time counted from the same parts."""

from __future__ import annotations

import ast
import base64
import json
import os
import socket
import subprocess
import sys
import zlib
from importlib import import_module
from pathlib import Path

from checks.ddp.phase import DDP_STEP_S
from checks.ddp.phase import SETUP_S as DDP_SETUP_S
from checks.intranode.phase import BUDGET_S as INTRANODE_S
from checks.job import launch
from checks.job.node.markers import parse_result_line
from checks.job.phases import JOB_PHASES, job_phase, job_phases
from preflight.bundle import is_node_module, pack
from preflight.check import CheckContext
from preflight.config import Config
from preflight.deadline import Deadline
from preflight.registry import all_checks
from tests.test_bundle import BUNDLE_CAP_BYTES

CONTEXT = CheckContext(config=Config(), sessions=[], deadline=Deadline.after(60))


def test_the_checks_judged_in_the_job_declare_its_phases_in_the_order_it_runs_them() -> None:
    assert [phase.name for phase in job_phases()] == list(JOB_PHASES)
    assert [phase.label for phase in job_phases()] == [
        "compute",
        "inside-the-node",
        "per-rail",
        "all-reduce",
        "DDP",
    ]
    checks = {check.name: check for check in all_checks()}
    # The registry lists them in the job's order, after the checks whose findings they read.
    assert [name for name in checks if name in JOB_PHASES] == list(JOB_PHASES)
    order = list(checks)
    for phase in job_phases():
        check = checks[phase.name]
        assert check.settings is phase.settings and check.duration == phase.duration, phase.name
        assert check.reads == ("ports", *phase.refers_to), phase.name
        assert all(order.index(read) < order.index(phase.name) for read in check.reads), phase.name


def test_each_phase_runs_on_the_nodes_as_the_node_module_it_names() -> None:
    for phase in job_phases():
        assert is_node_module(phase.node), phase.node
        assert callable(import_module(phase.node).run), phase.node


def _shipped(bundle: bytes) -> set[str]:
    """The modules a bundle serves: the first argument of its loader's call, unpacked."""
    call = ast.parse(bundle).body[-1]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    packed = call.value.args[0]
    assert isinstance(packed, ast.Constant) and isinstance(packed.value, str)
    return set(json.loads(zlib.decompress(base64.b64decode(packed.value))))


def test_the_jobs_bundle_carries_the_node_module_of_every_phase_it_is_sent() -> None:
    args = launch._job_args(CONTEXT, JOB_PHASES, ["node0", "node1"], False)
    assert args["runs"] == {phase.name: phase.node for phase in job_phases()}
    bundle = launch.host_request({"host": {}, "job": args})
    shipped = _shipped(bundle[bundle.index(b"\n") + 1 :])
    # The entry imports none of them: they come because the phases name them.
    assert not set(args["runs"].values()) & _shipped(pack(launch.NODE_SCRIPT))
    assert set(args["runs"].values()) <= shipped
    assert len(bundle) <= BUNDLE_CAP_BYTES


def test_a_rank_sent_no_phases_to_import_says_so_before_it_joins(tmp_path: Path) -> None:
    args = launch._job_args(CONTEXT, JOB_PHASES, ["node0"], False)
    del args["runs"]
    done = subprocess.run(
        [sys.executable, "-I", "-", json.dumps(args)],
        input=launch.job_script({"runs": {}}),
        capture_output=True,
        cwd=tmp_path,
        env={"RANK": "0", "PATH": os.environ.get("PATH", "")},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    document = parse_result_line(done.stdout.decode())
    message = (
        f"the job's arguments on {socket.gethostname()} are incomplete: "
        "the launcher sent no 'runs' in the job's arguments"
    )
    assert document is not None and document["phase_errors"] == {
        "init": [{"local_rank": None, "message": message, "rank": None}]
    }


def test_a_small_cluster_has_time_for_its_repeats_and_a_large_one_does_not_pay_for_them() -> None:
    allreduce = job_phase("allreduce")
    small = allreduce.sent(Config(), [f"node{i}" for i in range(3)], False)
    large = allreduce.sent(Config(), [f"node{i}" for i in range(16)], False)
    per_round = small["pair_budget_s"] + 1
    # Three nodes: three rounds, nine for re-tests, and the repeats' two times three.
    assert allreduce.budget_s(small) == small["sweep_budget_s"] * 1.5 + (3 + 9 + 2 * 3) * per_round
    assert allreduce.budget_s(large) == large["sweep_budget_s"] * 1.5 + (15 + 9) * per_round


def test_the_fixed_budgets_and_ddps_steps() -> None:
    intranode = job_phase("intranode")
    assert intranode.budget_s(intranode.sent(Config(), ["node0"], False)) == INTRANODE_S
    ddp = job_phase("ddp")
    assert ddp.budget_s({"steps": 30}) == DDP_SETUP_S + 30 * DDP_STEP_S
