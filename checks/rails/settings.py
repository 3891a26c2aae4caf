"""``[rails]``: its section (:class:`RailsSection`, kept with the job that reads it). What the rail
tests add to a run's expected duration is counted from the phase it declares
(``checks.rails.phase``).
"""

from __future__ import annotations

from checks.job.settings import RailsSection
from preflight.settings import Settings

__all__ = ["SETTINGS", "RailsSection"]

SETTINGS = Settings(RailsSection)
