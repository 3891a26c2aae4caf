"""The nodes to use and the nodes to leave out, for the report's "What needs attention" card."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from preflight.escape import printable
from preflight.handback import ACTION_TEXT
from preflight.model import RunReport
from preflight.nodeset import fold
from reports.html.text import text
from reports.lines import handback_of


@dataclass(frozen=True)
class BadNodeView:
    name: str
    checks: str
    action: str
    reason: str


@dataclass(frozen=True)
class HandbackView:
    good_count: int
    good: str  # folded node set
    bad: Sequence[BadNodeView]
    unplaced: str  # checks that failed without naming a node
    min_nodes: str  # "--min-nodes 16: met", or empty
    drain: str  # scontrol lines, one per line


def handback_view(report: RunReport) -> HandbackView | None:
    """What a launcher should use, when some node should be left out; None when every node passed."""
    handback = handback_of(report)
    if not handback.bad and not handback.unplaced:
        return None
    met = ""
    if handback.min_nodes is not None:
        met = f"--min-nodes {handback.min_nodes}: {'met' if handback.enough else 'not met'}"
    return HandbackView(
        good_count=len(handback.good),
        good=text(fold(handback.good) or "none"),
        bad=[
            BadNodeView(text(n.name), text(", ".join(n.checks)), text(ACTION_TEXT[n.action]), text(n.reason))
            for n in handback.bad
        ],
        unplaced=text(", ".join(handback.unplaced)),
        min_nodes=text(met),
        drain=printable("\n".join(handback.drain_commands()), keep_newlines=True),
    )
