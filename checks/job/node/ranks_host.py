"""The node's host for the job (the facts probe that stayed): it starts the node's ranks as torchrun
would, forked with torch already imported, and watches them; when one fails it ends the others,
and when the controller goes away (stdin ends) or ends it, it ends them all.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

from checks.job.node import counters, rank
from checks.job.node.markers import END_MARKER, log
from preflight.node.shared import TMPDIR_ERROR

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

# When the host could not make its private TMPDIR (it says why in TMPDIR_ERROR), the job does not
# start, and the node exits with TMPDIR_FAILED.
TMPDIR_FAILED = 70
# A rank's process name (ps, top, /proc/PID/comm), followed by its local rank.
RANK_COMM = "preflight-rank"
PR_SET_NAME = 15
# How long a rank has to end after TERM before it is killed.
RANK_TERM_GRACE_S = 3.0


def signal_name(number: int) -> str | None:
    """The signal's name (``SIGKILL``), None for a number the system does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def rank_end(global_rank: int, local_rank: int, pid: int, code: int) -> dict[str, Any]:
    """The end record of a rank that failed: its exit status, or the signal that ended it (``code``
    is negative then, as :func:`_exit_code` gives it)."""
    end: dict[str, Any] = {"rank": global_rank, "local_rank": local_rank, "pid": pid}
    if code < 0:
        end["signal"] = -code
        name = signal_name(-code)
        if name is not None:
            end["signal_name"] = name
    else:
        end["status"] = code
    return end


def rank_environment(host: Mapping[str, Any], local_rank: int) -> dict[str, str]:
    """The variables one rank is started with: the job's, and torchrun's names for its place."""
    nproc = int(host["nproc"])
    env = {str(k): str(v) for k, v in (host.get("env") or {}).items()}
    env.update(
        RANK=str(int(host["rank_offset"]) + local_rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(host["world_size"]),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK=str(host["node_rank"]),
        GROUP_WORLD_SIZE=str(host["nnodes"]),
        ROLE_RANK=str(int(host["rank_offset"]) + local_rank),
        ROLE_WORLD_SIZE=str(host["world_size"]),
        ROLE_NAME="default",
        MASTER_ADDR=str(host["master_addr"]),
        MASTER_PORT=str(host["master_port"]),
    )
    return env


def name_process(name: str) -> None:
    """Set this process's name as ps and top show it (Linux, 15 characters); best effort."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def _run_rank(env: Mapping[str, str], job: Mapping[str, Any]) -> int:
    """In a forked child: become one rank and run the job."""
    status = 1
    try:
        name_process(f"{RANK_COMM}{env.get('LOCAL_RANK', '')}")
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.environ.update(env)
        threads = env.get("OMP_NUM_THREADS", "")
        torch = sys.modules.get("torch")
        if torch is not None and threads.isdigit() and int(threads) > 0:
            torch.set_num_threads(int(threads))  # the library read the variable before the fork
        status = rank.run(job)
    except BaseException:
        traceback.print_exc(file=sys.stderr)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def _spawn_rank(env: Mapping[str, str], job: Mapping[str, Any], source: bytes) -> int:
    """Start one rank in a fresh interpreter (when this process cannot fork one: CUDA started here)."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys;exec(compile(sys.stdin.buffer.read(),'preflight-job','exec'))",
         json.dumps(job)],
        stdin=subprocess.PIPE, env={**os.environ, **env},
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(source)
    process.stdin.close()
    return process.pid


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _exit_fds(pids: Iterable[int]) -> dict[int, int]:
    """A descriptor per process that turns readable when it ends, for those the system gives one."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return {}
    fds: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            fds[pid] = opener(pid)
    return fds


def _sample() -> dict[str, Any] | None:
    """The node's counters now; None where they cannot be read (the job runs on without them)."""
    try:
        return counters.sample()
    except Exception:
        return None


def _start_ranks(
    settings: Mapping[str, Any], job: Mapping[str, Any], source: bytes | None, fork: bool
) -> dict[int, int]:
    """Start this node's ranks, forked from here or (``fork`` false: CUDA started here) each in a
    fresh interpreter running ``source``; their pids, to their local ranks."""
    ranks: dict[int, int] = {}
    for local_rank in range(int(settings["nproc"])):
        env = rank_environment(settings, local_rank)
        pid = os.fork() if fork else _spawn_rank(env, job, source or b"")
        if fork and pid == 0:
            _run_rank(env, job)
        ranks[pid] = local_rank
    return ranks


def serve(request: Mapping[str, Any], source: bytes | None, cleanup: Callable[[], None] | None) -> int:
    """Start this node's ranks and watch them to their end; the node's exit status.

    ``source`` is the script this host was sent (the job's bundle): a rank started in a fresh
    interpreter runs it. ``cleanup`` removes the host's TMPDIR before this process ends without
    the interpreter's teardown."""
    settings = request["host"]
    job = request["job"]
    no_tmpdir = os.environ.get(TMPDIR_ERROR)
    if no_tmpdir:
        sys.stderr.write(f"preflight: {no_tmpdir}\n")
        return TMPDIR_FAILED
    ended: list[int] = []

    def end(number: int, frame: Any) -> None:
        ended.append(number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, end)
    with contextlib.suppress(Exception):  # a failed import: every rank reports it
        import torch  # noqa: F401  (already imported when the host stayed warm)
    torch_module = sys.modules.get("torch")
    # What the host imported stays shared with its forks: the collector must not touch (and so
    # copy) those objects in every rank.
    gc.freeze()
    fork = source is None or not (torch_module is not None and torch_module.cuda.is_initialized())
    # The fabric's counters before the ranks start and after they end: what grows in between grew
    # while the job drove traffic.
    before = _sample()
    ranks = _start_ranks(settings, job, source, fork)
    failed: int | None = None
    term_sent: float | None = None
    killed = False
    stdin_open = True
    # Each rank's end wakes the loop at once where the system can say so (a pidfd, Linux 5.3
    # and Python 3.9 on); elsewhere the loop looks every 50 ms.
    exits = _exit_fds(ranks)
    while ranks:
        watched = ([0] if stdin_open else []) + [fd for pid, fd in exits.items() if pid in ranks]
        readable, _, _ = select.select(watched, [], [], 0.05 if len(exits) < len(ranks) else 0.2)
        if 0 in readable and not os.read(0, 4096):
            stdin_open = False
            ended.append(0)  # the controller went away: end the job here too
        while ranks:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                ranks.clear()
                break
            if pid == 0:
                break
            if pid not in ranks:
                continue
            local_rank = ranks.pop(pid)
            code = _exit_code(status)
            if code != 0 and failed is None and term_sent is None:
                failed = code
                log(END_MARKER, rank_end(int(settings["rank_offset"]) + local_rank, local_rank, pid, code))
        if (failed is not None or ended) and term_sent is None and ranks:
            term_sent = time.monotonic()
            for pid in ranks:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
        if term_sent is not None and not killed and time.monotonic() - term_sent > RANK_TERM_GRACE_S:
            killed = True
            for pid in ranks:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    for fd in exits.values():
        os.close(fd)
    after = _sample()
    if before is not None and after is not None:
        counters.report(before, after)
    if callable(cleanup):
        cleanup()  # this process ends with os._exit: its host's TMPDIR goes now
    if ended and failed is None:
        return 143
    return 0 if failed is None else 1
