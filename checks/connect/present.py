"""How the ``connect`` check shows itself: a table of the hosts that failed alike, each with its own
message, under an error finding, and what to do for each cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from checks.connect.details import Unreached
from preflight.model import CheckResult
from preflight.view import MAX_TABLE_ROWS, Block, Presentation, Table, TCell, advice_by_item, plain


def _errors_table(result: CheckResult) -> list[Block]:
    """Hosts that failed alike, each with its own message."""
    errors = cast(Unreached, result.details).get("errors")
    if result.status != "error" or not isinstance(errors, Mapping) or len(errors) <= 1:
        return []
    rows = [[TCell(plain(h), "mono"), TCell(plain(m))] for h, m in list(errors.items())[:MAX_TABLE_ROWS]]
    return [Table(("host", "error"), rows)]


PRESENTATION = Presentation(
    heading="Connectivity",
    about="every host reached over SSH, its host key trusted and the probe run with its Python",
    finding=_errors_table,
    advice=advice_by_item(
        {
            "unreachable": "Is the node up and on this network? Check its console (BMC) and cabling, "
            "or leave it out of the job's host list.",
            "timeout": "Is the node up and on this network? Check its console (BMC), its load and "
            "cabling, or leave it out of the job's host list.",
            "auth_refused": "Check the user and the key (-i) for this node; is your public key in its "
            "authorized_keys?",
            "host_key_unknown": "Verify the fingerprint with the node's admins, then add it to "
            "known_hosts (or rerun with --accept-new-host-keys on a network you trust).",
            "host_key_changed": "Do not connect until you know why: the node was reinstalled, or "
            "something is in the middle. Confirm with its admins, then replace its known_hosts line.",
            "python_missing": "Point --python at the training environment's interpreter on the nodes.",
            "probe_failed": "Run the probe on the node by hand to see its error; rerun with --debug.",
        }
    ),
)
