"""Reading a job check's findings back for its evidence: the details of its findings merged, and
values taken as they come, since a report read from disk (another version's, a hand-edited one)
may hold anything where the judge would have written a number or a list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from preflight.model import CheckResult
from preflight.units import significant
from preflight.view import plain


def merged_details(results: Sequence[CheckResult]) -> dict[str, Any]:
    """Every finding's details in one mapping, the first finding's value winning: the judge puts
    its tables in the first finding's details."""
    merged: dict[str, Any] = {}
    for r in results:
        for key, value in r.details.items():
            merged.setdefault(key, value)
    return merged


def number(value: Any) -> float | None:
    """``value`` as a float when it is a number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def scalar(value: Any) -> str:
    """A table cell's text for one JSON value: a dash for none, yes/no, numbers to a few digits."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return significant(value)
    return plain(value)
