"""The job's node script, the entry of its bundle: given ``{"host": ..., "job": ...}`` in
``sys.argv[1]`` it starts and watches the node's ranks (``host``); given the job's arguments alone
(a rank started in a fresh interpreter) it is one rank (``rank``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from checks.job.node import rank, ranks_host

if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    args: dict[str, Any] = json.loads(argv[1]) if len(argv) > 1 else {}
    if "host" in args:
        # What the node's host handed this script: the bundle itself, and its TMPDIR's removal.
        source = globals().get("__preflight_source__")
        cleanup = globals().get("__preflight_cleanup__")
        return ranks_host.serve(args, source, cleanup if callable(cleanup) else None)
    return rank.run(args)


if __name__ == "__main__":
    status = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # No interpreter teardown: torch's C++ destructors (gloo's threads) can abort a process that
    # finished its work ("terminate called without an active exception"), failing a good job.
    os._exit(status)
