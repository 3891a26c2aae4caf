"""``[compute]``: its section (:class:`ComputeSection`, kept with the job that reads it), what
``--deep`` changes in it, and what the burn adds to a run's expected duration.
"""

from __future__ import annotations

import dataclasses

from checks.job.settings import JOB_START, ComputeSection
from preflight.config import Config
from preflight.settings import Cost, Profile, Settings

__all__ = ["DURATION", "SETTINGS", "ComputeSection"]

# Seconds --deep burns at least: long enough for a GPU to reach its steady temperature and clocks
# (thermal slowdown shows after seconds, a power cap or a broken GPU at once).
DEEP_BURN_S = 10.0


def _profiled(cfg: ComputeSection, profile: Profile) -> ComputeSection:
    return dataclasses.replace(cfg, burn_s=max(cfg.burn_s, DEEP_BURN_S)) if profile == "deep" else cfg


def _burn_s(config: Config, n_hosts: int) -> float:
    return config.section(ComputeSection).burn_s


SETTINGS = Settings(ComputeSection, profile=_profiled)
DURATION = (JOB_START, Cost("the compute burn", _burn_s))
