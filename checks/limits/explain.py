"""What each item of ``limits``' findings means (``preflight explain``). The peer comparisons of
scratch space use constants of :mod:`checks.limits.scratch`, quoted here from the code."""

from __future__ import annotations

from checks.limits.scratch import PEER_NEED_FACTOR, PEER_RATIO
from preflight.explain import Explanation

# Where the limits come from, said once for every item that reads one.
_SESSION = (
    "in the session the node is reached in (SSH, or an srun step), which a job launched the same way inherits"
)
_SCRATCH = (
    "The places where the job and its libraries write are found as they find them: the temporary "
    "directory (TMPDIR, else /tmp), the caches of torch (TORCH_HOME), TorchInductor "
    "(TORCHINDUCTOR_CACHE_DIR), Triton (TRITON_CACHE_DIR) and Hugging Face (HF_HOME, "
    "HF_DATASETS_CACHE), the job's `--env` values first."
)

EXPLAINS = (
    Explanation(
        item="shm",
        means=(
            "A node's /dev/shm is smaller than a job needs, or far smaller than its peers'. NCCL's "
            "shared-memory transport between the GPUs of a node and DataLoader workers allocate "
            "there; when it fills, the job dies with a bus error or an NCCL shared-memory error. A "
            "container's default is 64 MiB."
        ),
        measured=(
            "The facts probe measures /dev/shm's size (statvfs) on each node; it is compared with the "
            "need and with the median size on the other nodes (when at least two others report one)."
        ),
        threshold=(
            "Smaller than {min_shm} fails; under a quarter of the other nodes' median (a ratio fixed "
            "in code) warns."
        ),
        first=(
            "Give /dev/shm more room: `docker run --shm-size=...` or `--ipc=host`, a Kubernetes "
            "emptyDir with medium Memory mounted at /dev/shm, or `mount -o remount,size=... "
            "/dev/shm` on a bare node (and in /etc/fstab to keep it)."
        ),
        healthy=(
            "/dev/shm at least the need on every node: half the RAM by default on a bare node "
            "(`df -h /dev/shm`)."
        ),
    ),
    Explanation(
        item="shm_free",
        means=(
            "/dev/shm is large enough, but too little of it is free: an earlier job's shared-memory "
            "segments are probably still there. The job will fail the same way as with a small "
            "/dev/shm once it fills the rest."
        ),
        measured="The facts probe's statvfs of /dev/shm on each node: the free space an ordinary user gets.",
        threshold="Less than {min_shm} free. A warning.",
        first=(
            "List what is there (`ls -la /dev/shm`) and remove the nccl-* and torch_* segments of "
            "processes that are gone; a reboot clears it too."
        ),
        healthy="Nearly all of /dev/shm free before the job starts.",
    ),
    Explanation(
        item="memlock",
        means=(
            "On a node with RDMA devices the locked-memory limit is below what RDMA needs: NCCL "
            "cannot register its buffers with the NIC (ibv_reg_mr fails), and the job fails as it "
            "sets up its connections. As a warning, the limit differs between nodes: one node "
            "locked down where the others are not."
        ),
        measured=(
            f"The soft RLIMIT_MEMLOCK {_SESSION}; a node has RDMA devices where the facts probe lists "
            "InfiniBand or RoCE ports. The limits of the nodes that meet the need are also compared "
            "with each other."
        ),
        threshold=(
            "Below {rdma_memlock} on a node with RDMA devices fails; any difference between the "
            "other nodes' limits warns."
        ),
        first=(
            "Set the locked-memory limit to unlimited for the job's user: `memlock` in "
            "/etc/security/limits.conf, LimitMEMLOCK=infinity for a service started by systemd, "
            "`docker run --ulimit memlock=-1`, or Slurm's PropagateResourceLimits; check with "
            "`ulimit -l` in a new session."
        ),
        healthy="`ulimit -l` says unlimited on every node.",
    ),
    Explanation(
        item="nofile",
        means=(
            "The open-files limit is low: DataLoader workers pass tensors to the training process "
            'as file descriptors, and with many workers the job fails with "Too many open files". '
            "A warning."
        ),
        measured=(
            f"The soft RLIMIT_NOFILE {_SESSION}; the hard limit is shown too, and said where it "
            "allows raising the soft one."
        ),
        threshold="A soft limit below {min_nofile}.",
        first=(
            "Raise it for the job's user: `ulimit -n 65536` in the launcher where the hard limit "
            "allows, else `nofile` in /etc/security/limits.conf (or LimitNOFILE for a systemd "
            "service)."
        ),
        healthy="`ulimit -n` in the tens of thousands or more on every node.",
    ),
    Explanation(
        item="scratch_space",
        means=(
            "A filesystem where the job writes has too little free space. TorchInductor and Triton "
            "write compiled kernels there, torch and Hugging Face download models and datasets, and "
            "a full disk stops the job mid-run, often with an error that does not say so."
        ),
        measured=(
            f"{_SCRATCH} Each is measured where it is, or at the directory above it where it would "
            "be made (statvfs: the room an ordinary user gets); places on one filesystem are judged "
            "once, and a filesystem with no size limit is not judged."
        ),
        threshold="Less than {min_scratch_free} free (0: not judged). A failure.",
        first=(
            "See what fills it (`du -xsh PATH/* | sort -h`); remove old compile caches "
            "(torchinductor_USER, ~/.triton/cache: they are rebuilt), or point TMPDIR, "
            "TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, TORCH_HOME or HF_HOME at a local disk with "
            "room, and give the job's values with `--env` to check them."
        ),
        healthy="Every place where the job writes has well over the need free (`df -h PATH`).",
    ),
    Explanation(
        item="scratch_inodes",
        means=(
            "A filesystem where the job writes has too few free inodes: compile caches are many "
            "small files, and with no inode left the job cannot create one, though `df -h` may still "
            "show space."
        ),
        measured=(
            f"{_SCRATCH} Free inodes (statvfs) of the filesystem under each; a filesystem that does "
            "not count inodes is not judged."
        ),
        threshold="Fewer than {min_scratch_inodes} free inodes (0: not judged). A failure.",
        first=(
            "Check `df -i PATH`; remove old compile caches (torchinductor_USER, ~/.triton/cache) or "
            "point the caches at a filesystem with free inodes."
        ),
        healthy="Hundreds of thousands of free inodes or more where the job writes (`df -i PATH`).",
    ),
    Explanation(
        item="scratch_not_writable",
        means=(
            "The job's user cannot write to a directory where the job writes (or where it would be "
            "made): the job fails when TorchInductor, Triton or a download first writes there."
        ),
        measured=(
            f"{_SCRATCH} Each directory, or the nearest one above it that exists, is checked for "
            "write and search access as the user preflight logs in as."
        ),
        threshold="",
        first=(
            "Make the directory writable for the job's user (`ls -ld PATH`, then chown or chmod), or "
            "point the variable of that place (TMPDIR, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, "
            "TORCH_HOME, HF_HOME) at a directory that is."
        ),
        healthy="Every place where the job writes is writable by the job's user.",
    ),
    Explanation(
        item="scratch_peers",
        means=(
            "A node has far less free space where the job writes than the same place on the other "
            "nodes, though still above the need: it will run out first, and the job with it. A "
            "warning."
        ),
        measured=(
            f"{_SCRATCH} Each place's free space is compared with the median of the same place on the "
            "other nodes (at least one other)."
        ),
        threshold=(
            f"Under {PEER_RATIO:g} times the other nodes' median and under {PEER_NEED_FACTOR} times "
            "{min_scratch_free} (both factors fixed in code); a place already below the need is named "
            "by scratch_space instead."
        ),
        first=(
            "See what fills that node's filesystem (`du -xsh PATH/* | sort -h`) and clear what "
            "earlier jobs left, or point the place at a larger disk."
        ),
        healthy="Free space in the same range on every node for each place.",
    ),
)
