"""Reading a job check's findings back for its evidence: the details of its findings merged (the
judge puts its tables in the first finding's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from preflight.model import CheckResult


def merged_details(results: Sequence[CheckResult]) -> dict[str, Any]:
    """Every finding's details in one mapping, the first finding's value winning: the judge puts
    its tables in the first finding's details."""
    merged: dict[str, Any] = {}
    for r in results:
        for key, value in r.details.items():
            merged.setdefault(key, value)
    return merged
