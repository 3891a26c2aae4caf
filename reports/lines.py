"""Plain lines for logs and operators: one line per finding (``--local``, a Slurm prolog's log),
and the hand-back (the nodes to use, each bad node's action, the ``scontrol`` line to drain them).

Node-provided text is made printable on one line.
"""

from __future__ import annotations

from preflight.escape import printable
from preflight.handback import ACTION_TEXT, Handback, hand_back
from preflight.model import RunReport
from preflight.nodeset import fold
from reports.summary import ordered


def _one_line(text: str) -> str:
    return printable(text, keep_newlines=False)


def finding_lines(report: RunReport) -> list[str]:
    """``preflight: FAIL versions node3: torch 2.1.0 ...`` for every finding that is not a pass,
    then the verdict; a clean run is one line."""
    lines = []
    for result in ordered(list(report.results)):
        if result.status in ("pass", "skip"):
            continue
        folded = fold(result.hosts)
        where = f" {folded}:" if folded and not result.summary.startswith(folded) else ":"
        lines.append(_one_line(f"preflight: {result.status.upper()} {result.check}{where} {result.summary}"))
    hosts = ", ".join(h.name for h in report.hosts)
    took = f"{report.duration_s:.1f} s (exit {int(report.exit_code)})"
    lines.append(_one_line(f"preflight: {report.verdict} on {hosts} in {took}"))
    return lines


def handback_of(report: RunReport) -> Handback:
    """The run's hand-back; for a report saved by a version without one, judged from its findings."""
    if report.handback is not None:
        return Handback.from_dict(report.handback)
    from preflight.registry import all_checks, unreached_check

    actions = {c.name: c.action for c in all_checks()}
    return hand_back(report.hosts, report.results, actions, unreached_check=unreached_check())


def handback_lines(report: RunReport) -> list[str]:
    """The nodes that passed and those that did not, with what to do about each; empty when every
    node passed."""
    handback = handback_of(report)
    if not handback.bad and not handback.unplaced:
        return []
    lines = [f"good nodes ({len(handback.good)}): {fold(handback.good) or 'none'}"]
    if handback.min_nodes is not None:
        met = "met" if handback.enough else "NOT met"
        lines.append(f"--min-nodes {handback.min_nodes}: {met}")
    for node in handback.bad:
        checks = ", ".join(node.checks)
        lines.append(_one_line(f"bad node {node.name} ({checks}): {ACTION_TEXT[node.action]}; {node.reason}"))
    if handback.unplaced:
        unplaced = ", ".join(handback.unplaced)
        lines.append(f"failed without naming a node (cannot be routed around): {unplaced}")
    commands = handback.drain_commands()
    if commands:
        lines.append("to drain them (preflight does not run this):")
        lines += [f"  {_one_line(command)}" for command in commands]
    return lines
