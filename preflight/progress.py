"""Progress events from a run, for the live terminal view (or nobody)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from preflight.model import CheckResult


class Progress(Protocol):
    def hosts_started(self, names: Sequence[str]) -> None: ...
    def host(self, name: str, phase: str, *, error: str | None = None) -> None: ...
    def check_started(self, name: str) -> None: ...
    def check_done(self, name: str, results: Sequence[CheckResult]) -> None: ...
    def close(self) -> None: ...


class NoProgress:
    def hosts_started(self, names: Sequence[str]) -> None:
        pass

    def host(self, name: str, phase: str, *, error: str | None = None) -> None:
        pass

    def check_started(self, name: str) -> None:
        pass

    def check_done(self, name: str, results: Sequence[CheckResult]) -> None:
        pass

    def close(self) -> None:
        pass
