"""How ``storage`` presents itself: one row per path (data or checkpoint) with where it lives
(one shared filesystem or copies), what each copy holds or how much room there is, and what to
do about a finding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from checks.storage.details import CheckpointPass, DataWhere, Where
from checks.storage.judge import NAME
from preflight.model import RunReport
from preflight.nodeset import fold
from preflight.units import capacity
from preflight.view import Block, Presentation, Table, TCell, advice_by_item, listed, plain


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def storage_blocks(report: RunReport) -> list[Block]:
    rows: list[list[TCell]] = []
    shown: set[str] = set()
    for result in report.results_for(NAME):
        # Every result about a path carries where it lives (Where); a report read back from its
        # JSON may not hold what the types say, so each value is checked before it is used.
        details = cast(Where, result.details)
        path = details.get("path")
        if not isinstance(path, str) or path in shown:
            continue
        shown.add(path)
        groups = [fold(str(h) for h in listed(g)) for g in listed(details.get("groups"))]
        copies = _mapping(cast(DataWhere, details).get("copies"))  # a data path's
        holds = "\u2014"
        if len(copies) == 1:
            holds = str(next(iter(copies)))
        elif copies:
            holds = "; ".join(
                f"{fold(str(h) for h in listed(hosts))}: {text}" for text, hosts in copies.items()
            )
        free_bytes = cast(CheckpointPass, details).get("free_bytes")  # the checkpoint's pass, ``space``
        free = [v for v in _mapping(free_bytes).values() if isinstance(v, int)]
        if free:
            holds = f"{capacity(min(free))} free or more"
        css = "" if result.status == "pass" else "odd odd-fail"
        rows.append(
            [
                TCell(plain(path), "mono " + css),
                TCell(plain(details.get("role", ""))),
                TCell(plain(details.get("layout", ""))),
                TCell(plain("; ".join(groups)), "mono"),
                TCell(plain(holds)),
                TCell(plain(result.status)),
            ]
        )
    if not rows:
        return []
    return [
        Table(("path", "role", "layout", "filesystems", "holds", "status"), rows, title="Paths on the nodes")
    ]


PRESENTATION = Presentation(
    heading="Storage",
    about="data paths hold the same content on every node, one shared filesystem or alike copies; "
    "the checkpoint directory is writable with room for a checkpoint",
    evidence=storage_blocks,
    advice=advice_by_item(
        {
            "missing": "Mount the shared filesystem on these nodes, or copy the data there (rsync -a keeps "
            "times, so copies compare alike).",
            "differs": "Bring the odd copies up to date from a good one (rsync -a --delete), or read the "
            "data from one shared filesystem.",
            "mtime": "Copy with times kept (rsync -a, cp -p) so that a stale copy can be told by its times.",
            "not_writable": "Make the checkpoint directory writable for the job's user on every node "
            "(a read-only mount or the wrong owner).",
            "space": "Free space in the checkpoint directory, or point --checkpoint-dir at a larger "
            "filesystem.",
            "inodes": "Free inodes in the checkpoint directory (many small files left by earlier jobs?).",
            "not_shared": "Mount the same shared filesystem at the checkpoint path on every node, so that a "
            "job resumed on other nodes finds its checkpoint.",
            "*": "",
        }
    ),
)
