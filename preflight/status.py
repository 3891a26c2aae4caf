"""The status vocabulary, in one place: what a finding can be, how bad each is, how they combine.

Severity runs worst first: a failure, an error (something could not be checked), a warning,
a skip (no assurance either way), a pass. Every order and every label shown anywhere derives
from these.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol, TypeVar, get_args

Status = Literal["pass", "warn", "fail", "error", "skip"]
STATUSES: tuple[Status, ...] = get_args(Status)
SEVERITY: tuple[Status, ...] = ("fail", "error", "warn", "skip", "pass")  # worst first
PROBLEMS: tuple[Status, ...] = ("fail", "error", "warn")
LABELS: dict[str, str] = {"pass": "pass", "warn": "warn", "fail": "FAIL", "error": "ERROR", "skip": "skip"}

_RANK: dict[str, int] = {status: rank for rank, status in enumerate(SEVERITY)}


class HasStatus(Protocol):
    @property
    def status(self) -> Status: ...


T = TypeVar("T", bound=HasStatus)


def severity(status: str) -> int:
    """0 for a failure up to 4 for a pass; anything else after them."""
    return _RANK.get(status, len(SEVERITY))


def by_severity(items: Iterable[T]) -> list[T]:
    """Failures first, then errors, warnings, skips, passes; stable within each."""
    return sorted(items, key=lambda item: severity(item.status))


def worst(statuses: Iterable[str], default: str = "pass") -> str:
    found = list(statuses)
    return min(found, key=severity) if found else default


def overall(statuses: Iterable[str]) -> str:
    """A group's status (a check, a node's row): its worst problem; else pass when anything
    passed (a skip beside a pass is no news); else skip."""
    found = list(statuses)
    problems = [s for s in found if s in PROBLEMS]
    if problems:
        return worst(problems)
    return "pass" if "pass" in found or not found else worst(found)
