"""The ``limits`` check's name and the JSON contract of its details: each node's limits and the
free space of its scratch places (in the first finding, or the pass), and what each finding
compared.
"""

from __future__ import annotations

from typing import Required, TypedDict

NAME = "limits"


class NodeLimits(TypedDict, total=False):
    """One node's row in the report: sizes in bytes, None for unlimited."""

    shm_bytes: int
    shm_free_bytes: int | None
    memlock: int | None
    nofile: int | None
    nofile_hard: int | None
    rdma: bool
    scratch_free_bytes: dict[str, int | None]  # by place (tmp, torch, inductor...); None: no limit


class Rows(TypedDict, total=False):
    """Every node's row (by host) and the nodes that reported no limits: the details of the pass or
    skip, and added to the first finding."""

    nodes: dict[str, NodeLimits]
    not_reported: list[str]


class ShmBelowNeed(Rows):
    """``/dev/shm`` smaller than ``[limits] min_shm`` (``item`` ``shm``)."""

    item: Required[str]
    size_bytes: Required[int]
    need_bytes: Required[int]


class ShmBelowPeers(Rows):
    """``/dev/shm`` under a quarter of the other nodes' median (``item`` ``shm``)."""

    item: Required[str]
    size_bytes: Required[int]
    median_bytes: Required[float]


class ShmFull(Rows):
    """Less of ``/dev/shm`` free than a job needs (``item`` ``shm_free``)."""

    item: Required[str]
    free_bytes: Required[int]
    need_bytes: Required[int]


class MemlockShort(Rows):
    """The locked-memory limit below RDMA's need (``item`` ``memlock``); None is unlimited."""

    item: Required[str]
    soft: Required[int | None]
    need: Required[int | None]


class MemlockDiffers(Rows):
    """The locked-memory limit differs between nodes (``item`` ``memlock``): the majority's value
    and the nodes of each value as people read it."""

    item: Required[str]
    majority: Required[int | None]
    values: Required[dict[str, list[str]]]


class NofileLow(Rows):
    """The open-files limit below ``[limits] min_nofile`` (``item`` ``nofile``)."""

    item: Required[str]
    soft: Required[int | None]
    hard: Required[int | None]
    need: Required[int]


class ScratchPlaces(Rows):
    """Places where the job writes that fall on one filesystem (``places``: ``tmp``, ``torch``,
    ``inductor``, ``triton``, ``huggingface``, ``hf_datasets``), their paths (as on the first named
    node), and the filesystem's mount point (or the directory measured)."""

    item: Required[str]
    places: Required[list[str]]
    paths: Required[list[str]]
    mount: Required[str]


class ScratchShort(ScratchPlaces):
    """Less free space than ``[limits] min_scratch_free`` (``item`` ``scratch_space``): each named
    node's free bytes and the need."""

    free_bytes: Required[dict[str, int]]
    need_bytes: Required[int]


class ScratchFewInodes(ScratchPlaces):
    """Fewer free inodes than ``[limits] min_scratch_inodes`` (``item`` ``scratch_inodes``)."""

    free_inodes: Required[dict[str, int]]
    need_inodes: Required[int]


class ScratchNotWritable(ScratchPlaces):
    """Places the job's user cannot write (``item`` ``scratch_not_writable``): ``measured``, the
    directory that refused (the path, or the directory above it where it would be made)."""

    measured: Required[str]


class ScratchBelowPeers(ScratchPlaces):
    """Far less free than the same places on the other nodes (``item`` ``scratch_peers``): the
    node's free bytes and the other nodes' median."""

    free_bytes: Required[dict[str, int]]
    median_bytes: Required[float]


LimitsDetails = (
    Rows
    | ShmBelowNeed
    | ShmBelowPeers
    | ShmFull
    | MemlockShort
    | MemlockDiffers
    | NofileLow
    | ScratchShort
    | ScratchFewInodes
    | ScratchNotWritable
    | ScratchBelowPeers
)
