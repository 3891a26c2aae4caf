"""``[compute]``: its section (:class:`ComputeSection`, kept with the job that reads it) and what
``--deep`` changes in it. What the burn adds to a run's expected duration is counted from the
phase it declares (``checks.compute.phase``).
"""

from __future__ import annotations

import dataclasses

from checks.job.settings import ComputeSection
from preflight.settings import Profile, Settings

__all__ = ["SETTINGS", "ComputeSection"]

# Seconds --deep burns at least: long enough for a GPU to reach its steady temperature and clocks
# (thermal slowdown shows after seconds, a power cap or a broken GPU at once).
DEEP_BURN_S = 10.0


def _profiled(cfg: ComputeSection, profile: Profile) -> ComputeSection:
    return dataclasses.replace(cfg, burn_s=max(cfg.burn_s, DEEP_BURN_S)) if profile == "deep" else cfg


SETTINGS = Settings(ComputeSection, profile=_profiled)
