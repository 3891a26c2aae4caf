"""``[rails]``: its section (:class:`RailsSection`, kept with the job that reads it), and what the
rail tests add to a run's expected duration.
"""

from __future__ import annotations

from checks.job.settings import JOB_START, RailsSection
from preflight.config import Config
from preflight.settings import Cost, Settings

__all__ = ["DURATION", "SETTINGS", "RailsSection"]


def _tests_s(config: Config, n_hosts: int) -> float:
    # A ring takes three rounds at most; a GPU node's rails run at once, a CPU node's listed
    # interfaces in turn; a healthy test takes about a quarter of its budget (as a pair test does).
    cfg = config.section(RailsSection)
    if cfg.test == "never" or n_hosts < 2:
        return 0.0
    return min(3, n_hosts) * max(1, len(cfg.interfaces)) * cfg.test_budget_s / 4


SETTINGS = Settings(RailsSection)
DURATION = (JOB_START, Cost("the rail tests", _tests_s))
