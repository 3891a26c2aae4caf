"""Secrets never reach a report: masking of secret-looking values, on the controller too.

The node probe masks before anything leaves the node; this is the second line, applied
to every fact a node sent, so a probe from an older or a modified script cannot leak.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
_SECRET_NAME_RE = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|PASS|KEY|CREDENTIAL|AUTH", re.IGNORECASE)
# scheme://user:password@host -> scheme://user:***@host
_URL_CREDENTIALS_RE = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+(?P<tail>@)")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME_RE.search(name))


def mask_text(text: str) -> str:
    return _URL_CREDENTIALS_RE.sub(lambda m: f"{m['head']}{MASK}{m['tail']}", text)


def mask_env(env: Mapping[str, Any]) -> dict[str, Any]:
    return {name: MASK if is_secret_name(str(name)) else redact(value) for name, value in env.items()}


def redact(value: Any) -> Any:
    """Mask URL credentials in every string of a JSON-like value, and secret-named env entries."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, Mapping):
        return {
            key: (mask_env(item) if key == "env" and isinstance(item, Mapping) else redact(item))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value
