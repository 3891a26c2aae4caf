"""Secrets never reach a report: masking applied again on the controller.

The node probe masks before anything leaves the node; this second line applies the same
rules (one definition, the node script's own) to every fact a node sent, so a probe from
an older or modified script cannot leak a token into a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preflight.node.facts import MASK, is_secret_name, mask_url_credentials

__all__ = ["MASK", "is_secret_name", "redact"]


def redact(value: Any) -> Any:
    """Mask URL credentials in every string of a JSON-like value, and secret-named env entries."""
    if isinstance(value, str):
        return mask_url_credentials(value)
    if isinstance(value, Mapping):
        return {
            key: (
                {name: MASK if is_secret_name(str(name)) else redact(item) for name, item in inner.items()}
                if key == "env" and isinstance(inner, Mapping)
                else redact(inner)
            )
            for key, inner in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value
