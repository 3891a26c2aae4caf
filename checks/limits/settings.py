"""``[limits]``: the shared memory, resource limits and scratch space a job needs on every node."""

from __future__ import annotations

from dataclasses import dataclass

from preflight.errors import ConfigError
from preflight.units import parse_size


@dataclass(frozen=True)
class LimitsSection:
    """Resource limits, shared memory and scratch space the job needs on every node."""

    # /dev/shm smaller than this fails: NCCL's shared-memory transport and DataLoader workers
    # live there (a container's default is 64 MiB).
    min_shm: str = "1 GiB"
    # An open-files soft limit below this warns: DataLoader workers pass tensors as file
    # descriptors, and the common default of 1024 runs out.
    min_nofile: int = 4096
    # The locked-memory limit a node with RDMA devices needs ("unlimited" or a size): RDMA
    # registers (locks) its buffers.
    rdma_memlock: str = "unlimited"
    # Free space and free inodes the job needs where it writes (its scratch space): the temporary
    # directory and the caches of torch, TorchInductor, Triton and Hugging Face. Less fails; 0
    # judges nothing (with no free space asked, none is compared between nodes either).
    min_scratch_free: str = "10 GiB"
    min_scratch_inodes: int = 100_000

    def __post_init__(self) -> None:
        if self.min_scratch_inodes < 0:
            raise ConfigError("limits.min_scratch_inodes must be 0 or more", key="limits.min_scratch_inodes")
        for key in ("min_shm", "rdma_memlock", "min_scratch_free"):
            value = getattr(self, key)
            if key == "rdma_memlock" and value == "unlimited":
                continue
            try:
                parse_size(value)
            except ValueError as exc:
                raise ConfigError(f"limits.{key}: {exc}", key=f"limits.{key}") from None

    @property
    def min_shm_bytes(self) -> int:
        return parse_size(self.min_shm)

    @property
    def min_scratch_free_bytes(self) -> int:
        return parse_size(self.min_scratch_free)

    @property
    def rdma_memlock_bytes(self) -> int | None:
        """None: unlimited."""
        return None if self.rdma_memlock == "unlimited" else parse_size(self.rdma_memlock)
