"""The timing harness every phase runs on: one rank's place in the world, joining it, agreement
between ranks (maxima, allocations, gathers), timed all-reduces, the heartbeats and phase markers,
and running the phases of a table one after another with every rank agreeing how each went.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import random
import socket
import sys
import threading
import time
import traceback
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from checks.job.node.markers import BEAT_INTERVAL_S, BEAT_MARKER, JOB_VERSION, PHASE_MARKER, RANK_MARKER, log
from checks.job.node.nccl import loaded_nccl
from checks.job.node.netstat import sample as network_sample
from checks.job.node.planning import FLOAT32_BYTES, SWEEP_START_BYTES
from preflight.node.shared import error_text

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    JsonDict = dict[str, Any]
    Phase = Callable[["Job"], JsonDict]
    PhaseErrors = dict[str, list["PhaseError"]]

# Before it joins, a rank asks every MASTER_POLL_S (longer past MASTER_POLL_RANKS ranks) whether
# rank 0's store listens yet, for MASTER_WAIT_S at most (then torch's own retries take over).
MASTER_POLL_S = 0.02
MASTER_POLL_RANKS = 256
MASTER_POLL_MAX_S = 0.5
MASTER_WAIT_S = 10.0


def wait_for_master(address: str, port: int, timeout_s: float, world: int = 1) -> bool:
    """Wait until rank 0's store accepts connections; False when it did not within ``timeout_s``
    (the join then goes on as it would have, and names the master if it never answers).

    torch's own client retries a refused connection only after a growing pause of about half a
    second: a master that starts listening a moment after the others asked would cost every
    rank that pause. A connection opened and closed at once is harmless to the store. The name
    is resolved once; the tries come every MASTER_POLL_S (jittered), less often in a large
    world, so that the master's port gets at most about MASTER_POLL_RANKS / MASTER_POLL_S
    tries a second whatever the number of ranks."""
    deadline = time.monotonic() + timeout_s
    try:
        family, kind, proto, _, where = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
    except (OSError, IndexError):
        return False
    interval = min(MASTER_POLL_MAX_S, MASTER_POLL_S * max(1.0, world / MASTER_POLL_RANKS))
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.settimeout(max(0.05, min(1.0, left)))
                probe.connect(where)
                return True
        except OSError:
            pause = interval * random.uniform(0.5, 1.5)
            if time.monotonic() + pause >= deadline:
                return False
            time.sleep(pause)


class _Progress:
    """What the heartbeat says: the phase this rank is in (set by the main thread with
    :func:`enter_phase`, which also beats at once, so that the controller learns of each phase
    as it starts, not up to a beat interval later), the collectives it has completed in it
    (``ops``), whether it has done its part of the phase (``done``: it waits for the others'
    agreement) or its part raised (``failed``: a timeout, a peer gone), and the wall-clock time
    (``t``). The first rank of each node adds the node's network counters (``net``:
    :mod:`checks.job.node.netstat`), so that the controller has them at each phase's start and
    up to its end."""

    phase = "import"
    ops = 0
    done = False
    failed = False
    changed = threading.Event()


def enter_phase(name: str) -> None:
    _Progress.phase = name
    _Progress.ops = 0
    _Progress.done = False
    _Progress.failed = False
    _Progress.changed.set()


def completed_op() -> None:
    """One more collective of this phase completed on this rank."""
    _Progress.ops += 1


def finished_part(failed: bool = False) -> None:
    """This rank has done its part of the phase, or it ``failed`` (it beats at once to say so)."""
    _Progress.done = not failed
    _Progress.failed = failed
    _Progress.changed.set()


def _beat(interval_s: float) -> None:
    rank = os.environ.get("RANK", "0")
    first_of_node = os.environ.get("LOCAL_RANK", "0") == "0"
    while True:
        beat: JsonDict = {
            "rank": int(rank) if rank.isdigit() else rank,
            "phase": _Progress.phase,
            "ops": _Progress.ops,
            "done": _Progress.done,
            "failed": _Progress.failed,
            "t": round(time.time(), 3),
        }
        if first_of_node and _Progress.phase != "import":
            # The counters are evidence, never a reason to stop beating.
            with contextlib.suppress(Exception):
                beat["net"] = network_sample()
        log(BEAT_MARKER, beat)
        _Progress.changed.wait(interval_s)
        _Progress.changed.clear()


def start_heartbeat(interval_s: float = BEAT_INTERVAL_S) -> None:
    threading.Thread(target=_beat, args=(interval_s,), name="preflight-heartbeat", daemon=True).start()


class MissingSetting(KeyError):
    """The launcher sent no value for a setting the job reads. The launcher sends every setting
    (``checks.job.launch``); the job has no defaults of its own that could disagree with the
    controller's configuration."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "missing setting"


