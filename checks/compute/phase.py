"""The compute phase of the job, declared beside the check that judges it: every rank burns matrix
multiplications for ``[compute] burn_s`` (``checks.job.node.compute``), and a rank slow in it is
re-tested in a shorter burn. A node slow at compute is the root cause of its slowness everywhere
else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checks.compute.details import NAME
from checks.compute.settings import SETTINGS
from checks.job.declaration import JobPhase, Timed
from checks.job.node.compute import RETEST_SHARE
from checks.job.settings import ComputeSection
from preflight.config import Config

# Seconds the phase may take on top of its burns: its set-up and the gather of every rank's rates.
SETUP_S = 10.0


def _sent(config: Config, names: Sequence[str], gpu: bool | None) -> dict[str, Any]:
    compute = config.section(ComputeSection)
    return {
        "burn_s": compute.burn_s,
        "matrix": compute.matrix,
        "slow_ratio": compute.slow_ratio,
        "cpu_slow_ratio": compute.cpu_slow_ratio,
        "min_flops_per_s": compute.min_tflops * 1e12,
    }


def _time(sent: Mapping[str, Any]) -> tuple[Timed, ...]:
    # The burn takes all its time; the re-test, a shorter burn, runs when a rank was slow in it.
    burn_s = float(sent["burn_s"])
    return (
        Timed("the set-up and the gather", 1, SETUP_S, 0.0),
        Timed("the burn", 1, burn_s, burn_s, again=RETEST_SHARE),
    )


PHASE = JobPhase(
    name=NAME,
    label="compute",
    node="checks.job.node.compute",
    settings=SETTINGS,
    sent=_sent,
    time=_time,
    root_causes={"slow_compute": "being slow at compute"},
)
