"""The lines the job's processes print for the controller, and reading them back: rank 0's result
document on stdout; on stderr each rank's start, each phase's start on a node, the heartbeats, and
the end of the first rank of a node that failed. Each is one marked JSON object with named fields.
The launcher, the judges and the recorded test data read these names.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

# The version of the result document's layout.
JOB_VERSION = 1
RESULT_MARKER = "PREFLIGHT-JOB-RESULT "
# Every rank writes a rank line to stderr when it starts, and local rank 0 of each node a phase
# line when a phase starts: the controller maps ranks to nodes and knows how far the job got
# even when rank 0 never prints its document.
RANK_MARKER = "PREFLIGHT-JOB-RANK "
PHASE_MARKER = "PREFLIGHT-JOB-PHASE "
# Every rank also writes a heartbeat line every BEAT_INTERVAL_S from a thread of its own, from
# its first moment (before torch is imported), with the phase it is in: a node whose heartbeats
# stop arriving (its link cut, its processes stopped) is named by the controller within seconds.
BEAT_MARKER = "PREFLIGHT-JOB-BEAT "
BEAT_INTERVAL_S = 2.0
# A node's host writes an end line for the first of its ranks that ended badly (the host then ends
# the others): ``rank``, ``local_rank``, ``pid``, and either ``status`` (its non-zero exit status)
# or ``signal`` with ``signal_name`` where the signal has one (it was ended by that signal).
END_MARKER = "PREFLIGHT-JOB-END "


def log(marker: str, payload: Mapping[str, Any]) -> None:
    """One marked line of JSON on stderr."""
    sys.stderr.write(marker + json.dumps(dict(payload), sort_keys=True) + "\n")
    sys.stderr.flush()


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None: strict JSON has no such numbers."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def print_document(document: Mapping[str, Any]) -> None:
    """The result line on stdout, in one write of the whole line, so that other output on the same
    pipe cannot split it."""
    line = RESULT_MARKER + json.dumps(finite(dict(document)), sort_keys=True, default=str) + "\n"
    pending = memoryview(line.encode("ascii"))
    while pending:
        pending = pending[os.write(1, pending) :]


def marked_lines(text: str, marker: str) -> list[dict[str, Any]]:
    """The JSON objects that follow ``marker`` on lines of ``text`` (other lines, and marked
    lines that are not a JSON object, are skipped)."""
    found: list[dict[str, Any]] = []
    for line in text.splitlines():
        at = line.find(marker)
        if at < 0:
            continue
        try:
            value = json.loads(line[at + len(marker) :])
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def parse_result_line(stdout: str) -> dict[str, Any] | None:
    """The document from a ``PREFLIGHT-JOB-RESULT`` line in rank 0's stdout (the last one wins)."""
    documents = marked_lines(stdout, RESULT_MARKER)
    return documents[-1] if documents else None
