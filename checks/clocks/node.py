"""Node side of the ``clocks`` check: answer each line the controller sends with this node's
wall clock, in nanoseconds since the epoch, until ``DONE`` or the end of input.

Self-contained (standard library only, Python 3.8+), never imports preflight. Sent after a length
prefix (``preflight.probes.start_node_script``) and talked to by lines: ``READY`` first, then one
``<ns>`` line per request. Nothing is written anywhere.
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if line.strip() == "DONE":
            break
        # Read as late as possible: the moment the request arrived.
        sys.stdout.write(f"{time.time_ns()}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
