"""``[storage]`` and its options (``--data``, ``--checkpoint-dir``, ``--checkpoint-size``): the data
sets and the checkpoint directory, as paths on the nodes; and what looking at them adds to a run's
expected duration (nothing where there is nothing to look at).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from preflight.config import Config
from preflight.errors import ConfigError
from preflight.settings import Cost, Option, Settings
from preflight.units import parse_size


def node_path_error(path: str) -> str | None:
    """Why ``path`` cannot name a path on the nodes (None when it can). The controller never
    reads these paths: only what is wrong before any node is contacted is judged here."""
    if not path:
        return "an empty path"
    if "\0" in path:
        return f"{path!r} contains a NUL character"
    if not path.startswith("/"):
        return f"{path!r} is not an absolute path (it is a path on the nodes)"
    return None


@dataclass(frozen=True)
class StorageSection:
    """The data sets and the checkpoint directory, as paths on the nodes (``--data``,
    ``--checkpoint-dir``): never read by the controller."""

    data: tuple[str, ...] = ()
    checkpoint_dir: str = ""
    # What one checkpoint writes into the checkpoint directory: the whole checkpoint where the
    # directory is one shared filesystem, one node's part where each node has its own. Empty: not
    # stated, and free space is reported and compared between nodes, not judged against a need.
    checkpoint_size: str = ""
    # Free space the checkpoint directory needs (a size); empty: one checkpoint_size.
    checkpoint_free: str = ""
    # Files one checkpoint writes (a sharded checkpoint writes one per rank): free inodes needed.
    checkpoint_files: int = 1000
    # Files a data path's manifest covers (in sorted walk order: the same files on every node);
    # the walk of one copy stops after walk_timeout_s.
    max_files: int = 100_000
    walk_timeout_s: float = 30.0
    # Files whose content (head and tail) is hashed to compare copies.
    sample_files: int = 16
    # Nodes whose markers each node looks for (the next ones in inventory order, and the first).
    look_peers: int = 16

    @property
    def has_paths(self) -> bool:
        """Whether there is anything to look at on the nodes (a data path or the checkpoint directory)."""
        return bool(self.data or self.checkpoint_dir)

    def __post_init__(self) -> None:
        for path in self.data:
            if (why := node_path_error(path)) is not None:
                raise ConfigError(f"storage.data: {why}", key="storage.data")
        if self.checkpoint_dir and (why := node_path_error(self.checkpoint_dir)) is not None:
            raise ConfigError(f"storage.checkpoint_dir: {why}", key="storage.checkpoint_dir")
        for key in ("checkpoint_size", "checkpoint_free"):
            if getattr(self, key):
                try:
                    parse_size(getattr(self, key))
                except ValueError as exc:
                    raise ConfigError(f"storage.{key}: {exc}", key=f"storage.{key}") from None

    @property
    def checkpoint_bytes(self) -> int | None:
        return parse_size(self.checkpoint_size) if self.checkpoint_size else None

    @property
    def free_needed_bytes(self) -> int | None:
        """The free space the checkpoint directory needs; None where nothing says."""
        return parse_size(self.checkpoint_free) if self.checkpoint_free else self.checkpoint_bytes


def _with_data(cfg: StorageSection, paths: tuple[str, ...]) -> StorageSection:
    for path in paths:
        if (why := node_path_error(path)) is not None:
            raise ValueError(why)
    return dataclasses.replace(cfg, data=paths)


def _with_checkpoint_dir(cfg: StorageSection, path: str) -> StorageSection:
    if (why := node_path_error(path)) is not None:
        raise ValueError(why)
    return dataclasses.replace(cfg, checkpoint_dir=path)


def _with_checkpoint_size(cfg: StorageSection, size: str) -> StorageSection:
    parse_size(size)  # a ValueError says what is wrong with it
    return dataclasses.replace(cfg, checkpoint_size=size)


def _looking_s(config: Config, n_hosts: int) -> float:
    # Asking the nodes, measured on the lab cluster (3 nodes, 2 shared cores); it asks no node
    # when it has no path to look at.
    return 0.4 if config.section(StorageSection).has_paths else 0.0


SETTINGS = Settings(
    StorageSection,
    options=(
        Option(
            "--data",
            "PATH",
            "a data set every node must see with the same content (repeatable)",
            _with_data,
            repeat=True,
            surroundings=True,
        ),
        Option(
            "--checkpoint-dir",
            "PATH",
            "the checkpoint directory every node must be able to write",
            _with_checkpoint_dir,
            surroundings=True,
        ),
        Option(
            "--checkpoint-size",
            "SIZE",
            "what one checkpoint writes there (140GiB, 1.5T): the free space needed",
            _with_checkpoint_size,
            surroundings=True,
        ),
    ),
)
DURATION = (Cost("the storage probe", _looking_s),)
