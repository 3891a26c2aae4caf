"""Making node-provided text harmless: no control characters, no terminal escape sequences."""

from __future__ import annotations

import re

# CSI / OSC / other ESC sequences, then any remaining C0/C1 control character except tab and newline.
_ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` without escape sequences or control characters (newlines kept if asked)."""
    text = _CONTROL_RE.sub("", _ANSI_RE.sub("", text))
    return text if keep_newlines else text.replace("\n", " ").replace("\t", " ")
