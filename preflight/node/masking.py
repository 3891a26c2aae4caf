"""Secrets never leave a node: values of secret-named variables and passwords in URLs are masked.
The controller applies the same rules again to what a node sent (:mod:`preflight.redact`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from typing import Any

# A variable whose name has one of these words (case-insensitive, words split at "_", "-"
# and ".") has its value masked: HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, DB_PASSWORD.
# Whole words, so that NCCL_IB_PKEY or TORCH_PASSTHROUGH keep their values.
SECRET_NAME_WORDS = frozenset(
    {
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "KEY",
        "KEYS",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "PRIVATE",
        "COOKIE",
        "SESSION",
    }
)
MASK = "***"

# A URL's scheme and authority (``user:password@host:port``), up to the next URL or separator.
_URL_RE = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)"
    r"(?P<authority>(?:(?![A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#])*)"
)


def _mask_authority(match: re.Match[str]) -> str:
    scheme, authority = match.group("scheme"), match.group("authority")
    if "@" not in authority:
        return match.group(0)
    userinfo, host = authority.rsplit("@", 1)
    if ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        return f"{scheme}{user}:{MASK}@{host}"
    # A lone userinfo is usually a token (https://<token>@host): mask it whole.
    return f"{scheme}{MASK}@{host}"


def mask_url_credentials(text: str) -> str:
    """Replace the password (or a lone token) in every ``scheme://user:pass@host`` of text."""
    if "://" not in text:
        return text
    return _URL_RE.sub(_mask_authority, text)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name looks like it holds a secret."""
    return any(word in SECRET_NAME_WORDS for word in re.split(r"[_\-.]+", name.upper()))


def mask_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """Values of secret-looking names become ``***``; the others have their URL credentials masked
    (:func:`scrub`)."""
    return {name: MASK if is_secret_name(str(name)) else scrub(value) for name, value in env.items()}


def scrub(value: Any) -> Any:
    """A JSON-like value (mappings, lists, tuples, scalars) with the URL credentials of every string
    masked, and every ``env`` mapping in it masked by name (:func:`mask_env`): what a node sends,
    and what the controller keeps of what a node sent (:func:`preflight.redact.redact`)."""
    if isinstance(value, str):
        return mask_url_credentials(value)
    if isinstance(value, Mapping):
        return {
            key: mask_env(item) if key == "env" and isinstance(item, Mapping) else scrub(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub(item) for item in value]
    return value


def secret_digest(salt: str, value: str) -> str:
    """A value the report must not show, as a keyed digest: equal values give equal digests
    within one run (the key never leaves the run), and nothing can be read back from it."""
    return hmac.new(salt.encode(), value.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()[:16]
