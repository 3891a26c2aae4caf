"""Which switch every node hangs off, from a topology file in Slurm's ``topology.conf`` format:

    SwitchName=leaf1 Nodes=node[01-16]
    SwitchName=leaf2 Nodes=node[17-32]
    SwitchName=spine Switches=leaf[1-2]

Pure parsing with ``file:line`` errors. Only what names a cut is kept: each node's leaf switch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ClusterShell.NodeSet import NodeSet, NodeSetException

from preflight.errors import InputError

_FIELD_RE = re.compile(r"(\w+)=(\S+)")
_KNOWN = {"switchname", "nodes", "switches", "linkspeed"}


def parse_topology(text: str, path: str = "topology.conf") -> dict[str, str]:
    """Node name -> the switch that lists it under ``Nodes=``; errors name ``path:line``."""
    leaf_of: dict[str, str] = {}
    switches: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields: dict[str, str] = {}
        rest = _FIELD_RE.sub("", line).strip()
        if rest:
            raise InputError(f"cannot read {rest!r}: expected Key=Value fields", path=path, line=number)
        for key, value in _FIELD_RE.findall(line):
            if key.lower() not in _KNOWN:
                raise InputError(
                    f"unknown field {key}= (known: SwitchName, Nodes, Switches)", path=path, line=number
                )
            fields[key.lower()] = value
        name = fields.get("switchname")
        if not name:
            raise InputError("a line without SwitchName=", path=path, line=number)
        if name in switches:
            raise InputError(f"switch {name} is defined twice", path=path, line=number)
        switches.add(name)
        if "nodes" not in fields:
            continue
        try:
            nodes = list(NodeSet(fields["nodes"]))
        except NodeSetException as exc:
            raise InputError(f"bad node list {fields['nodes']!r}: {exc}", path=path, line=number) from None
        for node in nodes:
            if node in leaf_of:
                raise InputError(f"{node} is under both {leaf_of[node]} and {name}", path=path, line=number)
            leaf_of[node] = name
    return leaf_of


def load_topology(path: Path) -> Mapping[str, str]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such topology file", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read topology: {exc}", path=str(path)) from None
    return parse_topology(text, str(path))
