"""``names``: every node resolves the master's name, its own and its peers' to the address the
controller reaches each node at; a node whose own name resolves to a loopback address is named.

Observed in :mod:`checks.names.probe` by the node script :mod:`checks.names.node`, judged in
:mod:`checks.names.judge`.
"""

from __future__ import annotations

from checks.names.judge import NAME, Answer, NamedNode, NamesObservation, judge_names
from checks.names.probe import OBSERVE, names_to_ask, node_names
from checks.names.settings import DURATION, SETTINGS
from preflight.check import Check, CheckContext
from preflight.model import CheckResult, RunReport
from preflight.view import Block, Presentation, Table, TCell, advice_by_item, node_rows, plain

__all__ = [
    "CHECK",
    "Answer",
    "NamedNode",
    "NamesObservation",
    "judge_names",
    "names_to_ask",
    "node_names",
]


def _run(ctx: CheckContext) -> list[CheckResult]:
    if not ctx.live_sessions:
        return [CheckResult(NAME, "skip", "no reachable host to ask")]
    return judge_names(ctx.probe(OBSERVE))


def _table(report: RunReport) -> list[Block]:
    nodes, named = node_rows(report, NAME)
    rows = []
    for host, row in nodes:
        rows.append(
            [
                TCell(plain(host), "mono odd odd-fail" if host in named else "mono"),
                TCell(plain(row.get("own") or "\u2014"), "mono"),
                TCell(plain(row.get("master") or "\u2014"), "mono"),
                TCell(plain(row.get("names", "")), "num"),
            ]
        )
    if not rows:
        return []
    return [Table(("node", "own name", "master", "names looked up"), rows, title="Names by node")]


PRESENTATION = Presentation(
    heading="Names",
    about="every node resolves the master's, its own and its peers' names to the addresses the "
    "controller reaches them at",
    evidence=_table,
    advice=advice_by_item(
        {
            "own_loopback": "Map the node's own name to its cluster address in /etc/hosts (remove or "
            "reorder the 127.0.1.1 line), or set GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME and pass "
            "--master-addr as an address.",
            "unresolvable": "Add the names to DNS or to /etc/hosts on every node, or give torchrun "
            "addresses instead of names.",
            "*": "Make every node's /etc/hosts and DNS agree on the cluster's names (one managed "
            "hosts file, or DNS only).",
        }
    ),
)

CHECK = Check(
    name=NAME,
    title="every node resolves the master's, its own and its peers' names to the expected addresses",
    run=_run,
    presentation=PRESENTATION,
    action="fix_config",
    settings=SETTINGS,
    duration=DURATION,
)
