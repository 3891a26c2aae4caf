"""Which nodes a launcher should use: the good ones, and the bad ones with what to do about each.

Pure: a run's hosts and findings in, a :class:`Handback` out. A node is bad when a failed or
errored finding names it, or when it could not be checked; a warning leaves it good. With
``min_nodes``, a run passes when at least that many nodes are good and every failure names
its nodes (a failure that names none cannot be routed around).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from preflight.model import CheckResult, HostErrorKind, HostReport
from preflight.nodeset import fold, natural_key

# What an operator does with a bad node, mildest last: take it out of service until someone
# looks (drain), restart it, reset its GPUs, or fix its software or configuration.
Action = Literal["drain", "reboot", "reset_gpu", "fix_config"]
ACTIONS: tuple[Action, ...] = get_args(Action)
ACTION_TEXT: Mapping[Action, str] = {
    "drain": "drain it and have it looked at",
    "reboot": "reboot it (it did not answer)",
    "reset_gpu": "reset its GPUs (nvidia-smi -r) or reboot it",
    "fix_config": "fix its software or configuration",
}
# Why a host could not be checked -> what to do. A host that does not answer is restarted;
# one that answers but refuses us, or lacks the Python we asked for, is a configuration fault.
_HOST_ERROR_ACTION: Mapping[HostErrorKind, Action] = {
    "unreachable": "reboot",
    "timeout": "reboot",
    "auth_refused": "fix_config",
    "host_key_unknown": "fix_config",
    "host_key_changed": "fix_config",
    "python_missing": "fix_config",
    "probe_failed": "drain",
    "interrupted": "drain",
}
# The order in which one node's several actions are chosen: the strongest wins.
_STRENGTH: Mapping[Action, int] = {"reboot": 3, "reset_gpu": 2, "drain": 1, "fix_config": 0}
# Slurm's drain reason is one line; keep it short enough to read in `sinfo -R`.
_REASON_CHARS = 120


@dataclass(frozen=True)
class BadNode:
    """A node a launcher should leave out: the checks that named it, the first reason, and the
    suggested action."""

    name: str
    checks: tuple[str, ...]
    reason: str
    action: Action

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "checks": list(self.checks), "reason": self.reason, "action": self.action}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BadNode:
        action = data.get("action")
        return cls(
            name=str(data["name"]),
            checks=tuple(str(c) for c in data.get("checks") or ()),
            reason=str(data.get("reason", "")),
            action=cast(Action, action) if action in ACTIONS else "drain",
        )


@dataclass(frozen=True)
class Handback:
    """The nodes to use and the nodes to leave out. ``unplaced``: checks that failed without
    naming a node (nothing can be routed around them)."""

    good: tuple[str, ...]
    bad: tuple[BadNode, ...]
    unplaced: tuple[str, ...] = ()
    min_nodes: int | None = None

    @property
    def enough(self) -> bool:
        """Whether the run passes under ``--min-nodes``."""
        return self.min_nodes is not None and not self.unplaced and len(self.good) >= self.min_nodes

    def drain_commands(self) -> list[str]:
        """The ``scontrol`` lines an operator may run to drain the bad nodes, one per cause and
        action, nodes folded (preflight never runs them)."""
        groups: dict[tuple[tuple[str, ...], Action], list[str]] = {}
        for node in self.bad:
            groups.setdefault((node.checks, node.action), []).append(node.name)
        commands = []
        for (checks, action), names in groups.items():
            reason = f"preflight: {','.join(checks)} failed; {ACTION_TEXT[action]}"
            if len(reason) > _REASON_CHARS:
                reason = reason[: _REASON_CHARS - 3] + "..."
            nodes = shlex.quote(fold(names))
            commands.append(f"scontrol update nodename={nodes} state=drain reason={shlex.quote(reason)}")
        return commands

    def to_dict(self) -> dict[str, Any]:
        return {
            "good": list(self.good),
            "good_folded": fold(self.good),
            "bad": [b.to_dict() for b in self.bad],
            "bad_folded": fold(b.name for b in self.bad),
            "unplaced": list(self.unplaced),
            "min_nodes": self.min_nodes,
            "drain_commands": self.drain_commands(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Handback:
        min_nodes = data.get("min_nodes")
        return cls(
            good=tuple(str(n) for n in data.get("good") or ()),
            bad=tuple(BadNode.from_dict(b) for b in data.get("bad") or () if isinstance(b, Mapping)),
            unplaced=tuple(str(c) for c in data.get("unplaced") or ()),
            min_nodes=min_nodes if isinstance(min_nodes, int) else None,
        )


def _finding_action(result: CheckResult, check_actions: Mapping[str, Action]) -> Action:
    # A finding may say what its own cause needs (a GPU held by a stray process: reset it).
    named = result.details.get("action") if isinstance(result.details, Mapping) else None
    if named in ACTIONS:
        return cast(Action, named)
    return check_actions.get(result.check, "drain")


def hand_back(
    hosts: Sequence[HostReport],
    results: Sequence[CheckResult],
    check_actions: Mapping[str, Action],
    *,
    unreached_check: str,
    min_nodes: int | None = None,
) -> Handback:
    """Split the nodes into good and bad; each bad node with the checks that named it, the first
    reason given, and the strongest action asked for. A node that could not be checked is listed
    under ``unreached_check`` (the check that reaches the nodes, ``Check.names_unreached``)."""
    names = [h.name for h in hosts]
    known = set(names)
    checks: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    actions: dict[str, Action] = {}

    def mark(node: str, check: str, reason: str, action: Action) -> None:
        if check not in checks.setdefault(node, []):
            checks[node].append(check)
        reasons.setdefault(node, reason)
        if node not in actions or _STRENGTH[action] > _STRENGTH[actions[node]]:
            actions[node] = action

    for host in hosts:
        if host.error is not None:
            action = _HOST_ERROR_ACTION.get(host.error.kind, "drain")
            mark(host.name, unreached_check, host.error.message, action)
        elif not host.reachable:
            mark(host.name, unreached_check, "not checked", "reboot")
    unreached = set(checks)
    unplaced: list[str] = []
    for result in results:
        if result.status not in ("fail", "error"):
            continue
        named = [h for h in result.hosts if h in known]
        if not named:
            if result.check not in unplaced:
                unplaced.append(result.check)
            continue
        for node in named:
            if node in unreached:
                continue  # what a finding says of a node not reached is that: marked above, with its action
            mark(node, result.check, result.summary, _finding_action(result, check_actions))
    bad = tuple(
        BadNode(name, tuple(checks[name]), reasons[name], actions[name])
        for name in sorted(checks, key=natural_key)
    )
    good = tuple(n for n in names if n not in checks)
    return Handback(good=good, bad=bad, unplaced=tuple(unplaced), min_nodes=min_nodes)


def hosts_file_text(names: Sequence[str]) -> str:
    """One host per line, as ``srun -w ./FILE``, ``--exclude``, torchrun and MPI read them."""
    return "".join(f"{name}\n" for name in names)
