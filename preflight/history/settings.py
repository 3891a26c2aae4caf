"""The ``[history]`` section: where the store is, whether a run writes to it, how long it keeps runs."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from preflight.errors import ConfigError

TABLE = "history"


@dataclass(frozen=True)
class HistorySection:
    """``[history]``: ``store`` is a path or a ``postgresql://`` URL (empty: the default path);
    ``enabled`` false skips the store; ``keep`` ("90d", "12w") forgets older runs after each run;
    ``window_days``: how far back a finding's repeats and a part's own past are looked for;
    ``slower_margin``: how far below its own past median a GPU's or node's rate is named (0.1: 10 %)."""

    store: str = ""
    enabled: bool = True
    keep: str = ""
    window_days: int = 30
    slower_margin: float = 0.1


def default_path() -> Path:
    """``$XDG_STATE_HOME/preflight/history.sqlite``, ``~/.local/state/preflight/`` when unset."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(state) / "preflight" / "history.sqlite"


def store_target(section: HistorySection) -> str:
    """The store a run writes to: the section's path or URL, else the default path."""
    return section.store or str(default_path())


_KEEP_RE = re.compile(r"(\d+)\s*([dwh])")
_UNIT_HOURS = {"h": 1, "d": 24, "w": 24 * 7}


def parse_keep(text: str) -> timedelta:
    """``90d`` -> 90 days; ``12w``, ``48h`` likewise; a :class:`ConfigError` for anything else."""
    found = _KEEP_RE.fullmatch(text.strip())
    if found is None or int(found.group(1)) == 0:
        raise ConfigError(f"history keep {text!r}: give a number of days, weeks or hours (90d, 12w, 48h)")
    return timedelta(hours=int(found.group(1)) * _UNIT_HOURS[found.group(2)])


def parse_date(text: str) -> datetime:
    """``2026-01-31`` or an ISO time (UTC when no zone is given), or a span back from now (``30d``)."""
    if _KEEP_RE.fullmatch(text.strip()):
        return datetime.now(UTC) - parse_keep(text)
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{text!r} is not a date (2026-01-31) or a span (30d)") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def iso(when: datetime) -> str:
    """The form the store keeps times in: ``2026-01-31T12:00:00Z``, which sorts as text."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
