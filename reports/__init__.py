"""Renderers of a ``RunReport``: one module per format, each with ``render(report) -> str``.

``FILE_FORMATS`` names them; :func:`renderer` imports one when it is asked for, so that a run
that writes JSON only never loads the HTML page's templates and charts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from preflight.model import RunReport

# Format (the command line's option) -> the module under reports/ that renders it.
FILE_FORMATS: Mapping[str, str] = {
    "json": "json_report",
    "junit": "junit",
    "html": "html",
    "prometheus": "prometheus",
}


def renderer(name: str) -> Callable[[RunReport], str]:
    render: Callable[[RunReport], str] = importlib.import_module(f"reports.{FILE_FORMATS[name]}").render
    return render
