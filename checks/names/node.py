"""Node side of the ``names`` check: resolve the names the controller sends, as the job would.

Node code (:mod:`preflight.bundle`): standard library only, Python 3.8+. Run as
``python - '{"names": [...], "timeout_s": 5}'``; prints one JSON document:
``{"hostname": ..., "answers": {name: {"addresses": [...], "canonical": ...} | {"error": ...}}}``.
Lookups run at once, each under its own deadline: a resolver that hangs costs one timeout.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from typing import Any

from preflight.node.net import resolve_name
from preflight.node.shared import write_line

# Lookups in flight at once: a node resolves the master, itself and a bounded set of peers.
PARALLEL = 16


def resolve(name: str, timeout_s: float, slots: threading.Semaphore) -> dict[str, Any]:
    """The addresses ``name`` resolves to here, in the resolver's order (the first is what gloo
    and most tools use), or why it does not resolve: the facts probe's own lookup."""
    answer = resolve_name(name, timeout_s, slots)
    answer.pop("name", None)
    return answer


def main(argv: list[str]) -> int:
    args = json.loads(argv[0]) if argv else {}
    names = [str(n) for n in args.get("names", [])]
    timeout_s = float(args.get("timeout_s", 5.0))
    slots = threading.Semaphore(PARALLEL)
    answers: dict[str, dict[str, Any]] = {}
    threads = []
    for name in dict.fromkeys(names):

        def run(name: str = name) -> None:
            answers[name] = resolve(name, timeout_s, slots)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    document = {"hostname": socket.gethostname(), "answers": {n: answers[n] for n in dict.fromkeys(names)}}
    write_line(document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
