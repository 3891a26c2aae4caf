"""How the ``baseline`` check shows itself: its heading only (its findings say what changed)."""

from __future__ import annotations

from preflight.view import Presentation

PRESENTATION = Presentation(heading="baseline", about="")
