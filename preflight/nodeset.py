"""Folding host names by node set, the way ClusterShell prints them: ``gpu[01-30]``.

A thousand nodes with one odd value read as two lines: the majority folded, the
minority named.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

from ClusterShell.NodeSet import NodeSet, NodeSetException

V = TypeVar("V", bound=Hashable)


def fold(names: Iterable[str]) -> str:
    """``["gpu01", "gpu02", "gpu05"]`` -> ``"gpu[01-02,05]"``; names NodeSet cannot fold stay as they are."""
    names = list(dict.fromkeys(names))
    if not names:
        return ""
    try:
        return str(NodeSet.fromlist(names))
    except NodeSetException:
        return ",".join(names)


def natural_key(name: str) -> list[int | str]:
    """Sort key that orders ``node2`` before ``node10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def group_by_value(values: Mapping[str, V]) -> list[tuple[V, list[str]]]:
    """Hosts grouped by their value, largest group first (ties: in first-seen order)."""
    groups: dict[V, list[str]] = {}
    for host, value in values.items():
        groups.setdefault(value, []).append(host)
    return sorted(groups.items(), key=lambda item: -len(item[1]))


def minority(values: Mapping[str, V]) -> tuple[V | None, list[str]]:
    """The majority value and the hosts that differ from it.

    A value is the majority only when more than half of the hosts have it: with none (two
    values on two nodes each, or a largest group of 2 among 5 nodes that all differ), there is
    no value to trust, the majority is ``None`` and every host is named, so that a judge says
    that no majority decides rather than keep one side as good.
    """
    groups = group_by_value(values)
    if len(groups) <= 1:
        return (groups[0][0] if groups else None), []
    majority_value, hosts = groups[0]
    if 2 * len(hosts) <= len(values):
        return None, list(values)
    return majority_value, [h for h, v in values.items() if v != majority_value]