class Settings:
    """The job's arguments (or one section of them) as the launcher sent them: reading a key it
    did not send raises :class:`MissingSetting`, naming the key and where it was looked for."""

    def __init__(self, where: str, values: Mapping[str, Any]) -> None:
        self.where = where
        self.values = values

    def __getitem__(self, key: str) -> Any:
        if key not in self.values:
            raise MissingSetting(f"the launcher sent no {key!r} in {self.where}")
        return self.values[key]

    def __contains__(self, key: object) -> bool:
        return key in self.values

    def section(self, name: str) -> Settings:
        """The settings under ``name``, as :class:`Settings`."""
        return Settings(f"{self.where}[{name!r}]", self[name])


class PhaseError(TypedDict):
    """Why a phase failed, as rank 0's document keeps it (``phase_errors``: by phase, a list of
    these, one per rank that failed, by rank): the failed rank's global ``rank`` and ``local_rank``,
    and its error's ``message`` (``Type: first line``). Both ranks are None where the reason is no
    rank's own: the phase was not run or is unknown, or the node could not start its ranks."""

    rank: int | None
    local_rank: int | None
    message: str


def phase_error(message: str, rank: int | None = None, local_rank: int | None = None) -> PhaseError:
    """A :class:`PhaseError`: ``message``, of the rank ``rank`` (``local_rank`` on its node), or of
    no rank."""
    return {"rank": rank, "local_rank": local_rank, "message": message}


class StoppedByPeer(Exception):
    """This rank left a phase because another rank failed in it (that rank reports the cause)."""


def tensor_bytes(tensor: Any) -> bytes:
    """The raw bytes of a tensor, read from its CPU memory (no numpy needed)."""
    cpu = tensor.detach().to("cpu").contiguous()
    size = cpu.numel() * cpu.element_size()
    return ctypes.string_at(cpu.data_ptr(), size) if size else b""


