"""Node facts probe: what this node has, as one JSON document on stdout.

The controller sends this module's bundle (:mod:`preflight.bundle`) through the node's transport
(SSH, srun or local) as the standard input of ``python3 -`` and runs it with the node's own
interpreter (the training environment): standard library only at import time, Python 3.8 or
newer. torch and pynvml are used when the node has them.

Every fact is optional. A fact that cannot be read is left out of ``facts`` and its name goes into
``facts["unavailable"]`` with a short reason; one failing gatherer never stops the others
(:mod:`preflight.node.collect`). Nothing but the JSON document is written to stdout (after the
frame line the bundle writes first: :mod:`preflight.probes`). With the options ``stay`` or
``serve`` the process then hosts the scripts the controller sends next (:mod:`preflight.node.host`).

Each gatherer's module keeps its parsers as pure functions (text in, data out), so that the
controller's tests run them on recorded outputs; the I/O lives in its small ``gather_*`` functions.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from preflight.node.collect import collect
from preflight.node.host import once, stay
from preflight.node.shared import StdoutToStderr, write_line

if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] = ()) -> int:
    """Print the facts document as one line of JSON on stdout. ``argv`` may hold one JSON
    document of options (:class:`preflight.node.gathering.Sink`; ``stay``: see
    :func:`preflight.node.host.stay`)."""
    try:
        options = json.loads(argv[0]) if argv else {}
    except ValueError:
        options = {}
    if isinstance(options, dict) and options.get("serve"):
        return stay(options)
    if isinstance(options, dict) and options.get("stay") and hasattr(os, "fork"):
        return stay(options)
    if isinstance(options, dict) and hasattr(os, "fork"):
        return once(options)
    redirect = StdoutToStderr()
    try:
        redirect.__enter__()
        redirected = True
    except OSError:
        redirected = False  # no usable fd 1 to swap: gather without the redirect
    try:
        document = collect(options if isinstance(options, dict) else {})
    finally:
        if redirected:
            redirect.__exit__(None, None, None)
    write_line(document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[3:] if sys.argv[0] == "-c" else sys.argv[1:]))
