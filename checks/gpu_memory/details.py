"""The JSON contract of the ``gpu_memory`` check's details: the GPUs a finding is about, with what
its item compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, TypedDict


class GpuRow(TypedDict):
    """One GPU as the details list it: the numbers a report charts per node and GPU."""

    index: int
    name: str
    uuid: str | None
    total_bytes: int | None
    used_bytes: int | None
    free_bytes: int | None


class GpuDetails(TypedDict, total=False):
    """The details of every ``gpu_memory`` finding: ``item`` says which, ``gpus`` (host -> the
    GPUs concerned) is what the report marks; the other keys go with their items."""

    item: Required[str]
    gpus: dict[str, list[GpuRow]]
    counts: dict[str, int]  # gpu_count, gpus (the pass)
    expected: int  # gpu_count
    reasons: dict[str, str | None]  # gpu_count: why a node has none
    majority: str | None  # gpu_model
    values: dict[str, list[str]]  # gpu_model: model -> hosts
    model: str  # memory_total
    expected_bytes: int | None  # memory_total
    min_free_fraction: float  # memory_free
    processes: dict[str, list[Mapping[str, Any]] | None]  # memory_free: by GPU index
    errors: dict[str, dict[str, int | None]]  # ecc_errors: by GPU index
    remapped_rows: dict[str, Mapping[str, Any]]  # remapped_rows: by GPU index
    ecc_history: dict[str, dict[str, dict[str, int | None]]]  # gpus (the pass): see ecc_history()
