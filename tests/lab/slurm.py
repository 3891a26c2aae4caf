"""A real Slurm on a lab cluster: ``munged`` and ``slurmctld`` in the root namespace, one
``slurmd -N nodeK`` in each node's namespaces (Debian's ``slurm-wlm`` and ``munge``).

Everything lives in the lab's root directory (configs, keys, sockets, state, logs) and the
daemons run in the foreground as children of the test, so stopping the lab ends them. Clients
(``srun``, ``sbatch``, ``squeue``) find this cluster through :meth:`SlurmLab.environ`.
"""

from __future__ import annotations

import os
import secrets
import shlex
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from .cluster import LabCluster, LabError, LabNode

MUNGED = "/usr/sbin/munged"
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
REQUIRED = (MUNGED, SLURMCTLD, SLURMD, "/usr/bin/srun", "/usr/bin/sbatch", "/usr/bin/squeue")
START_TIMEOUT_S = 60.0
# The controller's port is per lab (labs run side by side); each slurmd has its node's own port space.
CTLD_PORT_BASE = 16800
SLURMD_PORT = 6818
# Seconds before a silent slurmd's node is marked DOWN, and a message's deadline (the issue's ~10 s).
SLURMD_TIMEOUT_S = 10
MESSAGE_TIMEOUT_S = 10


def missing_slurm() -> tuple[str, ...]:
    """The Slurm and munge programs this machine lacks (tests/run.sh installs them)."""
    return tuple(path for path in REQUIRED if not Path(path).exists())


