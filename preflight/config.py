"""Expectations and thresholds, from a TOML file, the environment and the command line.

Every threshold has a default that works with no config at all. Precedence: command
line > environment (``PREFLIGHT_*``) > file > defaults. Unknown keys are errors that
name the file and the key, so a typo never silently disables a check.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from preflight.errors import ConfigError
from preflight.units import parse_size

DriftPolicy = Literal["fail", "warn", "ignore"]


@dataclass(frozen=True)
class RunSection:
    """How the run itself behaves."""

    python: str = "python3"
    timeout_s: float = 300.0
    connect_timeout_s: float = 10.0
    probe_timeout_s: float = 60.0
    fanout: int = 64
    port: int = 29500
    # A Slurm topology.conf (SwitchName=... Nodes=...): names the switch behind a cut.
    topology: str = ""


@dataclass(frozen=True)
class VersionsSection:
    """Which version differences fail a run and which only warn."""

    # Packages whose drift fails the run, on top of the built-in training stack
    # (torch and NVIDIA's CUDA, cuDNN and NCCL wheels).
    stack_packages: tuple[str, ...] = ()
    # What drift in any other package does.
    package_drift: DriftPolicy = "warn"
    ignore_packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuMemorySection:
    """GPU memory and health thresholds."""

    # A GPU with less than this fraction of its memory free is busy with someone else's work.
    min_free_fraction: float = 0.9
    # Total memory of one GPU may differ across nodes by this fraction before it is a finding
    # (drivers reserve slightly different amounts).
    total_tolerance: float = 0.01
    # GPUs expected on every node; 0 means "not stated" (then the nodes are compared).
    gpus_per_node: int = 0


@dataclass(frozen=True)
class PortsSection:
    """Node-to-node reachability of the ports a job needs."""

    # The job's master (rendezvous) address; empty means the first host of the inventory.
    master_addr: str = ""
    # More TCP ports the job needs between nodes, besides the rendezvous port.
    extra_ports: tuple[int, ...] = ()
    # Seconds one connect attempt may take before the port counts as dropped.
    connect_timeout_s: float = 2.0
    # Also probe one random ephemeral port per node: NCCL and gloo connect on such ports.
    probe_ephemeral: bool = True


@dataclass(frozen=True)
class AllreduceSection:
    """All-reduce bandwidth, measured as nccl-tests does, and how slow is too slow."""

    # Seconds the whole-world sweep of message sizes may take; sizes stop growing past it.
    sweep_budget_s: float = 6.0
    # Each size of the sweep is this many times the one before (nccl-tests' -f); the top two
    # sizes are always a doubling apart. --deep sweeps with 2.
    sweep_factor: Literal[2, 4] = 4
    # Largest message of the sweep in bytes; 0 picks by device (16 MiB on CPU, 1 GiB on GPU).
    max_bytes: int = 0
    # Message size of the pairwise tests; 0 picks by device (4 MiB on CPU, 256 MiB on GPU).
    pair_bytes: int = 0
    # Seconds one pair test may take (a 100x slow link is named, not waited out).
    pair_budget_s: float = 2.0
    warmup_iters: int = 5
    iters: int = 20
    # A pair is slow (confirmed by a re-test) below the median of the run's healthy pairs minus
    # 2.5 robust standard deviations of them: at most quiet_slow_ratio x that median on a quiet
    # fabric (so a node 20% slow is named), at least slow_ratio x the typical pair on a noisy one.
    # With fewer than 8 healthy pairs (under 5 nodes) the threshold is slow_ratio alone.
    slow_ratio: float = 0.5
    quiet_slow_ratio: float = 0.9
    # Absolute floors, GB/s of busbw at the largest size; 0 means none.
    min_busbw_gbps: float = 0.0
    min_pair_busbw_gbps: float = 0.0
    # "auto": pairwise tests when there are 3 or more nodes; "always"; "never".
    pairwise: Literal["auto", "always", "never"] = "auto"
    # Which pairs the first wave tests. "full": every pair (n-1 rounds): finds any slow link.
    # "sparse": one round of disjoint pairs covering every node (a few rounds with re-tests at
    # any size): finds every slow node, but a slow link only if its pair was drawn.
    # "auto": full up to 16 nodes, sparse above. The sparse plan's partners are drawn anew each
    # run, so that no cut between node sets stays uncrossed run after run.
    pair_plan: Literal["auto", "full", "sparse"] = "auto"
    # The sparse plan's draw (the report's pair_seed): set it to replay a run's pairs; 0 draws.
    pair_seed: int = 0
    # The network NCCL must use between nodes: "auto" (IB where the nodes have IB devices), "ib", "socket".
    expect_transport: Literal["auto", "ib", "socket"] = "auto"
    # Interface for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME; empty: the route to the master.
    socket_ifname: str = ""
    # Seconds a collective may wait for a peer before the job gives up on it: how soon a dead
    # node is noticed. torchrun's own defaults are many minutes.
    collective_timeout_s: float = 20.0
    # Seconds the ranks may take to join (rendezvous and process group): longer, since eight
    # processes per node importing torch from a cold shared filesystem start far apart.
    join_timeout_s: float = 60.0


@dataclass(frozen=True)
class DdpSection:
    """The DDP smoke-training job."""

    steps: int = 30
    # A rank whose compute step takes longer than this multiple of the median is a straggler...
    straggler_ratio: float = 1.5
    # ...and only when it is also slower by at least this many seconds per step (noise floor).
    straggler_min_excess_s: float = 0.005
    # The global loss must end below this fraction of where it started.
    max_final_loss_ratio: float = 0.9


@dataclass(frozen=True)
class ComputeSection:
    """The compute burn every rank runs inside the job, judged against the other ranks."""

    # Seconds every rank multiplies matrices (bf16 GEMM on a GPU, fp32 on a CPU).
    burn_s: float = 1.0
    # Side of the square matrices; 0 picks by device (8192 on a GPU, 256 on a CPU).
    matrix: int = 0
    # A rank below this fraction of the median rank's throughput is slow (GPU ranks)...
    slow_ratio: float = 0.8
    # ...and CPU ranks (a CPU-only cluster): processes sharing cores vary with the scheduler.
    cpu_slow_ratio: float = 0.5
    # Absolute floor in TFLOPS per rank; 0 means none (ranks are compared with each other).
    min_tflops: float = 0.0


@dataclass(frozen=True)
class IntranodeSection:
    """The all-reduce inside each node and the GPUs' host-device copies."""

    # A node (or GPU) below this fraction of the median node's busbw (GPU's copy rate) is slow.
    slow_ratio: float = 0.5


