"""Renderers of a ``RunReport``: one module per format. ``FILE_FORMATS`` is the registry."""

from __future__ import annotations

from collections.abc import Callable

from preflight.model import RunReport
from reports import html, json_report, junit, prometheus

FILE_FORMATS: dict[str, Callable[[RunReport], str]] = {
    "json": json_report.render,
    "junit": junit.render,
    "html": html.render,
    "prometheus": prometheus.render,
}
