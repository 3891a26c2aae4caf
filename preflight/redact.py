"""Secrets never reach a report: masking applied again on the controller.

The node probe masks before anything leaves the node; this second line applies the same rules,
the node's own (:mod:`preflight.node.masking`), to every fact a node sent, so that a probe from an
older or modified script cannot leak a token into a report.
"""

from __future__ import annotations

from typing import Any

from preflight.node.masking import MASK, is_secret_name, scrub

__all__ = ["MASK", "is_secret_name", "redact"]


def redact(value: Any) -> Any:
    """Mask URL credentials in every string of a JSON-like value, and secret-named entries of every
    ``env`` mapping in it (:func:`preflight.node.masking.scrub`)."""
    return scrub(value)
