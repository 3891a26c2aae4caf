"""Writing report files atomically: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from preflight.errors import InputError


def unwritable(path: Path) -> str | None:
    """Why a report cannot be written at ``path`` (None when it can): found before a run starts,
    by making and removing a file beside it, as :func:`write_atomic` will."""
    if path.is_dir():
        return "is a directory"
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        return f"cannot write there: {exc.strerror}"
    os.close(fd)
    Path(tmp).unlink(missing_ok=True)
    return None


def write_atomic(path: Path, text: str) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(f"cannot write report: {exc.strerror}", path=str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
