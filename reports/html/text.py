"""Text in the HTML report: node-provided strings made printable, JSON safe inside the page,
times as people read them, and stable anchors for nodes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from markupsafe import Markup

from preflight.escape import printable
from preflight.model import HostReport

MAX_RAW_CHARS = 16_000  # raw JSON shown per finding; the JSON report has all of it


def text(value: Any) -> str:
    """Node-provided text made printable (no escapes, no control characters)."""
    return printable(str(value), keep_newlines=False)


def when(started_at: str) -> str:
    """``2026-11-22 10:00:00 UTC``; another offset is kept as written."""
    try:
        moment = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    except ValueError:
        return text(started_at)
    shown = moment.strftime("%Y-%m-%d %H:%M:%S")
    offset = moment.utcoffset()
    if offset is None:
        return shown
    return f"{shown} UTC" if offset == timedelta(0) else f"{shown} {moment.strftime('%z')}"


def as_json(value: Any, *, limit: int = MAX_RAW_CHARS) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    text = printable(text)
    if len(text) > limit:
        return text[:limit] + f"\n… {len(text) - limit:,} more characters in the JSON report"
    return text


def script_json(data: Any) -> Markup:
    """JSON safe inside a <script> element: no ``<``, ``>`` or ``&`` survives literally."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


class Anchors:
    """Stable, safe ids for nodes: ``node-1``, ``node-2``... by inventory order."""

    def __init__(self, hosts: Sequence[HostReport]) -> None:
        self._ids = {h.name: f"node-{i}" for i, h in enumerate(hosts, start=1)}

    def __call__(self, name: str) -> str:
        return self._ids.get(name, "")
