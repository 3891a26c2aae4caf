"""How ``environment`` presents itself: the variables that differ, by node group with where each
value comes from, the variables every node agrees on, and what to do about a difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checks.environment.judge import NAME
from preflight.model import RunReport
from preflight.nodeset import fold
from preflight.view import MAX_TABLE_ROWS, Block, Presentation, Table, TCell, advice_by_item, plain


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def environment_blocks(report: RunReport) -> list[Block]:
    rows: list[list[TCell]] = []
    agreed: Mapping[str, Any] = {}
    for result in report.results_for(NAME):
        odd = set(result.hosts)
        for name, variable in _mapping(result.details.get("variables")).items():
            sources = _mapping(_mapping(variable).get("sources"))
            for value, hosts in _mapping(_mapping(variable).get("values")).items():
                listed = [str(h) for h in hosts] if isinstance(hosts, list) else []
                origins = sorted({str(sources.get(h, "")) for h in listed} - {""})
                css = "mono odd odd-fail" if odd & set(listed) else "mono"
                rows.append(
                    [
                        TCell(plain(name), "mono"),
                        TCell(plain(fold(listed)), css),
                        TCell(plain(value), "mono"),
                        TCell(plain(", ".join(origins)), "mono"),
                    ]
                )
        if result.status == "pass":
            agreed = _mapping(result.details.get("agreed"))
    blocks: list[Block] = []
    if rows:
        blocks.append(
            Table(
                ("variable", "nodes", "value", "from"), rows[:MAX_TABLE_ROWS], title="Variables that differ"
            )
        )
    if agreed:
        same = [[TCell(plain(k), "mono"), TCell(plain(v), "mono")] for k, v in agreed.items()]
        blocks.append(Table(("variable", "value"), same[:MAX_TABLE_ROWS], title="Alike on every node"))
    return blocks


PRESENTATION = Presentation(
    heading="Environment",
    about="the variables NCCL, torch, CUDA and gloo read, nccl.conf and the NCCL network plugin "
    "agree between nodes",
    evidence=environment_blocks,
    advice=advice_by_item(
        {
            "variables": "Set these the same way on every node: in the job's launcher (--env, an "
            "env file, srun --export) rather than in each node's shell profile or nccl.conf; run again "
            "with --env NAME=VALUE to check what the job will see.",
            "net_plugin": "Install the same NCCL network plugin (libnccl-net*.so) on every node, on the "
            "library path the job uses, or set NCCL_NET_PLUGIN the same way everywhere.",
            "conf_unread": "Write NCCL settings as NAME=VALUE with no spaces around '='.",
            "hca_prefix": "Start NCCL_IB_HCA with '=' (or '^=' to exclude) so that each entry matches one "
            "HCA by its whole name: NCCL_IB_HCA==mlx5_1:1,mlx5_2:1.",
            "hca_list_marker": "Write '^' and '=' once, at the start of NCCL_IB_HCA: they apply to the whole "
            "list (NCCL_IB_HCA=^=mlx5_8,mlx5_14 excludes both).",
        }
    ),
)
