"""The ``limits`` check's name and the JSON contract of its details: each node's limits (in the
first finding, or the pass) and what each finding compared.
"""

from __future__ import annotations

from typing import TypedDict

NAME = "limits"


class NodeLimits(TypedDict, total=False):
    """One node's row in the report: sizes in bytes, None for unlimited."""

    shm_bytes: int
    shm_free_bytes: int | None
    memlock: int | None
    nofile: int | None
    nofile_hard: int | None
    rdma: bool
