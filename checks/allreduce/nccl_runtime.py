"""The NCCL each rank actually ran, compared across nodes.

The facts probe and the versions check see the NCCL torch was built against; a job can load
another one (``LD_LIBRARY_PATH``, an ``nvidia-nccl`` wheel of another version, a container's
copy). Each rank reports the library mapped into its process and what ``ncclGetVersion`` says;
ranks of one job that run different NCCL versions can hang or fail in ways that look like a
network fault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checks.allreduce.details import NAME
from preflight.model import CheckResult
from preflight.nodeset import fold, minority

ITEM = "nccl_loaded"


def loaded_versions(document: Mapping[str, Any], names: Sequence[str]) -> dict[str, str]:
    """Per node, the NCCL version(s) its ranks loaded (comma-joined when a node's ranks differ)."""
    per_node: dict[str, set[str]] = {}
    for rank in document.get("ranks") or []:
        loaded = rank.get("nccl_loaded") if isinstance(rank, Mapping) else None
        if not isinstance(loaded, Mapping) or not loaded.get("version"):
            continue
        node = int(rank.get("node_rank", -1))
        host = names[node] if 0 <= node < len(names) else f"node rank {node}"
        per_node.setdefault(host, set()).add(str(loaded["version"]))
    return {host: ", ".join(sorted(versions)) for host, versions in per_node.items()}


def loaded_nccl_results(versions: Mapping[str, str]) -> list[CheckResult]:
    """A failure naming the nodes whose ranks run another NCCL than the others' (or each other's)."""
    # A node whose own ranks differ is named whatever the others run; the rest are compared.
    mixed = sorted(host for host, text in versions.items() if "," in text)
    majority, odd = minority({host: text for host, text in versions.items() if host not in mixed})
    named = sorted(set(odd) | set(mixed))
    if not named:
        return []
    if majority is None:
        sides = "; ".join(f"{host}: {versions[host]}" for host in named)
        summary = f"the ranks run different NCCL versions ({sides})"
    else:
        sides = ", ".join(f"{host}: {versions[host]}" for host in named)
        others = [host for host in versions if host not in named]
        summary = f"{sides} loaded a different NCCL from the rest ({fold(others)}: {majority})"
    return [CheckResult(NAME, "fail", summary, tuple(named), {"item": ITEM, "nccl_loaded": dict(versions)})]
