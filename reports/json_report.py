"""The canonical JSON form of a run (schema_version 1); every other format renders the same data."""

from __future__ import annotations

import json
from pathlib import Path

from preflight.errors import InputError
from preflight.model import RunReport


def render(report: RunReport) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"


def load(path: Path) -> RunReport:
    """Read a saved run; a file that is not one is an input error naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such report file", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read report: {exc}", path=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
    try:
        return RunReport.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"not a preflight run report: {exc!s}", path=str(path)) from None
