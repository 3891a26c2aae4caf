"""How far below the median of its own few earlier runs a new value must fall before it is named.

The spread of a handful of earlier values says little about the spread itself: four runs that
happened to agree within 1 % give a tiny median absolute deviation, and a fifth run 10 % lower
would lie "many sigmas" away although the rate moves that much run to run. The bound is therefore
a prediction bound for one new value from ``n`` earlier ones, as a statistician writes it:
Student's t with ``n - 1`` degrees of freedom at the coverage of :data:`SIGMAS` normal standard
deviations, times ``sqrt(1 + 1/n)``. Four earlier runs ask for about 36 sigmas (the spread of
so few is barely known), ten for 7.3, a hundred for 4.2; earlier values that are all alike have no
spread, and then the margin alone decides.
"""

from __future__ import annotations

import math
from functools import cache
from statistics import NormalDist

# The one-sided coverage of four normal standard deviations (0.99997): a fleet of 8,000 GPUs
# judged every run names a healthy one where the spread decides about once in four runs at this
# coverage, eleven times a run at three sigmas.
SIGMAS = 4.0
# Steps of Simpson's rule over the t density (smooth and unimodal: a few hundred are exact to
# the digits that matter here).
STEPS = 400


def _t_cdf(x: float, dof: int) -> float:
    """P(T <= x) for x >= 0, T Student's t with ``dof`` degrees of freedom, by Simpson's rule."""
    scale = math.exp(math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2)) / math.sqrt(dof * math.pi)

    def density(t: float) -> float:
        return float(scale * (1 + t * t / dof) ** (-(dof + 1) / 2))

    h = x / STEPS
    total = density(0.0) + density(x)
    total += sum((4 if i % 2 else 2) * density(i * h) for i in range(1, STEPS))
    return 0.5 + total * h / 3


@cache
def t_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t with ``dof`` degrees of freedom."""
    low, high = 0.0, 1.0
    while _t_cdf(high, dof) < p:
        low, high = high, high * 2
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_cdf(middle, dof) < p else (low, middle)
    return (low + high) / 2


# Beyond this many degrees of freedom the t quantile is within 1 % of its normal limit's
# Cornish-Fisher expansion, and computing it again for every history length is waste.
EXPANSION_DOF = 30


def bound_sigmas(runs: int) -> float:
    """How many standard deviations of ``runs`` earlier values (at least 2) below their median a
    new value must lie to be outside their own run-to-run spread."""
    dof = runs - 1
    coverage = NormalDist().cdf(SIGMAS)
    if dof > EXPANSION_DOF:
        z = SIGMAS
        t = z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)
    else:
        t = t_quantile(coverage, dof)
    return t * math.sqrt(1 + 1 / runs)
