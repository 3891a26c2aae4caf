"""The lab cluster: SSH nodes built from Linux namespaces on one machine, for tests."""

from .cluster import (
    ENV_MOUNT,
    NODE_PYTHON,
    LabCluster,
    LabError,
    LabNode,
    MakeLab,
    NodeCommandError,
    cleanup_stale,
    missing_requirements,
)
from .envs import derive_env
from .gpu import GpuNode

__all__ = [
    "ENV_MOUNT",
    "NODE_PYTHON",
    "GpuNode",
    "LabCluster",
    "LabError",
    "LabNode",
    "MakeLab",
    "NodeCommandError",
    "cleanup_stale",
    "derive_env",
    "missing_requirements",
]