class Job:
    """One rank's view of the job: its place in the world, and the harness the phases run on."""

    def __init__(self, torch: Any, dist: Any, args: Mapping[str, Any]) -> None:
        self.torch = torch
        self.dist = dist
        self.args = Settings("the job's arguments", args)
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.node_rank = int(os.environ.get("GROUP_RANK", "0"))
        # Collectives get a short deadline; joining gets a longer one: eight processes per node
        # importing torch from a cold shared filesystem can start tens of seconds apart.
        self.timeout_s = float(self.args["timeout_s"])
        self.join_timeout_s = float(self.args["join_timeout_s"])
        self.group: Any = None  # every collective runs here, under timeout_s (set by start)
        self.side: Any = None  # a gloo group beside NCCL, for the join barrier that names missing ranks
        self.wants_cuda = str(self.args["device"]) == "cuda"
        self.cuda = self.wants_cuda and bool(torch.cuda.is_available())
        self.backend = str(self.args["backend"])
        self.device = torch.device("cuda", self.local_rank) if self.cuda else torch.device("cpu")
        self.hostname = socket.gethostname()
        self.usable = False  # the process group answers collectives
        self.ranks: list[JsonDict] = []
        self.ranks_of_node: dict[int, list[int]] = {}

    def settings(self, section: str) -> Settings:
        """One section of the job's arguments (``allreduce``, ``ddp``...), as the launcher sent it."""
        return self.args.section(section)

    # ---- plumbing

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def agree_max(self, values: Sequence[float], group: Any = None) -> list[float]:
        """The maximum of each value over the ranks of ``group``: the same numbers on every rank."""
        tensor = self.torch.tensor(list(values), dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(tensor, op=self.dist.ReduceOp.MAX, group=group or self.group)
        completed_op()
        return [float(v) for v in tensor.tolist()]

    def agree_min(self, values: Sequence[float], group: Any = None) -> list[float]:
        return [-v for v in self.agree_max([-v for v in values], group)]

    def allocate(self, count: int, what: str, needed: bool = True) -> Any:
        """A float32 buffer of ``count`` elements, allocated on every rank or on none: ranks agree
        before the first collective on it, so that one rank out of memory (another process on
        its GPU) is named with its cause instead of leaving the others hung in a collective.
        Ranks with ``needed`` False take part in the agreement only."""
        buffer, failure = None, None
        if needed:
            try:
                buffer = self.torch.zeros(count, dtype=self.torch.float32, device=self.device)
            except Exception as exc:
                failure = exc
        if self.agree_max([1.0 if failure is not None else 0.0])[0]:
            if failure is not None:
                size = count * FLOAT32_BYTES
                raise RuntimeError(
                    f"cannot allocate {size} bytes for {what}: {error_text(failure, first_line=True)}"
                )
            raise StoppedByPeer(f"another rank could not allocate memory for {what}")
        return buffer

    def memory_cap(self, max_bytes: int) -> int:
        """The largest message every rank can hold: a quarter of the least free GPU memory (the
        sweep holds a buffer and, while it checks the sums, a byte per element; the rest is left
        to the communicator's own buffers and to whatever else shares the GPU)."""
        if not self.cuda:
            return max_bytes
        free, _ = self.torch.cuda.mem_get_info(self.device)
        fits = int(self.agree_min([float(free) / 4])[0])
        return min(max_bytes, max(SWEEP_START_BYTES, fits))

    def barrier(self, group: Any = None) -> None:
        # A one-element all-reduce works on every backend and device, without the device
        # guessing that dist.barrier does for NCCL.
        tensor = self.torch.zeros(1, device=self.device)
        self.dist.all_reduce(tensor, group=group or self.group)
        self.sync()
        completed_op()

    def gather(self, value: Any) -> list[Any]:
        """``value`` (plain JSON data) from every rank, by rank.

        Not ``all_gather_object``: it needs numpy, which a training environment may lack.
        """
        torch = self.torch
        data = json.dumps(value).encode("utf-8")
        size = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        sizes = [torch.zeros_like(size) for _ in range(self.world)]
        self.dist.all_gather(sizes, size, group=self.group)
        lengths = [int(s.item()) for s in sizes]
        padded = torch.zeros(max(lengths), dtype=torch.uint8)
        padded[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        padded = padded.to(self.device)
        gathered = [torch.empty_like(padded) for _ in range(self.world)]
        self.dist.all_gather(gathered, padded, group=self.group)
        pieces = [tensor_bytes(gathered[i][: lengths[i]]) for i in range(self.world)]
        completed_op()
        return [json.loads(piece.decode("utf-8")) for piece in pieces]

    def time_ops(self, buffer: Any, count: int, group: Any = None, aligned: bool = False) -> float:
        """Seconds per in-place all-reduce of ``buffer`` over ``count`` back-to-back ops, on this rank.

        The ranks start the clock together: after a barrier, or, when ``aligned``, because they
        have just left a collective of the group together (an agreement), which is one."""
        if aligned:
            self.sync()
        else:
            self.barrier(group)
        start = time.perf_counter()
        for _ in range(count):
            self.dist.all_reduce(buffer, group=group or self.group)
            completed_op()
        self.sync()
        return (time.perf_counter() - start) / count

    # ---- joining

    def start(self) -> None:
        log(
            RANK_MARKER,
            {
                "rank": self.rank,
                "node_rank": self.node_rank,
                "local_rank": self.local_rank,
                "hostname": self.hostname,
                "pid": os.getpid(),
            },
        )
        if self.wants_cuda and not self.cuda:
            version = getattr(self.torch, "__version__", "?")
            raise RuntimeError(f"CUDA is not available to torch {version} on {self.hostname}")
        if self.cuda:
            self.torch.cuda.set_device(self.local_rank)
        enter_phase("join")
        join_s = self.join_timeout_s
        if self.rank != 0:
            # The time spent waiting for the master counts against the join's deadline.
            began = time.monotonic()
            master = (os.environ.get("MASTER_ADDR", ""), int(os.environ.get("MASTER_PORT", "0")))
            wait_for_master(*master, min(MASTER_WAIT_S, join_s / 2), self.world)
            join_s -= time.monotonic() - began
        self.dist.init_process_group(self.backend, timeout=timedelta(seconds=join_s))
        self.world = self.dist.get_world_size()
        self.rank = self.dist.get_rank()
        # Every rank creates the same groups in the same order, as new_group requires.
        collective = timedelta(seconds=self.timeout_s)
        self.group = self.dist.new_group(timeout=collective)
        self.side = (
            self.dist.new_group(backend="gloo", timeout=collective) if self.backend != "gloo" else self.group
        )
        device_name = self.torch.cuda.get_device_name(self.local_rank) if self.cuda else "cpu"
        me = {
            "rank": self.rank,
            "node_rank": self.node_rank,
            "local_rank": self.local_rank,
            "hostname": self.hostname,
            "device_name": device_name,
        }
        if self.backend == "nccl":
            me["nccl_loaded"] = loaded_nccl(self.torch)
        self.ranks = sorted(self.gather(me), key=lambda r: int(r["rank"]))
        for info in self.ranks:
            self.ranks_of_node.setdefault(int(info["node_rank"]), []).append(int(info["rank"]))
        self.usable = True

    # ---- phases and the document

    def own_error(self, message: str) -> PhaseError:
        """``message`` as this rank's :class:`PhaseError`."""
        return phase_error(message, self.rank, self.local_rank)

    def run_phase(
        self, name: str, phase: Callable[[], JsonDict], document: JsonDict, errors: PhaseErrors
    ) -> None:
        """Run one phase on every rank; afterwards all ranks agree whether any failed (each failed
        rank's :class:`PhaseError` in ``errors``, by rank)."""
        if self.local_rank == 0:
            log(PHASE_MARKER, {"phase": name, "node_rank": self.node_rank, "rank": self.rank})
        enter_phase(name)
        error: str | None = None
        try:
            document[name] = phase()
            finished_part()
        except StoppedByPeer:
            finished_part(failed=True)  # the rank that failed says why
        except Exception as exc:
            finished_part(failed=True)
            error = error_text(exc, first_line=True)
            traceback.print_exc(file=sys.stderr)
        mine = None if error is None else self.own_error(error)
        try:
            # Agreement keeps ranks in lock-step: a rank that failed alone is known to all.
            reported: list[PhaseError | None] = self.gather(mine)
        except Exception as exc:
            self.usable = False
            if error is None:
                cause = error_text(exc, first_line=True)
                error = f"the process group stopped answering after this phase: {cause}"
            errors[name] = [self.own_error(error)]
            return
        failed = [record for record in reported if record is not None]
        if failed:
            errors[name] = failed
            document.pop(name, None)

    def run_phases(
        self, table: Mapping[str, Phase], names: Sequence[str], document: JsonDict, errors: PhaseErrors
    ) -> None:
        """Run the phases ``names`` from ``table`` in that order, each on every rank, while the
        process group answers; what each made goes in ``document``, why one failed in ``errors``."""
        for name in names:
            if name not in table:
                errors[name] = [phase_error(f"unknown phase {name!r}")]
                continue
            if not self.usable:
                errors.setdefault(
                    name, [phase_error("not run: the process group stopped answering in an earlier phase")]
                )
                continue
            self.run_phase(name, functools.partial(table[name], self), document, errors)

    def document(self, started: float) -> JsonDict:
        """Rank 0's document, before the phases' parts and errors are added."""
        return {
            "job_version": JOB_VERSION,
            "world_size": self.world,
            "nodes": list(self.args["nodes"]),
            "backend": self.backend,
            "device": "cuda" if self.cuda else "cpu",
            "torch": str(getattr(self.torch, "__version__", "")),
            "ranks": self.ranks,
            "phase_errors": {},
            "duration_s": time.perf_counter() - started,
        }