class SlurmLab:
    """Slurm over a started lab: one partition ``lab`` with every node, jobs run as root."""

    def __init__(self, lab: LabCluster, *, prolog: Path | None = None, node_prefix: str = "") -> None:
        self.lab = lab
        self.prolog = prolog
        # Slurm's node names are the hosts' names behind this prefix ("" for the same names): a
        # site whose Slurm calls its nodes otherwise than they call themselves.
        self.node_prefix = node_prefix
        self.root = lab.root / "slurm"
        self.conf = self.root / "slurm.conf"
        self._munged: subprocess.Popen[bytes] | None = None
        self._ctld: subprocess.Popen[bytes] | None = None
        self._slurmd: dict[str, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> SlurmLab:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> SlurmLab:
        if missing := missing_slurm():
            raise LabError("cannot run Slurm here; missing: " + ", ".join(missing))
        try:
            self._write_files()
            self._start_munged()
            self._ctld = self._popen(
                [SLURMCTLD, "-D", "-i", "-f", str(self.conf)], self.root / "slurmctld.out"
            )
            for node in self.lab.nodes:
                self._prepare_node(node)
                self.start_slurmd(node)
            self.wait_idle([self.slurm_name(n) for n in self.lab.nodes])
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        with_timeout = [p for p in (*self._slurmd.values(), self._ctld, self._munged) if p is not None]
        for proc in with_timeout:
            if proc.poll() is None:
                with _suppress_lookup():
                    os.killpg(proc.pid, 15)
        for proc in with_timeout:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with _suppress_lookup():
                    os.killpg(proc.pid, 9)
                proc.wait(timeout=5)
        self._slurmd.clear()
        self._ctld = self._munged = None

    # -- files -----------------------------------------------------------------------------

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    @property
    def ctld_port(self) -> int:
        return CTLD_PORT_BASE + self.lab.index

    def _write_files(self) -> None:
        for sub in ("munge", "state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # munged refuses a socket directory others can write to, and a key others can read.
        (self.root / "munge").chmod(0o755)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o600)
        self.conf.write_text(self._slurm_conf())
        # task/none and proctrack/linuxproc use no cgroup, but slurmd reads cgroup.conf anyway.
        (self.root / "cgroup.conf").write_text("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")

    def _slurm_conf(self) -> str:
        controller = socket.gethostname().split(".")[0]
        nodes = [
            f"NodeName={self.slurm_name(n)} NodeAddr={n.address} NodeHostname={n.name} CPUs=2 State=UNKNOWN"
            for n in self.lab.nodes
        ]
        return "\n".join([
            "ClusterName=pflab",
            f"SlurmctldHost={controller}({self.lab.bridge_address})",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={SLURMD_PORT}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool' / '%n'}",
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.root / 'spool' / '%n.pid'}",
            f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.root / 'log' / '%n.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill",
            "ReturnToService=2",
            f"SlurmdTimeout={SLURMD_TIMEOUT_S}",
            f"MessageTimeout={MESSAGE_TIMEOUT_S}",
            "InactiveLimit=0",
            "KillWait=2",
            "MinJobAge=60",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            *([f"Prolog={self.prolog}", "PrologFlags=Alloc"] if self.prolog else []),
            *nodes,
            "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
            "",
        ])  # fmt: skip

    def _start_munged(self) -> None:
        munge = self.root / "munge"
        self._munged = self._popen(
            [MUNGED, "--foreground", "--force", f"--socket={self.munge_socket}",
             f"--key-file={munge / 'munge.key'}", f"--pid-file={munge / 'munged.pid'}",
             f"--seed-file={munge / 'munged.seed'}", f"--log-file={self.root / 'log' / 'munged.log'}"],
            self.root / "munged.out",
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.munge_socket.exists():
            if self._munged.poll() is not None or time.monotonic() > deadline:
                raise LabError("munged did not start:\n" + self._log("munged.out"))
            time.sleep(0.05)

    def _prepare_node(self, node: LabNode) -> None:
        # `ip netns exec` gave the node a fresh /sys without /sys/fs/cgroup; slurmd will not start
        # without the cgroup tree, so it is put back in the node's own mount namespace.
        mounts = _cgroup_mounts()
        script = ["set -e"]
        for fstype, target, options in mounts:
            opts = f"-o {shlex.quote(options)} " if options else ""
            script.append(f"mkdir -p {shlex.quote(target)}")
            script.append(f"mount -t {fstype} {opts}{fstype} {shlex.quote(target)}")
        self.lab.exec(node, ["sh", "-c", "; ".join(script)])

    # -- daemons ---------------------------------------------------------------------------

    def start_slurmd(self, node: LabNode | str) -> None:
        target = self.lab.node(node)
        nsenter = ["nsenter", "-t", str(self._holder_pid(target)), "-n", "-m", "-u", "--"]
        self._slurmd[target.name] = self._popen(
            [*nsenter, SLURMD, "-D", "-N", self.slurm_name(target), "-f", str(self.conf)],
            self.root / f"slurmd-{target.name}.out",
        )

    def kill_slurmd(self, node: LabNode | str) -> None:
        """SIGKILL the node's slurmd: the node stops answering Slurm (the steps it runs stay)."""
        proc = self._slurmd.pop(self.lab.node(node).name, None)
        if proc is not None:
            with _suppress_lookup():
                os.killpg(proc.pid, 9)
            proc.wait(timeout=10)

    def slurm_name(self, node: LabNode | str) -> str:
        """The node's name in Slurm."""
        return self.node_prefix + self.lab.node(node).name

    def _holder_pid(self, node: LabNode) -> int:
        if node.holder is None:
            raise LabError(f"{node.name} is not running")
        return node.holder.pid

    def _popen(self, argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.environ(),
                start_new_session=True,
            )

    def _log(self, name: str) -> str:
        path = self.root / name
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"

    # -- clients ---------------------------------------------------------------------------

    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment whose Slurm clients talk to this cluster (and to no other)."""
        keep = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**keep, "SLURM_CONF": str(self.conf), **(extra or {})}

    def run(self, argv: Sequence[str], *, timeout_s: float = 60, check: bool = True) -> str:
        result = subprocess.run(
            list(argv), capture_output=True, text=True, env=self.environ(), timeout=timeout_s, check=False
        )
        if check and result.returncode != 0:
            raise LabError(f"{shlex.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def node_states(self) -> dict[str, str]:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"])
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_idle(self, names: Sequence[str], timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            if self._ctld is not None and self._ctld.poll() is not None:
                raise LabError(
                    "slurmctld exited:\n" + self._log("slurmctld.out") + self._log("log/slurmctld.log")
                )
            try:
                states = self.node_states()
            except LabError:
                states = {}
            if all(states.get(name, "").rstrip("*") in ("idle", "mixed", "allocated") for name in names):
                return
            time.sleep(0.3)
        logs = "\n".join(self._log(f"slurmd-{name}.out") + self._log(f"log/{name}.log") for name in names)
        raise LabError(f"Slurm nodes not idle after {timeout_s:g} s: {states}\n{logs}")

    def is_daemon(self, cmdline: str) -> bool:
        """Whether a node's process is this Slurm's own daemon (not something a run left)."""
        return cmdline.startswith(SLURMD + " ")

    def wait_node_state(self, name: str, state: str, timeout_s: float = 60) -> tuple[str, str]:
        """Poll until the node's state starts with ``state`` (``drain`` matches draining and
        drained); return its state and reason."""
        deadline = time.monotonic() + timeout_s
        found = ("", "")
        while time.monotonic() < deadline:
            out = self.run(["sinfo", "-h", "-N", "-n", name, "-o", "%T|%E"], check=False).strip()
            current, _, reason = out.partition("|")
            found = (current, reason)
            if current.startswith(state):
                return found
            time.sleep(0.2)
        raise LabError(f"{name} not {state} after {timeout_s:g} s: {found}")

    def job_state(self, job_id: str) -> str:
        out = self.run(["scontrol", "show", "job", job_id], check=False)
        for word in out.split():
            if word.startswith("JobState="):
                return word.partition("=")[2]
        return "UNKNOWN"

    def wait_job(self, job_id: str, timeout_s: float = 120) -> str:
        """Poll squeue until the job has left the queue (``sbatch --wait`` polls every 8 s);
        return its final state from the controller's record."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.run(["squeue", "-h", "-j", job_id, "-o", "%T"], check=False).strip():
                break
            time.sleep(0.2)
        else:
            raise LabError(f"job {job_id} still queued or running after {timeout_s:g} s")
        return self.job_state(job_id)


def _cgroup_mounts() -> list[tuple[str, str, str]]:
    """(fstype, mount point, options) of the machine's cgroup tree, from the root namespace."""
    found = []
    with open("/proc/1/mounts") as mounts:
        for line in mounts:
            _, target, fstype, options, *_ = line.split()
            if not target.startswith("/sys/fs/cgroup"):
                continue
            if fstype in ("cgroup", "cgroup2"):
                kept = ",".join(
                    o for o in options.split(",") if o not in ("rw", "ro") and "relatime" not in o
                )
                found.append((fstype, target, kept))
            elif fstype == "tmpfs" and target == "/sys/fs/cgroup":
                found.append(("tmpfs", target, "mode=755"))
    found.sort(key=lambda item: item[1].count("/"))
    return found


class _suppress_lookup:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> bool:
        return exc_type is not None and issubclass(exc_type, ProcessLookupError)
