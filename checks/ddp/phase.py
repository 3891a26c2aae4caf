"""The DDP phase of the job, declared beside the check that judges it: a seeded tiny model trains
for ``[ddp] steps`` on every rank (``checks.job.node.ddp``). Its findings about a straggler refer
to the node's root cause where another check found one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checks.ddp.details import NAME
from checks.ddp.settings import SETTINGS
from checks.job.declaration import JobPhase, Timed
from checks.job.settings import DdpSection
from preflight.config import Config

# Seconds, measured on the lab cluster (3 nodes, 2 shared cores): what is left of the import of
# DDP's modules once the other checks are done, the phase's own start, and one step.
DDP_IMPORT_S = 0.4
DDP_FIXED_S = 0.1
DDP_STEP_S = 0.005
# Seconds the phase may take on top of its steps: the import, the model's set-up and the checks of
# its parameters and gradients.
SETUP_S = 20.0


def _sent(config: Config, names: Sequence[str], gpu: bool | None) -> dict[str, Any]:
    return {"steps": config.section(DdpSection).steps}


def _time(sent: Mapping[str, Any]) -> tuple[Timed, ...]:
    return (
        Timed("the import and the set-up", 1, SETUP_S, DDP_IMPORT_S + DDP_FIXED_S),
        Timed("the steps", int(sent["steps"]), DDP_STEP_S, DDP_STEP_S),
    )


PHASE = JobPhase(
    name=NAME,
    label="DDP",
    node="checks.job.node.ddp",
    settings=SETTINGS,
    sent=_sent,
    time=_time,
    refers_to=("compute", "hardware", "intranode", "rails"),
    speed_keys=("compute_step_s", "ratio"),
)
