"""The srun transport: inside a Slurm allocation, commands reach the allocation's nodes as job
steps, not over SSH (many clusters let a user onto a compute node only through their own job).

Each command is one step on one node (``--nodes=1 --ntasks=1 --nodelist=NODE --overlap``) under
a step time limit, and still under the node's own ``timeout``, so that every node's answer,
failure and deadline stay its own: a node whose slurmd is gone fails its own step and no other.
The controller ends a step by ending its ``srun``, which passes the signal to the step's tasks;
the step limit and the node's ``timeout`` end it if the node cannot be told.

srun's own exit status is not the command's: srun exits 0 when it gives up on a step whose node
stopped answering. So the node prints how its command ended, and only that is believed; a step
that never said is a lost node.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ClusterShell.NodeSet import NodeSet, NodeSetException

from preflight.deadline import Deadline
from preflight.errors import InputError, UsageError
from preflight.inventory import HostSpec
from preflight.transport import KILL_AFTER_S, PGID_MARKER, CommandResult, Transport
from preflight.transport.local import LocalProcess

# Seconds past the node's own deadline before the controller gives up on srun: step launch and
# the exit status travelling back through slurmstepd and srun.
SRUN_GRACE_S = 10.0
EXIT_MARKER = b"preflight-exit="
_EXIT_LINE = re.compile(rb"^preflight-exit=(\d+)\n?", re.MULTILINE)
# srun's own line for a task that exited non-zero: it restates the exit status, and would hide the
# command's last words where a message quotes the end of stderr.
_SRUN_EXIT_LINE = re.compile(
    rb"^srun: error: \S+: tasks? [0-9,-]+: Exited with exit code \d+\n?", re.MULTILINE
)


@dataclass(frozen=True)
class SrunSettings:
    """The allocation the steps run in, and the srun program that starts them."""

    job_id: str
    srun: str = "srun"


def step_command(argv: Sequence[str], timeout_s: float) -> list[str]:
    """The command a step runs on its node: ``argv`` under the node's own ``timeout``, then the
    line saying how it ended. Every word is quoted."""
    seconds = max(1, int(timeout_s + 0.999))
    inner = (
        f"echo {PGID_MARKER.decode()}$$ >&2; timeout -k {KILL_AFTER_S} {seconds} {shlex.join(argv)}; "
        f"status=$?; echo {EXIT_MARKER.decode()}$status >&2; exit $status"
    )
    return ["sh", "-c", inner]


class SrunProcess(LocalProcess):
    """A step seen through its srun. Its exit status is the one its node printed; a step that
    never started (srun could not reach the node) or whose node fell silent has none, and reads
    as a lost connection naming srun's reason."""

    grace_s = SRUN_GRACE_S

    def _exit_status(self) -> int | None:
        super()._exit_status()  # reap srun
        reported = _EXIT_LINE.findall(self._stderr.data())
        return int(reported[-1]) if reported else None

    def wait(self, deadline: Deadline | None = None) -> CommandResult:
        result = super().wait(deadline)
        stderr = _EXIT_LINE.sub(b"", _SRUN_EXIT_LINE.sub(b"", result.stderr))
        return replace(result, stderr=stderr)


class SrunTransport(Transport):
    """One node of the allocation, reached through job steps."""

    kind = "srun"

    def __init__(self, spec: HostSpec, settings: SrunSettings) -> None:
        super().__init__(spec)
        self.settings = settings
        self._running: list[SrunProcess] = []

    def open(self, deadline: Deadline) -> None:
        # The first step (the facts probe) is the connection: a node it cannot reach is named there.
        return None

    def step_argv(self, argv: Sequence[str], timeout_s: float) -> list[str]:
        """The srun command line that runs ``argv`` on this node as one step."""
        minutes = max(1, math.ceil((timeout_s + KILL_AFTER_S + SRUN_GRACE_S) / 60))
        return [
            self.settings.srun,
            f"--jobid={self.settings.job_id}",
            "--nodes=1",
            "--ntasks=1",
            f"--nodelist={self.spec.address}",
            "--overlap",  # beside the batch step and the other nodes' steps, on the allocation's CPUs
            "--kill-on-bad-exit=1",
            f"--time={minutes}",
            "--job-name=preflight",
            "--quiet",
            "--input=all",
            *step_command(argv, timeout_s),
        ]

    def start(self, argv: Sequence[str], *, timeout_s: float) -> SrunProcess:
        process = SrunProcess(self.step_argv(argv, timeout_s), timeout_s)
        self._running = [p for p in self._running if p._exit_status_now() is None] + [process]
        return process

    def responsive(self, timeout_s: float) -> bool:
        """Whether a trivial step starts and ends on the node within ``timeout_s``."""
        return self.run(["true"], timeout_s=timeout_s).ok

    def close(self) -> None:
        for process in self._running:
            process.kill()
        self._running = []


def in_allocation(environ: Mapping[str, str] | None = None) -> bool:
    """Whether preflight runs inside a Slurm allocation (a batch script, salloc, an srun step)."""
    return bool((environ if environ is not None else os.environ).get("SLURM_JOB_ID"))


def _gpus_per_node(environ: Mapping[str, str]) -> int | None:
    """GPUs per node as the job asked for them (``--gpus-per-node=8``, ``a100:8``), if it did."""
    text = environ.get("SLURM_GPUS_PER_NODE")
    if not text:
        return None
    count = text.rpartition(":")[2]
    return int(count) if count.isdigit() and int(count) > 0 else None


def allocation_inventory(
    environ: Mapping[str, str] | None = None, *, nodes: str | None = None
) -> tuple[SrunSettings, list[HostSpec]]:
    """The allocation's nodes from ``SLURM_JOB_NODELIST`` (or ``nodes``, a hostlist expression
    within it), with GPUs per node as slots when the job asked for them (``--gpus-per-node``).
    The allocation's CPUs per node are not slots: a CPU node runs one rank, as over SSH."""
    env = environ if environ is not None else os.environ
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        raise UsageError(
            "--slurm: not inside a Slurm allocation (SLURM_JOB_ID is not set); use salloc or sbatch"
        )
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise InputError("not set in this allocation", path="SLURM_JOB_NODELIST")
    try:
        allocated = list(NodeSet(nodelist))
        wanted = list(NodeSet(nodes)) if nodes else allocated
    except NodeSetException as exc:
        raise InputError(str(exc), path="--nodes" if nodes else "SLURM_JOB_NODELIST") from None
    if outside := [name for name in wanted if name not in allocated]:
        raise UsageError(f"--nodes: {NodeSet.fromlist(outside)} not in this allocation ({nodelist})")
    slots = _gpus_per_node(env)
    specs = [HostSpec(name=name, address=name, slots=slots, source="SLURM_JOB_NODELIST") for name in wanted]
    return SrunSettings(job_id=job_id), specs