@dataclass(frozen=True)
class HardwareSection:
    """The hardware audit from the facts (PCIe links, InfiniBand ports, XID errors)."""

    # XID numbers never reported (known noise on this cluster).
    ignore_xids: tuple[int, ...] = ()


@dataclass(frozen=True)
class BaselineSection:
    """Comparing a run with a previous known-good one (``--baseline RUN.json``)."""

    # A busbw below (1 - this) of the baseline's, at the same message size or pair, fails.
    max_busbw_drop: float = 0.2
    # What a version that changed since the baseline is: an upgrade may be intended.
    version_change: DriftPolicy = "warn"
    # What a node that was not in the baseline is.
    new_node: DriftPolicy = "warn"


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


# Variables whose difference between nodes breaks a job rather than tunes it: ranks that disagree
# on the network, its plugin or the algorithm and protocol a collective uses do not connect, or
# hang in the first collective; ranks told different masters or world sizes never rendezvous.
MUST_MATCH = (
    "NCCL_NET",
    "NCCL_NET_PLUGIN",
    "NCCL_IB_DISABLE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
)


@dataclass(frozen=True)
class EnvironmentSection:
    """Comparing the environment NCCL, torch, CUDA and gloo read on each node."""

    # Variables not compared (fnmatch patterns: "NCCL_DEBUG*").
    ignore: tuple[str, ...] = ()
    # Variables whose difference fails the run (patterns); any other difference warns.
    must_match: tuple[str, ...] = MUST_MATCH


@dataclass(frozen=True)
class LimitsSection:
    """Resource limits and shared memory the job needs on every node."""

    # /dev/shm smaller than this fails: NCCL's shared-memory transport and DataLoader workers
    # live there (a container's default is 64 MiB).
    min_shm: str = "1 GiB"
    # An open-files soft limit below this warns: DataLoader workers pass tensors as file
    # descriptors, and the common default of 1024 runs out.
    min_nofile: int = 4096
    # The locked-memory limit a node with RDMA devices needs ("unlimited" or a size): RDMA
    # registers (locks) its buffers.
    rdma_memlock: str = "unlimited"

    def __post_init__(self) -> None:
        for key in ("min_shm", "rdma_memlock"):
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
    def rdma_memlock_bytes(self) -> int | None:
        """None: unlimited."""
        return None if self.rdma_memlock == "unlimited" else parse_size(self.rdma_memlock)


