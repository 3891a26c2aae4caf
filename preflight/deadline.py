"""A point in time every remote operation must finish by."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic() value

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def cap(self, seconds: float) -> float:
        """``seconds``, or less when the deadline comes first."""
        return min(seconds, self.remaining())

    def sooner(self, seconds: float) -> Deadline:
        return Deadline(min(self.at, time.monotonic() + seconds))
