"""``[ddp]``: its section (:class:`DdpSection`, kept with the job that reads it) and what ``--deep``
changes in it. What DDP's steps add to a run's expected duration is counted from the phase it
declares (``checks.ddp.phase``).
"""

from __future__ import annotations

import dataclasses

from checks.job.settings import DdpSection
from preflight.settings import Profile, Settings

__all__ = ["SETTINGS", "DdpSection"]


def _profiled(cfg: DdpSection, profile: Profile) -> DdpSection:
    return dataclasses.replace(cfg, steps=max(cfg.steps, 200)) if profile == "deep" else cfg


SETTINGS = Settings(DdpSection, profile=_profiled)