@dataclass(frozen=True)
class NamesSection:
    """Name resolution between the nodes."""

    # Peers each node resolves besides the master and itself (all of them up to this many).
    max_peers: int = 16
    # Seconds one lookup may take before it counts as failed (a resolver that times out).
    lookup_timeout_s: float = 5.0


@dataclass(frozen=True)
class ClocksSection:
    """Clock offsets between the nodes and the controller."""

    # A node further than this from the others (beyond the measurement's uncertainty) warns...
    max_offset_s: float = 1.0
    # ...and fails past this: Kerberos (and with it NFS and other network filesystems that use
    # it) refuses tickets from clocks 5 minutes apart, object stores refuse skewed signatures.
    fail_offset_s: float = 300.0
    # Round trips per node; the shortest one is used.
    samples: int = 5
    # A node whose kernel says no time service keeps its clock synchronised while other nodes'
    # kernels say one does: clocks that agree today drift apart by seconds a week.
    unsynchronised: DriftPolicy = "warn"
    # Judge unsynchronised clocks by that policy even where no node is synchronised (by default
    # a cluster that keeps time some other way, a VM's host clock say, is only said to).
    require_synchronised: bool = False


@dataclass(frozen=True)
class Config:
    run: RunSection = field(default_factory=RunSection)
    versions: VersionsSection = field(default_factory=VersionsSection)
    gpu_memory: GpuMemorySection = field(default_factory=GpuMemorySection)
    ports: PortsSection = field(default_factory=PortsSection)
    allreduce: AllreduceSection = field(default_factory=AllreduceSection)
    ddp: DdpSection = field(default_factory=DdpSection)
    baseline: BaselineSection = field(default_factory=BaselineSection)
    storage: StorageSection = field(default_factory=StorageSection)
    environment: EnvironmentSection = field(default_factory=EnvironmentSection)
    limits: LimitsSection = field(default_factory=LimitsSection)
    names: NamesSection = field(default_factory=NamesSection)
    clocks: ClocksSection = field(default_factory=ClocksSection)
    # The job's own environment, applied on every node as its launcher would (``[job_env]``,
    # ``--env-file``, ``--env``): what the environment check compares is what the job sees.
    job_env: Mapping[str, str] = field(default_factory=dict)
    compute: ComputeSection = field(default_factory=ComputeSection)
    hardware: HardwareSection = field(default_factory=HardwareSection)
    intranode: IntranodeSection = field(default_factory=IntranodeSection)
    # Expected versions: fact name or package name -> "2.4.0", "2.4" (prefix) or ">=2.4,<2.6".
    expect: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None
    # Node name -> the leaf switch it hangs off, from a topology file (--topology, [run] topology).
    switch_of: Mapping[str, str] = field(default_factory=dict)


_SECTIONS: dict[str, type[Any]] = {
    "run": RunSection,
    "versions": VersionsSection,
    "gpu_memory": GpuMemorySection,
    "ports": PortsSection,
    "allreduce": AllreduceSection,
    "ddp": DdpSection,
    "baseline": BaselineSection,
    "storage": StorageSection,
    "environment": EnvironmentSection,
    "limits": LimitsSection,
    "names": NamesSection,
    "clocks": ClocksSection,
    "compute": ComputeSection,
    "hardware": HardwareSection,
    "intranode": IntranodeSection,
}

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOML_LINE_RE = re.compile(r"\(at line (\d+), column \d+\)")


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    origin = get_origin(annotation)
    if origin is Literal:
        choices = get_args(annotation)
        if value not in choices:
            raise ConfigError(f"{where} must be one of {', '.join(map(str, choices))}, not {value!r}")
        return value
    if origin is tuple:
        item = get_args(annotation)[0]
        if item is int:
            if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536 for v in value
            ):
                raise ConfigError(f"{where} must be a list of port numbers")
            return tuple(value)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings")
        return tuple(value)
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, not {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where} must be a number, not {value!r}")
        if value < 0:
            raise ConfigError(f"{where} must not be negative")
        return float(value)
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be a whole number, not {value!r}")
        if value < 0:
            raise ConfigError(f"{where} must not be negative")
        return value
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, not {value!r}")
        return value
    raise TypeError(f"unsupported config type {annotation!r}")


