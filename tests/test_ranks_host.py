"""Each node's host for the job, run for real on this machine: the facts probe that stays after its
facts (torch imported once, in a TMPDIR of its own), and the job script it runs, which forks the
node's ranks and ends them all when one dies or when the controller goes away.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from checks.job import launch
from checks.job.failures import explain_failures
from checks.job.node.markers import END_MARKER, marked_lines
from checks.job.node.ranks_host import RANK_COMM
from checks.job.outcome import JobOutcome, NodeOutcome
from preflight.probes import STREAM_BOOTSTRAP, node_script
from tests.test_distributed_job import PYTHON, free_port, host_request, job_args


def start_host(options: dict[str, Any], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """The facts script as the launcher starts it: its source on stdin, stdin left open."""
    source = node_script(launch.HOST_SCRIPT)
    proc = subprocess.Popen(
        [PYTHON, "-c", STREAM_BOOTSTRAP, str(len(source)), "preflight-facts", json.dumps(options)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=None if env is None else {**os.environ, **env},
    )
    assert proc.stdin is not None
    proc.stdin.write(source)
    proc.stdin.flush()
    return proc


def ranks_of(host_pid: int) -> list[int]:
    """Pids of the ranks the host forked (they name themselves in /proc/PID/comm)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == host_pid and comm.startswith(RANK_COMM):
            found.append(int(entry.name))
    return found


def wait_for(condition: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.05)


def long_job() -> dict[str, Any]:
    """A job that trains until it is ended."""
    args = job_args(1)
    args.update(phases=["ddp"], ddp={"steps": 10**7})
    return args


def tmpdir_of(stderr: bytes) -> Path:
    line = next(ln for ln in stderr.decode().splitlines() if ln.startswith("preflight-tmpdir="))
    return Path(line.partition("=")[2])


def test_the_staying_probe_prints_its_facts_then_runs_what_it_is_sent_and_leaves_nothing() -> None:
    proc = start_host({"stay": {"imports": ["torch.distributed"]}})
    assert proc.stdout is not None and proc.stdin is not None
    facts = json.loads(proc.stdout.readline())["facts"]
    assert facts["torch"]["version"].startswith("2.")  # torch's facts, from this process's import
    assert facts["hostname"] and facts["python"]["executable"]
    script = (
        b"import gc, os, sys\n"
        b"print(os.environ['TMPDIR'], 'torch.distributed' in sys.modules, gc.isenabled(),"
        b" gc.get_freeze_count(), flush=True)\n"
    )
    header = {"length": len(script), "name": "probe-script", "args": []}
    proc.stdin.write(json.dumps(header).encode() + b"\n" + script)
    proc.stdin.flush()
    tmpdir, warm, collecting, frozen = proc.stdout.readline().decode().split()
    assert warm == "True"
    # The collector runs for what the scripts make, and never walks what torch's import made
    # (hundreds of thousands of objects) in the host or in the ranks it forks.
    assert collecting == "True" and int(frozen) > 100_000
    assert Path(tmpdir).is_dir() and Path(tmpdir).name.startswith("preflight.")
    proc.stdin.close()  # the controller is done with it
    assert proc.wait(timeout=30) == 0
    assert not Path(tmpdir).exists()


# A module whose import says it started, then waits for a file: the stand-in for DDP's modules,
# whose import takes most of a second.
WAITING_IMPORT = """
import os, time
open(os.environ["PREFLIGHT_TEST_GO"] + ".started", "w").close()
while not os.path.exists(os.environ["PREFLIGHT_TEST_GO"]):
    time.sleep(0.01)
"""


def test_the_facts_come_while_the_job_s_modules_still_import_and_the_host_serves_one_thread(
    tmp_path: Path,
) -> None:
    (tmp_path / "waiting_import.py").write_text(WAITING_IMPORT)
    go = tmp_path / "go"
    names = ["waiting_import", *launch.DDP_IMPORTS]
    proc = start_host(
        {"stay": {"imports": names}}, env={"PYTHONPATH": str(tmp_path), "PREFLIGHT_TEST_GO": str(go)}
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        # The job's imports start as soon as torch is in, beside the rest of the facts, and the
        # document is out while they still run (the first waits for a file made only after).
        readable, _, _ = select.select([proc.stdout], [], [], 120)
        assert readable, "no facts while the job's modules imported"
        assert json.loads(proc.stdout.readline())["facts"]["torch"]["version"].startswith("2.")
        assert Path(f"{go}.started").exists(), "the job's imports waited for the facts"
        go.touch()
        script = (
            b"import sys, threading\n"
            b"print(threading.active_count(), *(m in sys.modules for m in sys.argv[1:]), flush=True)\n"
        )
        header = {"length": len(script), "name": "probe-script", "args": names}
        proc.stdin.write(json.dumps(header).encode() + b"\n" + script)
        proc.stdin.flush()
        threads, *imported = proc.stdout.readline().decode().split()
        # Every module imported before the script runs, and the host one thread again (its ranks
        # are forked from it).
        assert threads == "1" and imported == ["True"] * len(names)
    finally:
        go.touch()
        proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def test_a_rank_that_dies_ends_its_node_and_the_host_names_it() -> None:
    proc = start_host({"serve": True})
    assert proc.stdin is not None
    args = long_job()
    proc.stdin.write(host_request(1, 3, 0, free_port(), args))
    proc.stdin.flush()
    wait_for(lambda: len(ranks_of(proc.pid)) == 3)
    victim = sorted(ranks_of(proc.pid))[1]
    time.sleep(1)  # into the job
    os.kill(victim, signal.SIGKILL)
    assert proc.wait(timeout=60) == 1  # its stdin still open: the controller is still there
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    assert ranks_of(proc.pid) == []
    text = stderr.decode()
    # One end record, for the rank that died (the host ended the others itself).
    (end,) = marked_lines(text, END_MARKER)
    assert end == {
        "rank": end["local_rank"], "local_rank": end["local_rank"], "pid": victim,
        "signal": 9, "signal_name": "SIGKILL",
    }  # fmt: skip
    node = NodeOutcome("node1", 0, proc.returncode, False, False, False, text)
    outcome = JobOutcome(
        phases=("allreduce",), backend="gloo", master="127.0.0.1", port=0, nodes=(node,),
        duration_s=1.0, document=None,
    )  # fmt: skip
    (failure,) = explain_failures(outcome)
    assert failure.culprit and failure.kind == "crashed"
    assert "was ended by SIGKILL" in failure.reason and "out-of-memory killer" in failure.reason
    assert not tmpdir_of(stderr).exists()


def test_the_end_of_stdin_ends_every_rank_and_the_host() -> None:
    proc = start_host({"serve": True})
    assert proc.stdin is not None
    args = long_job()
    proc.stdin.write(host_request(1, 2, 0, free_port(), args))
    proc.stdin.flush()
    wait_for(lambda: len(ranks_of(proc.pid)) == 2)
    ranks = ranks_of(proc.pid)
    proc.stdin.close()  # the controller went away
    assert proc.wait(timeout=30) == 143
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    for pid in ranks:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert not tmpdir_of(stderr).exists()
