"""``connect``: every host reached, authenticated, its host key accepted and the probe run.

Hosts that could not be checked are grouped by cause, so fifty nodes behind one dead
switch read as one line; each finding of a group lists every host with its own message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from preflight.check import Check
from preflight.model import CheckResult, HostReport
from preflight.nodeset import fold
from preflight.settings import PROFILES
from preflight.view import MAX_TABLE_ROWS, Block, Presentation, Table, TCell, advice_by_item, plain

_CAUSES = {
    "unreachable": "unreachable",
    "timeout": "timed out",
    "auth_refused": "authentication refused",
    "host_key_unknown": "host key not in known_hosts",
    "host_key_changed": "host key CHANGED",
    "python_missing": "Python missing",
    "probe_failed": "probe failed",
    "interrupted": "interrupted",
}


class Unreached(TypedDict):
    """Hosts that could not be checked for one cause, each with its own message."""

    cause: str  # a host error kind: "unreachable", "auth_refused"...
    errors: dict[str, str]


class Reached(TypedDict):
    """The hosts reached and probed."""

    reached: list[str]
    accepted_host_keys: dict[str, Any]  # host -> the keys accepted on first connection
    probe_s: dict[str, Any]  # host -> seconds the facts probe took


def judge_connect(hosts: Sequence[HostReport]) -> list[CheckResult]:
    failed: dict[str, list[HostReport]] = {}
    for host in hosts:
        if host.error is not None:
            failed.setdefault(host.error.kind, []).append(host)
    reached = [h for h in hosts if h.reachable]
    results: list[CheckResult] = []
    for kind, group in failed.items():
        names = [h.name for h in group]
        first = group[0].error.message if group[0].error else ""
        summary = (
            f"{fold(names)}: {first}"
            if len(group) == 1
            else f"{fold(names)}: {_CAUSES.get(kind, kind)} ({len(group)} hosts; e.g. {first})"
        )
        unreached: Unreached = {
            "cause": kind,
            "errors": {h.name: h.error.message for h in group if h.error},
        }
        results.append(CheckResult("connect", "error", summary, tuple(names), unreached))
    accepted = {h.name: keys for h in reached if (keys := h.node.connection.get("accepted_host_keys"))}
    if reached:
        note = f"; accepted new host keys of {fold(accepted)}" if accepted else ""
        details: Reached = {
            "reached": [h.name for h in reached],
            "accepted_host_keys": accepted,
            "probe_s": {h.name: h.node.connection.get("probe_s") for h in reached},
        }
        summary = f"{len(reached)} of {len(hosts)} hosts reached and probed{note}"
        results.insert(0, CheckResult(check="connect", status="pass", summary=summary, details=details))
    return results


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

CHECK = Check(
    name="connect",
    title="every host reached over SSH (or locally), host key trusted, probe run with its Python",
    run=lambda ctx: judge_connect(ctx.hosts),
    presentation=PRESENTATION,
    always=True,
    node_local=True,
    names_unreached=True,
    profiles=PROFILES,
)
