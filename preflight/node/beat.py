"""The facts probe's heartbeat: a line on stderr every second while the facts are gathered, so
that the controller tells a node that is still working (importing torch from a slow filesystem)
from one that went silent (its link cut, its processes stopped).

The beat comes from a forked child that does nothing else: the probe itself stays one thread
(its forks must be able to use CUDA and NVML), and a beat never waits on the probe's own work.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

# What each heartbeat line says; the controller drops these lines from what it shows of stderr.
PROBE_BEAT = "preflight-probe-beat"
PROBE_BEAT_INTERVAL_S = 1.0


def start_beating(interval_s: float = PROBE_BEAT_INTERVAL_S) -> int | None:
    """Fork a child that writes a heartbeat line to stderr every ``interval_s`` until it is ended
    (:func:`stop_beating`) or this process is gone; its pid, or None where it cannot fork."""
    if not hasattr(os, "fork"):
        return None
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid:
        return pid
    try:
        line = (PROBE_BEAT + "\n").encode("ascii")
        while os.getppid() == parent:
            os.write(2, line)
            time.sleep(interval_s)
    except BaseException:
        pass
    finally:
        os._exit(0)


def stop_beating(pid: int | None) -> None:
    """End the heartbeat child ``pid`` and reap it."""
    if pid is None:
        return
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
