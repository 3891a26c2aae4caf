"""The single-file HTML report: ``render(report)`` is the whole page (see ``page``). Every check
presents its own section (``Check.presentation``); this package knows no check by name."""

from reports.html.page import build_page, render

__all__ = ["build_page", "render"]
