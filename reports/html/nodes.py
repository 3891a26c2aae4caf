"""Every node's facts, searchable: the facts most nodes share shown once, and per node only what
differs from them, with a line of chips (OS, Python, torch, driver, GPUs, CPUs, memory)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from preflight.model import HostReport
from preflight.units import gib
from reports.html.text import as_json, text


@dataclass(frozen=True)
class FactView:
    key: str
    text: str
    note: str = ""


@dataclass(frozen=True)
class NodeView:
    name: str
    anchor: str
    hostname: str
    address: str
    status: str
    reachable: bool
    error: str
    chips: Sequence[str]
    facts: Sequence[FactView]
    shared: int  # facts identical to the common ones, not repeated


def _majority_json(values: Sequence[str]) -> str | None:
    if len(values) < 2:
        return None
    value, count = Counter(values).most_common(1)[0]
    return value if count >= 2 and count * 2 > len(values) else None


def node_facts(hosts: Sequence[HostReport]) -> tuple[list[FactView], dict[str, tuple[list[FactView], int]]]:
    """Facts shared by most nodes once (``common``), and per node only what differs from them:
    at 1,000 nodes the page holds one copy of the package list, not a thousand."""
    reachable = [h for h in hosts if h.reachable]
    keys = list(dict.fromkeys(k for h in reachable for k in h.facts))
    common: dict[str, Any] = {}
    common_json: dict[str, str] = {}
    for key in keys:
        if key == "hostname":
            continue
        encoded = [json.dumps(h.facts[key], sort_keys=True) for h in reachable if key in h.facts]
        majority = _majority_json(encoded)
        if majority is not None:
            common_json[key] = majority
            common[key] = json.loads(majority)
    per_host: dict[str, tuple[list[FactView], int]] = {}
    for host in hosts:
        views: list[FactView] = []
        shared = 0
        for key, value in host.facts.items():
            if key in common_json and json.dumps(value, sort_keys=True) == common_json[key]:
                shared += 1
                continue
            base = common.get(key)
            if isinstance(base, Mapping) and isinstance(value, Mapping):
                diff = {k: v for k, v in value.items() if k not in base or base[k] != v}
                missing = [k for k in base if k not in value]
                same = len(value) - len(diff)
                note = f"{same} more as in the common facts" if same else ""
                if missing:
                    note += (
                        ("; " if note else "") + "missing here: " + ", ".join(text(k) for k in missing[:20])
                    )
                views.append(FactView(text(key), as_json(diff), note))
            else:
                views.append(FactView(text(key), as_json(value)))
        per_host[host.name] = (views, shared)
    common_views = [FactView(text(k), as_json(v)) for k, v in common.items()]
    return common_views, per_host


def chips(host: HostReport) -> list[str]:
    """The node at a glance: OS, Python, torch, driver, GPUs by model, CPUs, memory."""
    node = host.node
    chips: list[str] = []
    if node.os_name is not None:
        chips.append(text(node.os_name))
    if node.python_version is not None:
        chips.append(f"Python {text(node.python_version)}")
    if node.torch is not None and node.torch.version is not None:
        chips.append(f"torch {text(node.torch.version)}")
    if node.driver_version is not None:
        chips.append(f"driver {text(node.driver_version)}")
    if node.gpus:
        names = Counter(text(g.name or "GPU") for g in node.gpus)
        chips.append(", ".join(f"{n}\u00d7 {name}" for name, n in names.items()))
    elif host.reachable and (node.gpus == [] or "gpus" in node.unavailable):
        chips.append("no GPU")
    if node.cpu_count is not None:
        chips.append(f"{node.cpu_count} CPUs")
    if node.memory_total_bytes is not None:
        chips.append(f"{gib(node.memory_total_bytes)} GiB RAM")
    return chips
