"""How the ``limits`` check shows itself: each node's /dev/shm, locked-memory and open-files limits
and the least free space where the job writes, in a table, and what to do about each kind of
finding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checks.limits.details import NAME
from preflight.model import RunReport
from preflight.units import capacity
from preflight.view import Block, Presentation, Table, TCell, advice_by_item, node_rows, plain


def _least_scratch(row: Mapping[str, Any]) -> str:
    """The scratch place with the least free space: ``1 MiB (tmp)``."""
    free = row.get("scratch_free_bytes")
    known = {k: v for k, v in free.items() if isinstance(v, int)} if isinstance(free, Mapping) else {}
    if not known:
        return "\u2014"
    place = min(known, key=lambda k: known[k])
    return f"{capacity(known[place])} ({place})"


def _table(report: RunReport) -> list[Block]:
    rows = []
    nodes, named = node_rows(report, NAME)
    for host, row in nodes:

        def size(key: str, row: Mapping[str, Any] = row) -> str:
            value = row.get(key)
            if isinstance(value, int):
                return capacity(value)
            return "unlimited" if value is None and key == "memlock" and key in row else "\u2014"

        nofile = row.get("nofile")
        files = "unlimited" if nofile is None and "nofile" in row else "\u2014"
        if isinstance(nofile, int):
            files = f"{nofile:,}"
        rows.append(
            [
                TCell(plain(host), "mono odd odd-fail" if host in named else "mono"),
                TCell(size("shm_bytes"), "num"),
                TCell(size("shm_free_bytes"), "num"),
                TCell(size("memlock"), "num"),
                TCell(files, "num"),
                TCell(_least_scratch(row), "num"),
                TCell("yes" if row.get("rdma") else "no"),
            ]
        )
    if not rows:
        return []
    return [
        Table(
            ("node", "/dev/shm", "free", "locked memory", "open files", "scratch free (least)", "RDMA"),
            rows,
            title="Limits by node",
        )
    ]


PRESENTATION = Presentation(
    heading="Limits and scratch space",
    about="/dev/shm, scratch space, locked memory and open files are enough for a job, and alike on "
    "every node",
    evidence=_table,
    advice=advice_by_item(
        {
            "shm": "Give /dev/shm more room: docker run --shm-size=16g (or --ipc=host), a Kubernetes "
            "emptyDir with medium Memory mounted at /dev/shm, or mount -o remount,size=... /dev/shm.",
            "shm_free": "Remove leftover segments of earlier jobs from /dev/shm (ls -la /dev/shm; nccl-* "
            "and torch_* files of processes that are gone).",
            "memlock": "Set the locked-memory limit to unlimited for the job's user (limits.conf memlock, "
            "LimitMEMLOCK=infinity for a systemd-started service, docker --ulimit memlock=-1, Slurm's "
            "PropagateResourceLimits).",
            "nofile": "Raise the open-files limit for the job's user (ulimit -n 65536 in the launcher, or "
            "nofile in limits.conf).",
            "scratch_space": "Make room where the job writes: remove what earlier jobs left there (old "
            "torchinductor_<user> and ~/.triton/cache compile caches may go; they are rebuilt), or point "
            "TMPDIR, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, TORCH_HOME or HF_HOME at a local disk with "
            "room (give the job's values with --env to check them).",
            "scratch_inodes": "Remove old compile caches (torchinductor_<user>, ~/.triton/cache: many small "
            "files), or point the caches at a filesystem with free inodes.",
            "scratch_not_writable": "Make the directory writable for the job's user, or point the variable "
            "named in the finding's place (TMPDIR, TORCH_HOME, HF_HOME...) at one that is.",
            "scratch_peers": "See what fills the named node's filesystem (du -xsh PATH/* | sort -h): the "
            "other nodes have far more room there, and this one runs out first.",
        }
    ),
)
