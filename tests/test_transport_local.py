"""The transport contract, shown on the local transport: deadlines hold and nothing outlives them."""

from __future__ import annotations

import os
import resource
import shlex
import subprocess
import sys
import time

import psutil

from preflight.deadline import Deadline
from preflight.gather import close_all, facts_probe_args, gather
from preflight.inventory import local_host
from preflight.progress import NoProgress
from preflight.transport import (
    KEEP_HEAD_BYTES,
    KEEP_TAIL_BYTES,
    KeptOutput,
    split_pgid,
    wait_for_any,
    wrap_command,
)
from preflight.transport.local import LocalTransport


def test_output_and_exit_status_come_back() -> None:
    with LocalTransport(local_host()) as transport:
        result = transport.run(
            [sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"],
            stdin=b"hello",
            timeout_s=20,
        )
    assert (result.exit_status, result.stdout.strip(), result.timed_out) == (3, b"HELLO", False)


def test_a_command_past_its_deadline_is_ended_with_its_children() -> None:
    script = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    with LocalTransport(local_host()) as transport:
        started = time.monotonic()
        result = transport.run([sys.executable, "-c", script, "pf-deadline-marker"], timeout_s=1)
    assert result.timed_out
    assert time.monotonic() - started < 10
    time.sleep(0.2)
    leftovers = [
        p for p in psutil.process_iter(["cmdline"]) if "pf-deadline-marker" in (p.info["cmdline"] or [])
    ]
    assert leftovers == []


def test_a_missing_program_is_exit_127() -> None:
    with LocalTransport(local_host()) as transport:
        assert transport.run(["/nonexistent/python3", "-"], timeout_s=5).exit_status == 127


def test_the_remote_command_line_quotes_every_word_and_reports_its_process_group() -> None:
    hostile = "x'; touch /tmp/pwned; echo '"
    line = wrap_command(["python3", "-", hostile, "$(reboot)"], timeout_s=7.2)
    run = subprocess.run(
        ["sh", "-c", line.replace("python3 -", "printf %s\\\\n", 1)], capture_output=True, timeout=20
    )
    assert run.stdout.decode().splitlines() == [hostile, "$(reboot)"]
    pgid, rest = split_pgid(run.stderr)
    assert pgid is not None and pgid > 1
    assert rest == b""
    assert "timeout -k 3 8 " in line  # the host enforces the deadline, rounded up
    assert shlex.split(line)[0] == "sh"


def test_a_flood_of_output_is_drained_and_kept_to_its_head_and_tail() -> None:
    flood = 64 << 20
    script = f"head -c {flood} /dev/zero | tr '\\0' x; echo; echo the-last-line"
    with LocalTransport(local_host()) as transport:
        result = transport.run(["sh", "-c", script], timeout_s=60)
    assert result.exit_status == 0
    assert result.stdout.startswith(b"x" * 1000)
    assert result.stdout.endswith(b"\nthe-last-line\n")
    assert len(result.stdout) < KEEP_HEAD_BYTES + KEEP_TAIL_BYTES + 100
    assert result.stdout_cut == flood + len(b"\nthe-last-line\n") - KEEP_HEAD_BYTES - KEEP_TAIL_BYTES
    assert b"bytes of output cut here" in result.stdout


def test_kept_output_is_whole_below_its_limits() -> None:
    kept = KeptOutput(head_limit=4, tail_limit=3)
    for chunk in (b"ab", b"cd", b"e"):
        kept.add(chunk)
    assert (kept.data(), kept.cut) == (b"abcde", 0)
    kept.add(b"fghij")
    assert kept.cut == 3 and kept.data().startswith(b"abcd") and kept.data().endswith(b"hij")


def test_waiting_on_many_processes_works_past_the_select_limit() -> None:
    """A controller of a few hundred hosts holds more than 1,024 file descriptors, where select()
    refuses to wait: the controller's wait wakes when one of its processes speaks, whatever the
    descriptors' numbers."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1400
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard) if hard >= 0 else wanted, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with LocalTransport(local_host()) as transport:
            quiet = transport.start(["sleep", "30"], timeout_s=60)
            talker = transport.start(["sh", "-c", "sleep 0.3; echo ready; sleep 30"], timeout_s=60)
            assert min(quiet.waitables() + talker.waitables()) > 1024
            deadline = Deadline.after(20)
            line = None
            while line is None and not deadline.expired:
                wait_for_any([quiet, talker], 5.0)
                talker.running()  # takes in what has arrived
                line = talker.readline(Deadline.after(0))
            assert line == b"ready"
            quiet.kill()
            talker.kill()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_interpreter_that_ends_before_reading_the_probe_is_named_by_its_status() -> None:
    """The facts probe's source (over 64 KiB) is written to a process that has already ended
    (a wrapper that exits, an interpreter that cannot start): its exit status says why, and the
    write that found no reader is not an internal error."""
    sessions = gather(
        [local_host()],
        LocalTransport,
        python="/bin/false",
        probe_timeout_s=20,
        fanout=1,
        deadline=Deadline.after(60),
        progress=NoProgress(),
        args=facts_probe_args({}, ("torch.distributed",)),
        stay=True,
    )
    try:
        error = sessions[0].report.error
        assert error is not None and error.kind == "probe_failed"
        assert "exited with status 1" in error.message and "internal error" not in error.message
    finally:
        close_all(sessions)
