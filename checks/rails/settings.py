"""``[rails]``: its section (:class:`RailsSection`, kept with the job that reads it), and what the
rail tests add to a run's expected duration.
"""

from __future__ import annotations

from checks.job.pair_plan import ring_pairs
from checks.job.settings import JOB_START, RailsSection, rail_test_rounds
from preflight.config import Config
from preflight.settings import Cost, Settings

__all__ = ["DURATION", "SETTINGS", "RailsSection"]


def _tests_s(config: Config, n_hosts: int) -> float:
    # The bandwidth pass's rounds (a CPU node's listed interfaces in turn; a GPU node's rails at
    # once), a healthy test about a quarter of its budget (as a pair test); the latency pass's tests
    # take milliseconds (1.5 s for the whole phase on three healthy lab nodes, as counted here).
    cfg = config.section(RailsSection)
    if cfg.test == "never" or n_hosts < 2:
        return 0.0
    return rail_test_rounds(ring_pairs(n_hosts), len(cfg.interfaces)) * cfg.test_budget_s / 4


SETTINGS = Settings(RailsSection)
DURATION = (JOB_START, Cost("the rail tests", _tests_s))
