"""Run profiles (``--quick``, ``--deep``) and how long a run is expected to take.

A profile is a set of changes to the checks' settings and, for ``--quick``, the checks it runs;
each check declares both (``Check.settings.profile``, ``Check.profiles``). The expected
duration is a rough model of where a run's time goes: connecting and the facts probe here, and
what each selected check declares it adds (``Check.duration``: the ports probe, the job's start,
its all-reduce sweep, pair rounds and DDP steps...). It is printed before the run starts and
used for the progress bar's ETA: an estimate, not a deadline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from preflight.config import Config
from preflight.registry import all_checks
from preflight.settings import Cost, Profile

__all__ = ["FACTS_S", "Profile", "apply_profile", "checks_of", "expected_duration_s"]

# Seconds, measured on the lab cluster (3 nodes, 2 shared cores): connecting and the facts probe
# (torch imported once, by each node's host), and what each doubling of the hosts adds to it.
FACTS_S = 2.0
FACTS_PER_DOUBLING_S = 0.2


def apply_profile(config: Config, profile: Profile) -> Config:
    """``config`` with the profile's changes to every check's settings: shorter and smaller for
    quick, longer and larger for deep."""
    for check in all_checks():
        if check.settings is not None:
            config = check.settings.profiled(config, profile)
    return config


def checks_of(profile: Profile) -> list[str]:
    """The checks ``profile`` runs (unless ``--only`` says otherwise), in registry order."""
    return [c.name for c in all_checks() if profile in c.profiles]


def expected_duration_s(config: Config, n_hosts: int, checks: Sequence[str]) -> float:
    """About how long a healthy run of ``checks`` on ``n_hosts`` takes (re-tests not counted)."""
    seconds = FACTS_S + FACTS_PER_DOUBLING_S * math.log2(max(1, n_hosts))
    counted: set[Cost] = set()
    for check in all_checks():
        if check.name not in checks:
            continue
        for cost in check.duration:
            if cost not in counted:  # a cost shared by several checks counts once
                counted.add(cost)
                seconds += cost.seconds(config, n_hosts)
    return seconds
