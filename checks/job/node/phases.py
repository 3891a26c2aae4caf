"""The job's phases on a node: each the ``run(job)`` of the node module the launcher named for it
(``runs`` in the job's arguments: what the phase's check declares), which returns its part of rank
0's document. The modules come in the job's bundle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from checks.job.node.harness import Job


def sent_phases(runs: Mapping[str, str]) -> dict[str, Callable[[Job], dict[str, Any]]]:
    """The phases the launcher sent, by name: each its node module's ``run``, imported here."""
    table: dict[str, Callable[[Job], dict[str, Any]]] = {}
    for name, module in runs.items():
        table[name] = importlib.import_module(module).run
    return table
