"""``NCCL_IB_HCA`` read as NCCL reads it, against the HCAs each node has.

NCCL (``ncclIbInit`` in ``net_ib.cc``, the HPC-X plugin alike) takes a leading ``^`` to exclude the
listed HCAs and then a leading ``=`` to match names exactly; both apply to the whole list and only at
its start. Each entry is ``name[:port]``, and without ``=`` a name is matched as a prefix:
``mlx5_1`` also selects ``mlx5_10`` to ``mlx5_19`` on a node that has them. An entry that names an
HCA of the node, or ends in a number that other HCAs' numbers extend, and so selects more HCAs than
itself, warns, with the HCAs it also selects (a family prefix such as ``mlx5`` is meant to select
many and does not). An entry after the first that starts with ``^`` or ``=`` is read as part of
the name, so it selects no HCA: that warns too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.nodeset import fold

VARIABLE = "NCCL_IB_HCA"
NAME = "environment"


@dataclass(frozen=True)
class HcaList:
    """An HCA list as NCCL parses it: exclusion, exact matching, and each entry's name."""

    exclude: bool
    exact: bool
    names: tuple[str, ...]


def parse_hca_list(value: str) -> HcaList:
    """``^=mlx5_0:1,mlx5_1`` -> exclude, exact, (``mlx5_0``, ``mlx5_1``): the port after ``:`` is
    dropped, and empty entries are skipped, as NCCL's ``parseStringList`` does."""
    exclude = value.startswith("^")
    rest = value[1:] if exclude else value
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    names = tuple(name for name in (entry.split(":")[0] for entry in rest.split(",")) if name)
    return HcaList(exclude, exact, names)


def _natural(name: str) -> tuple[object, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def also_selected(name: str, hcas: Sequence[str]) -> list[str]:
    """The HCAs other than ``name`` that a prefix match of ``name`` selects, where that is a slip: the
    entry is an HCA of the node, or its number is extended (``mlx5_1`` -> ``mlx5_10``)."""
    present = name in hcas
    found = [
        hca
        for hca in hcas
        if hca != name
        and hca.startswith(name)
        and (present or (name[-1:].isdigit() and hca[len(name)].isdigit()))
    ]
    return sorted(set(found), key=_natural)


def _node_findings(value: str, hcas: Sequence[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(kind, entry, HCAs) for one node: ``prefix`` entries that select more, ``marker`` entries."""
    parsed = parse_hca_list(value)
    found: list[tuple[str, str, tuple[str, ...]]] = []
    for number, name in enumerate(parsed.names):
        if number > 0 and name[:1] in ("^", "="):
            found.append(("marker", name, ()))
            continue
        if parsed.exact:
            continue
        more = also_selected(name, hcas)
        if more:
            found.append(("prefix", name, tuple(more)))
    return found


def _summary(kind: str, value: str, entry: str, more: tuple[str, ...], hosts: Sequence[str]) -> str:
    where = f"{VARIABLE}={value} on {fold(hosts)}"
    if kind == "marker":
        return (
            f"{where}: entry '{entry}' selects no HCA: NCCL reads '^' and '=' only at the start of the "
            "list, so it reads this entry as a name"
        )
    verb = "excludes" if parse_hca_list(value).exclude else "selects"
    anchored = ("^=" if verb == "excludes" else "=") + value.lstrip("^")
    return (
        f"{where}: '{entry}' is matched as a prefix, so it also {verb} {', '.join(more)}; "
        f"{VARIABLE}={anchored} matches names exactly"
    )


def judge_hca_lists(values: Mapping[str, str], nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Warnings for each node's ``NCCL_IB_HCA`` (``values``: host -> the value the job sees) against
    the HCAs its facts list; a node without the variable or without HCAs in its facts says nothing."""
    grouped: dict[tuple[str, str, str, tuple[str, ...]], list[str]] = {}
    for host, value in values.items():
        node = nodes.get(host)
        hcas = list(dict.fromkeys(port.device for port in node.ib_ports)) if node is not None else []
        if not value or not hcas:
            continue
        for kind, entry, more in _node_findings(value, hcas):
            grouped.setdefault((kind, value, entry, more), []).append(host)
    return [
        CheckResult(
            NAME,
            "warn",
            _summary(kind, value, entry, more, hosts),
            tuple(hosts),
            {
                "item": "hca_prefix" if kind == "prefix" else "hca_list_marker",
                "variable": VARIABLE,
                "value": value,
                "entry": entry,
                "also_selected": list(more),
            },
        )
        for (kind, value, entry, more), hosts in grouped.items()
    ]