def _section(cls: type[Any], data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a table", key=where)
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for key, value in data.items():
        if key not in names:
            raise ConfigError(
                f"unknown key {where}.{key} (known: {', '.join(sorted(names))})", key=f"{where}.{key}"
            )
        try:
            values[key] = _coerce(value, hints[key], f"{where}.{key}")
        except ConfigError as exc:
            raise ConfigError(str(exc), key=f"{where}.{key}") from None
    return cls(**values)


def parse_config(data: Mapping[str, Any], *, source: str | None = None) -> Config:
    sections: dict[str, Any] = {}
    expect: dict[str, str] = {}
    job_env: dict[str, str] = {}
    for key, value in data.items():
        if key in _SECTIONS:
            sections[key] = _section(_SECTIONS[key], value, key)
        elif key == "expect":
            if not isinstance(value, dict):
                raise ConfigError('[expect] must be a table of name = "version"')
            for name, wanted in value.items():
                if not isinstance(wanted, str | int | float) or isinstance(wanted, bool):
                    raise ConfigError(f"expect.{name} must be a version string", key=f"expect.{name}")
                expect[name] = str(wanted)
        elif key == "job_env":
            if not isinstance(value, dict):
                raise ConfigError('[job_env] must be a table of NAME = "value"')
            for name, given in value.items():
                if not ENV_NAME_RE.fullmatch(name):
                    raise ConfigError(
                        f"job_env.{name}: not an environment variable name", key=f"job_env.{name}"
                    )
                if not isinstance(given, str | int | float) or isinstance(given, bool):
                    raise ConfigError(f"job_env.{name} must be a string", key=f"job_env.{name}")
                job_env[name] = str(given)
        else:
            known = ", ".join(sorted([*_SECTIONS, "expect", "job_env"]))
            raise ConfigError(f"unknown section [{key}] (known: {known})", key=key)
    return Config(**sections, expect=expect, job_env=job_env, source=source)


def load_config(path: Path | None) -> Config:
    """Read a TOML config; errors start with ``path:`` (and the line, where TOML gives one)."""
    if path is None:
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError("no such config file", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config: {exc}", path=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _TOML_LINE_RE.search(message)
        line = int(found.group(1)) if found else None
        message = _TOML_LINE_RE.sub("", message).strip()
        raise ConfigError(f"not valid TOML: {message}", path=str(path), line=line) from None
    try:
        return parse_config(data, source=str(path))
    except ConfigError as exc:
        line = _line_of(path.read_text(encoding="utf-8-sig"), exc.key) if exc.key else None
        raise ConfigError(str(exc), path=str(path), line=line) from None


def _line_of(text: str, dotted: str) -> int | None:
    """The line that sets ``section.key`` (or opens ``[section]``), for the error message."""
    section, _, key = dotted.partition(".")
    in_section = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            in_section = stripped.strip("[] ") == section
            if in_section and not key:
                return number
        elif re.match(rf"{re.escape(key or section)}\s*=", stripped) and (in_section or not key):
            return number
    return None


# Environment variables that override the file (and are overridden by the command line).
ENVIRONMENT: dict[str, str] = {
    "PREFLIGHT_PYTHON": "python",
    "PREFLIGHT_TIMEOUT": "timeout_s",
    "PREFLIGHT_CONNECT_TIMEOUT": "connect_timeout_s",
    "PREFLIGHT_FANOUT": "fanout",
    "PREFLIGHT_PORT": "port",
}


def with_overrides(
    config: Config, overrides: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> Config:
    """Apply environment then command-line values (``None`` means "not given") to ``[run]``."""
    environ = os.environ if environ is None else environ
    hints = get_type_hints(RunSection)
    values: dict[str, Any] = {}
    for variable, key in ENVIRONMENT.items():
        if variable in environ:
            raw: Any = environ[variable]
            if hints[key] is not str:
                try:
                    raw = float(raw) if hints[key] is float else int(raw)
                except ValueError:
                    raise ConfigError(f"{variable}={environ[variable]!r} is not a number") from None
            values[key] = _coerce(raw, hints[key], variable)
    for key, value in overrides.items():
        if value is not None:
            values[key] = _coerce(value, hints[key], f"--{key.removesuffix('_s').replace('_', '-')}")
    return dataclasses.replace(config, run=dataclasses.replace(config.run, **values))
