"""The JSON contract of the ``storage`` check's details: where each path lives (every finding about
a path, and its pass), what each finding found there, and the findings about nodes rather than paths.
"""

from __future__ import annotations

from typing import Literal, TypedDict

Layout = Literal["shared", "separate", "mixed", "one node", "nowhere"]
"""How the nodes that have a path hold it: one filesystem, a copy each, both, or on one node or none."""

SharedBy = Literal["marker", "ids", "none"]
"""How the nodes sharing a filesystem were told: a marker one wrote and another saw, the network
filesystem's identity, or nothing shared."""


class Where(TypedDict):
    """A path, its role (``data`` or ``checkpoint``) and where it lives: the layout, how sharing
    was told and the nodes in groups that see one filesystem. Every finding about a path, and its
    pass, carries these keys."""

    path: str
    role: str
    layout: Layout
    shared_by: SharedBy
    groups: list[list[str]]


class DataWhere(Where):
    """A data path's place with each distinct copy as people read it (file count, size, newest
    file) and the nodes that have it."""

    copies: dict[str, list[str]]


class DataFinding(DataWhere):
    """A data path absent from these nodes (``item`` ``missing``, written after the path's keys),
    copies alike but for the newest file's time (``item`` ``mtime``), or a copy not walked in time
    and not compared (``item`` ``incomplete``)."""

    item: str


class Differs(DataFinding):
    """Copies that differ from the one most nodes have (``item`` ``differs``): that copy as people
    read it, or None when no copy is on most nodes."""

    reference: str | None


class Manifest(TypedDict):
    """What the copy a data path's pass describes holds: file count, total bytes, the newest file
    and its time, and whether only the first files were walked (None where no copy was walked)."""

    files: int | None
    bytes: int | None
    newest: str | None
    newest_mtime: float | None
    truncated: bool | None


class DataPass(DataWhere):
    """A data path alike on every node that has it, and what it holds."""

    manifest: Manifest


class CheckpointFinding(Where):
    """A checkpoint directory absent from these nodes (``item`` ``missing``, written after the
    path's keys), not writable (``item`` ``not_writable``), short of inodes for a checkpoint
    (``item`` ``inodes``) or not the filesystem the other nodes share (``item`` ``not_shared``)."""

    item: str


class Space(CheckpointFinding):
    """Less free space in the checkpoint directory than a checkpoint needs (``item`` ``space``):
    the free bytes of each short node, and the need."""

    free_bytes: dict[str, int]
    need_bytes: int


class CheckpointPass(Where):
    """A checkpoint directory writable with room everywhere: each node's free bytes and inodes
    (None where not reported) and the free space a checkpoint needs (None where not stated)."""

    free_bytes: dict[str, int | None]
    free_inodes: dict[str, int | None]
    need_bytes: int | None


class LeftBehind(TypedDict):
    """Markers a node could not remove (``item`` ``left_behind``)."""

    item: str
    files: list[str]


class NoAnswer(TypedDict):
    """Nodes that did not answer, each with why (``item`` ``no_answer``)."""

    item: str
    errors: dict[str, str]


class Skipped(TypedDict):
    """The skip (no data path or checkpoint directory given): no details."""


StorageDetails = (
    DataFinding
    | Differs
    | DataPass
    | CheckpointFinding
    | Space
    | CheckpointPass
    | LeftBehind
    | NoAnswer
    | Skipped
)
