"""``[ddp]``: its section (:class:`DdpSection`, kept with the job that reads it), what ``--deep``
changes in it, and what DDP's steps add to a run's expected duration.
"""

from __future__ import annotations

import dataclasses

from checks.job.settings import JOB_START, DdpSection
from preflight.config import Config
from preflight.settings import Cost, Profile, Settings

__all__ = ["DURATION", "SETTINGS", "DdpSection"]

# Seconds, measured on the lab cluster (3 nodes, 2 shared cores): what is left of the import of
# DDP's modules once the other checks are done, the phase's own start, and one step.
DDP_IMPORT_S = 0.4
DDP_FIXED_S = 0.1
DDP_STEP_S = 0.005


def _profiled(cfg: DdpSection, profile: Profile) -> DdpSection:
    return dataclasses.replace(cfg, steps=max(cfg.steps, 200)) if profile == "deep" else cfg


def _steps_s(config: Config, n_hosts: int) -> float:
    return DDP_IMPORT_S + DDP_FIXED_S + config.section(DdpSection).steps * DDP_STEP_S


SETTINGS = Settings(DdpSection, profile=_profiled)
DURATION = (JOB_START, Cost("DDP's steps", _steps_s))
