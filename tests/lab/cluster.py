"""A cluster of SSH nodes on one machine, for tests: each node is a Linux network namespace
with its own address, hostname, /tmp, Python environment and a real sshd. Faults (slow links,
blocked ports, cut links, a dead sshd) are injected with tc, iptables and ip, and are reversible.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Literal, Protocol, TypeAlias

from checks.job.node.ranks_host import RANK_COMM

from .gpu import GpuNode
from .gpu import install as install_gpu_node

ENV_MOUNT = "/opt/pflab/env"  # every node sees its own Python environment at this same path
NODE_PYTHON = ENV_MOUNT + "/bin/python"
# Every node also sees the lab's base environment here: an environment derived from it
# (tests/lab/envs.py) reaches its packages through this path when the base's own path is
# hidden in the node (a checkout under /tmp, behind the node's private /tmp).
BASE_MOUNT = "/opt/pflab/base"
# A checkout under /tmp is hidden in every node too; commands that run the project itself on a
# node (a Slurm step running preflight) need it at its own path, so the node mounts it back there.
CHECKOUT = Path(__file__).resolve().parents[2]
CHECKOUT_HIDDEN = Path("/tmp") in CHECKOUT.parents
CHECKOUT_STASH = "/opt/pflab/checkout"

STATE_DIR = Path("/var/tmp/pflab")  # not under /tmp: each node hides /tmp behind its own tmpfs
CLAIMS_DIR = STATE_DIR / "claims"
LOCK_PATH = STATE_DIR / "alloc.lock"
SSHD = "/usr/sbin/sshd"
CPU_CGROUP = "/sys/fs/cgroup/cpu"  # cgroup v1 cpu controller: a node's CPU quota (limit_cpu)
CFS_PERIOD_US = 100_000
SSH_PORT = 22
START_TIMEOUT_S = 15.0
MAX_LABS = 254
MAX_NODES = 200
FIRST_HOST = 11  # node i gets 10.199.k.(10 + i); the bridge is .1
UNUSED_HOST = 250  # beyond the last node: nothing ever answers there
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SHELL_DOTFILES = ("/root/.bashrc", "/root/.profile", "/root/.bash_profile", "/root/.bash_login")
# Nothing listens on the node's own port 53, so lookups beyond /etc/hosts fail at once.
RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"
REQUIRED_TOOLS = ("ip", "tc", "iptables", "unshare", "nsenter", "ssh-keygen", "sleep")

_NAME_RE = re.compile(r"^pflab(\d+)(?:[nv]\d+|r\d+|v\d+r\d+)?$")


class LabError(RuntimeError):
    """The lab could not be built, or was used wrongly."""


class NodeCommandError(subprocess.CalledProcessError):
    """A command run inside a node with check=True exited non-zero."""

    def __init__(self, node: str, result: subprocess.CompletedProcess[bytes]) -> None:
        super().__init__(result.returncode, result.args, result.stdout, result.stderr)
        self.node = node

    def __str__(self) -> str:
        err = (self.stderr or b"").decode(errors="replace").strip()
        return f"on {self.node}: {super().__str__()}\n{err[-2000:]}"


@dataclass
class LabNode:
    index: int  # 1-based
    name: str  # "node1", ...; also its hostname (own UTS namespace)
    address: str  # IPv4 on the lab bridge
    netns: str  # network namespace name
    veth_host: str  # host-side veth, a port of the lab bridge
    env: Path  # bind-mounted at ENV_MOUNT inside the node
    sshd: subprocess.Popen[bytes] | None = None
    # A process that only sleeps in the node's namespaces, so that they outlive sshd (a stopped
    # sshd must not take the node's /tmp and hostname with it) and can be entered with nsenter.
    holder: subprocess.Popen[bytes] | None = None
    node_dir: Path = field(default=Path())  # its sshd config, host key and logs, in the lab root


NodeRef: TypeAlias = LabNode | str | int


class MakeLab(Protocol):
    """The `make_lab` fixture: builds and starts a lab, stopped at teardown."""

    def __call__(self, n_nodes: int, node_envs: Mapping[int, Path] | None = None) -> LabCluster: ...


@dataclass
class _Shaping:
    """The throttles on one node: its whole link, and per-peer links."""

    node_mbit: float | None = None
    peer_mbit: dict[int, float] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Small helpers around the system tools.


def _run(
    argv: Sequence[str], *, timeout_s: float = 30, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Runs a setup command; raises LabError with its stderr if it fails."""
    result = subprocess.run(
        list(argv),
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    if result.returncode != 0:
        err = result.stderr.decode(errors="replace").strip()
        raise LabError(f"{shlex.join(argv)} failed ({result.returncode}): {err}")
    return result


def _try(argv: Sequence[str]) -> bool:
    """Runs a teardown command whose failure (already gone) is fine."""
    result = subprocess.run(
        list(argv), stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False
    )
    return result.returncode == 0


@cache
def missing_requirements() -> tuple[str, ...]:
    """What this machine lacks to build a lab (empty when it can)."""
    missing = [] if os.geteuid() == 0 else ["root (euid 0)"]
    missing += [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if not os.access(SSHD, os.X_OK):
        missing.append(SSHD)
    if shutil.which("ip") is not None and os.geteuid() == 0:
        probe = subprocess.run(["ip", "netns", "list"], capture_output=True, check=False)
        if probe.returncode != 0:
            missing.append("a working `ip netns`")
    return tuple(missing)


def _netns_names() -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout.decode()
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _link_names() -> list[str]:
    out = _run(["ip", "-o", "link", "show"]).stdout.decode()
    # "7: pflab3v1@if2: <...>": the name is the second field, up to '@'
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def _netns_pids(netns: str) -> list[int]:
    result = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, check=False)
    return [int(tok) for tok in result.stdout.split()] if result.returncode == 0 else []


def _cmdline(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks: tells a live owner from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])


def _parent_pids() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    return parents


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for child, parent in _parent_pids().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _kill(pids: Sequence[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _kill_netns_processes(netns: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while (pids := _netns_pids(netns)) and time.monotonic() < deadline:
        _kill(pids)
        time.sleep(0.02)


def _reap(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _bridge_netfilter_active() -> bool:
    """Whether bridged frames go through the root namespace's iptables (br_netfilter)."""
    flag = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
    return flag.exists() and flag.read_text().strip() == "1"


# Linux keeps one ARP (and one NDP) table for all network namespaces, and its garbage
# collection limits count every namespace's entries together: nodes that all talk to each
# other need about n^2 entries, and past gc_thresh3 (1024 by default) new neighbours are
# refused, so some pairs of lab nodes could not reach each other at all. Real nodes each
# have their own kernel; the lab raises the shared limits (never lowers them).
_NEIGHBOUR_LIMITS = {"gc_thresh1": 4096, "gc_thresh2": 16384, "gc_thresh3": 32768}


def _raise_neighbour_limits() -> None:
    for family in ("ipv4", "ipv6"):
        for name, wanted in _NEIGHBOUR_LIMITS.items():
            path = Path(f"/proc/sys/net/{family}/neigh/default/{name}")
            with contextlib.suppress(OSError, ValueError):
                if int(path.read_text()) < wanted:
                    path.write_text(str(wanted))


def _forward_rule(bridge: str) -> list[str]:
    # With br_netfilter loaded, a FORWARD policy of DROP (Docker sets one) would drop
    # traffic between nodes; this rule lets the lab's own bridge through.
    return ["FORWARD", "-i", bridge, "-o", bridge, "-m", "comment", "--comment", bridge,
            "-j", "ACCEPT"]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Allocation of lab indices, and cleanup of labs whose owner died.


@contextlib.contextmanager
def _alloc_lock() -> Iterator[None]:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    CLAIMS_DIR.mkdir(exist_ok=True)
    with LOCK_PATH.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _claim_path(k: int) -> Path:
    return CLAIMS_DIR / f"{k}.json"


def _read_claims() -> dict[int, dict[str, object]]:
    claims: dict[int, dict[str, object]] = {}
    for path in CLAIMS_DIR.glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            claims[int(path.stem)] = json.loads(path.read_text())
    return claims


def _owner_alive(claim: Mapping[str, object]) -> bool:
    pid, started = claim.get("pid"), claim.get("start_time")
    return isinstance(pid, int) and _start_time(pid) == started


def _indices_in_use_by_names() -> set[int]:
    names = _netns_names() + _link_names()
    return {int(m.group(1)) for name in names if (m := _NAME_RE.match(name))}


def _teardown_index(k: int, root: Path | None) -> None:
    """Removes everything of lab k: its processes, netns, veths, bridge, rule, files, claim."""
    netns_re = re.compile(rf"^pflab{k}n\d+$")
    veth_re = re.compile(rf"^pflab{k}v\d+$")
    namespaces = [ns for ns in _netns_names() if netns_re.match(ns)]
    for ns in namespaces:
        _kill_netns_processes(ns)
    for link in _link_names():
        if veth_re.match(link):
            _try(["ip", "link", "del", link])
    for ns in namespaces:
        _try(["ip", "netns", "del", ns])
    bridges = [f"pflab{k}", *(link for link in _link_names() if re.match(rf"^pflab{k}r\d+$", link))]
    for bridge in bridges:
        _try(["ip", "link", "del", bridge])
        if shutil.which("iptables") is not None:
            while _try(["iptables", "-w", "-D", *_forward_rule(bridge)]):
                pass
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)
    _claim_path(k).unlink(missing_ok=True)


def _cleanup_stale_locked() -> list[int]:
    cleaned = []
    claims = _read_claims()
    for k, claim in claims.items():
        if not _owner_alive(claim):
            root = claim.get("root")
            _teardown_index(k, Path(root) if isinstance(root, str) else None)
            cleaned.append(k)
    # A claim is written before anything is created and removed after everything is gone,
    # so lab resources without a claim were left by a lab that died half way.
    for k in sorted(_indices_in_use_by_names() - set(claims)):
        _teardown_index(k, None)
        cleaned.append(k)
    return sorted(cleaned)


def cleanup_stale() -> list[int]:
    """Removes labs left behind by dead processes; returns the lab indices removed."""
    if missing_requirements():
        return []
    with _alloc_lock():
        return _cleanup_stale_locked()


def _host_networks() -> list[ipaddress.IPv4Network]:
    out = _run(["ip", "-o", "-4", "addr", "show"]).stdout.decode()
    nets = []
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            nets.append(ipaddress.IPv4Interface(fields[fields.index("inet") + 1]).network)
    return nets


def _free_index() -> int:
    taken = set(_read_claims()) | _indices_in_use_by_names()
    host_nets = _host_networks()
    for k in range(1, MAX_LABS + 1):
        subnet = ipaddress.IPv4Network(f"10.199.{k}.0/24")
        if k not in taken and not any(subnet.overlaps(net) for net in host_nets):
            return k
    raise LabError(f"no free lab index: {MAX_LABS} labs exist")


def _write_claim(k: int, root: Path) -> None:
    claim = {"pid": os.getpid(), "start_time": _start_time(os.getpid()), "root": str(root)}
    tmp = _claim_path(k).with_suffix(".tmp")
    tmp.write_text(json.dumps(claim))
    tmp.replace(_claim_path(k))


def _prepare_root(root: Path | None, k: int) -> Path:
    if root is None:
        root = STATE_DIR / f"lab{k}-{secrets.token_hex(4)}"
    root = root.absolute()
    if root == Path("/tmp") or Path("/tmp") in root.parents:
        raise LabError(f"lab root {root} is under /tmp, which every node hides")
    if root.exists() and any(root.iterdir()):
        raise LabError(f"lab root {root} is not empty")
    root.mkdir(parents=True, exist_ok=True)
    return root


# Labs still running when the interpreter exits are stopped then (an interrupted test run).
_RUNNING: set[LabCluster] = set()


@atexit.register
def _stop_running_labs() -> None:
    for lab in list(_RUNNING):
        if lab.owner_pid == os.getpid():  # not in a forked child that inherited the set
            lab.stop()


# ---------------------------------------------------------------------------------------------
# The cluster.


class LabCluster:
    """n nodes on a bridge, each with its own sshd; a context manager (starts, then stops)."""

    def __init__(
        self,
        n_nodes: int,
        *,
        env: Path,
        node_envs: Mapping[int, Path] | None = None,
        root: Path | None = None,
    ) -> None:
        if not 1 <= n_nodes <= MAX_NODES:
            raise ValueError(f"n_nodes must be in 1..{MAX_NODES}, not {n_nodes}")
        node_envs = dict(node_envs or {})
        if bad := sorted(set(node_envs) - set(range(1, n_nodes + 1))):
            raise ValueError(f"node_envs names nodes that do not exist: {bad}")
        self.n_nodes = n_nodes
        self._base_env = Path(env).absolute()
        self._envs = {i: Path(node_envs.get(i, env)).absolute() for i in range(1, n_nodes + 1)}
        self._root_arg = root
        self._k: int | None = None
        self._root: Path | None = None
        self.nodes: list[LabNode] = []
        self._shaping: dict[int, _Shaping] = {}
        self._cpu_groups: list[Path] = []
        self._spawned: list[subprocess.Popen[bytes]] = []
        self._session_env: dict[int, dict[str, str]] = {}
        self.owner_pid = os.getpid()

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> LabCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> LabCluster:
        if self._k is not None:
            raise LabError("this lab is already started")
        if missing := missing_requirements():
            raise LabError("cannot build a lab cluster here; missing: " + ", ".join(missing))
        for i, env in self._envs.items():
            if not (env / "bin" / "python").exists():
                raise LabError(f"environment for node{i} has no bin/python: {env}")
        self.owner_pid = os.getpid()
        _RUNNING.add(self)
        try:
            _raise_neighbour_limits()
            self._allocate()
            self._write_files()
            for node in self.nodes:
                self._create_node_network(node)
            for node in self.nodes:
                self._launch_holder(node)
            for node in self.nodes:
                self._await_holder(node)
                node.sshd = self._launch_sshd(node)
            self._await_sshd(self.nodes)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kills every process in every node, deletes netns, veths, bridge and files."""
        _RUNNING.discard(self)
        if self._k is None:
            return
        k, root = self._k, self._root
        self._k = None
        _teardown_index(k, root)
        for proc in self._spawned:
            _reap(proc)
        self._spawned.clear()
        for node in self.nodes:
            _reap(node.sshd)
            _reap(node.holder)
            node.sshd = node.holder = None
        self._shaping.clear()
        for group in self._cpu_groups:  # empty once the node's processes are gone
            with contextlib.suppress(OSError):
                group.rmdir()
        self._cpu_groups.clear()

    def _allocate(self) -> None:
        # Under the lock: pick the lowest free index and claim it before creating anything,
        # so that concurrent labs (other test processes, a benchmark) never collide.
        with _alloc_lock():
            _cleanup_stale_locked()
            k = _free_index()
            root = _prepare_root(self._root_arg, k)
            _write_claim(k, root)
            self._k, self._root = k, root
            bridge = self.bridge
            _run(["ip", "link", "add", bridge, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.bridge_address}/24", "dev", bridge])
        _run(["ip", "link", "set", bridge, "up"])
        if _bridge_netfilter_active():
            _run(["iptables", "-w", "-I", *_forward_rule(bridge)])
        self.nodes = [
            LabNode(
                index=i,
                name=f"node{i}",
                address=f"10.199.{k}.{FIRST_HOST + i - 1}",
                netns=f"pflab{k}n{i}",
                veth_host=f"pflab{k}v{i}",
                env=self._envs[i],
                node_dir=root / f"node{i}",
            )
            for i in range(1, self.n_nodes + 1)
        ]

    def _write_files(self) -> None:
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "pflab-client",
              "-f", str(self.key_path)])  # fmt: skip
        self._authorized_keys.write_bytes(self.key_path.with_suffix(".pub").read_bytes())
        self._etc_hosts.write_text(self._etc_hosts_text())
        self._empty_file.write_text("")
        self._resolv_conf.write_text(RESOLV_CONF)
        known = []
        for node in self.nodes:
            node.node_dir.mkdir()
            host_key = node.node_dir / "ssh_host_ed25519_key"
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node.name,
                  "-f", str(host_key)])  # fmt: skip
            key_type, key_b64 = host_key.with_suffix(".pub").read_text().split()[:2]
            known.append(f"{node.address} {key_type} {key_b64}\n")
            (node.node_dir / "sshd_config").write_text(self._sshd_config(node, host_key))
        self.known_hosts_path.write_text("".join(known))
        Path(ENV_MOUNT).mkdir(parents=True, exist_ok=True)  # the mount points, left empty
        Path(BASE_MOUNT).mkdir(parents=True, exist_ok=True)
        Path(CHECKOUT_STASH).mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation dir

    def _etc_hosts_text(self) -> str:
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{node.address}\t{node.name}" for node in self.nodes]
        return "\n".join(lines) + "\n"

    def _sshd_config(self, node: LabNode, host_key: Path) -> str:
        return "\n".join([
            f"Port {SSH_PORT}",
            f"ListenAddress {node.address}",
            f"HostKey {host_key}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            f"AuthorizedKeysFile {self._authorized_keys}",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",  # the lab's files are not in root's home
            "PidFile none",
            "LogLevel ERROR",
            "PrintMotd no",
            "Subsystem sftp internal-sftp",
            *self._set_env(node),
            "",
        ])  # fmt: skip

    def _set_env(self, node: LabNode) -> list[str]:
        extra = self._session_env.get(node.index)
        if not extra:
            return []
        return ["SetEnv " + " ".join(shlex.quote(f"{k}={v}") for k, v in extra.items())]

    def _create_node_network(self, node: LabNode) -> None:
        ns = ["ip", "-n", node.netns]
        _run(["ip", "netns", "add", node.netns])
        _run(["ip", "link", "add", node.veth_host, "type", "veth",
              "peer", "name", "eth0", "netns", node.netns])  # fmt: skip
        _run(["ip", "link", "set", node.veth_host, "master", self.bridge, "up"])
        _run([*ns, "addr", "add", f"{node.address}/24", "dev", "eth0"])
        _run([*ns, "link", "set", "lo", "up"])
        _run([*ns, "link", "set", "eth0", "up"])
        _run([*ns, "route", "add", "default", "via", self.bridge_address])

    def _launch_holder(self, node: LabNode) -> None:
        # The node's own mount and UTS namespaces: its env at ENV_MOUNT, a private /tmp and
        # /dev/shm (so leftovers can be checked per node), the lab's /etc/hosts, its hostname.
        q = shlex.quote
        script = "; ".join([
            "set -e",
            f"mount --bind {q(str(node.env))} {ENV_MOUNT}",
            f"mount --bind {q(str(self._base_env))} {BASE_MOUNT}",
            *([f"mount --bind {q(str(CHECKOUT))} {CHECKOUT_STASH}"] if CHECKOUT_HIDDEN else []),
            # A size cap, not memory set aside: a tmpfs without one gets half the machine's memory,
            # which on a small machine is less than the scratch space a job asks for by default.
            "mount -t tmpfs -o mode=1777,size=64g pflab-tmp /tmp",
            *(
                [f"mkdir -p {q(str(CHECKOUT))}", f"mount --bind {CHECKOUT_STASH} {q(str(CHECKOUT))}"]
                if CHECKOUT_HIDDEN
                else []
            ),
            "mount -t tmpfs -o mode=1777 pflab-shm /dev/shm",
            f"mount --bind {q(str(self._etc_hosts))} /etc/hosts",
            *self._no_dns(),
            f"hostname {node.name}",
            *self._clean_dotfiles(),
            "exec sleep infinity",
        ])  # fmt: skip
        argv = ["ip", "netns", "exec", node.netns,
                "unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script]  # fmt: skip
        node.holder = self._popen_logged(argv, node.node_dir / "holder.log")

    def _no_dns(self) -> list[str]:
        # The nodes cannot reach the machine's DNS servers: a lookup of a name that is not in
        # the lab's /etc/hosts would hang for 10 s on timeouts instead of failing at once.
        if not Path("/etc/resolv.conf").exists():
            return []
        return [f"mount --bind {shlex.quote(str(self._resolv_conf))} /etc/resolv.conf"]

    def _clean_dotfiles(self) -> list[str]:
        # A node is a fresh machine: the shell startup files of the machine the lab runs on
        # (pyenv, cargo, ...) would slow every SSH command and leak into the nodes' PATH.
        empty = shlex.quote(str(self._empty_file))
        return [f"mount --bind {empty} {dotfile}" for dotfile in SHELL_DOTFILES
                if Path(dotfile).is_file()]  # fmt: skip

    def _await_holder(self, node: LabNode) -> None:
        assert node.holder is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while (_cmdline(node.holder.pid) or "").split(" ")[0] not in ("sleep", "/usr/bin/sleep"):
            if node.holder.poll() is not None or time.monotonic() > deadline:
                log = (node.node_dir / "holder.log").read_text(errors="replace")
                raise LabError(f"{node.name}: could not set up its namespaces:\n{log}")
            time.sleep(0.01)

    def _launch_sshd(self, node: LabNode) -> subprocess.Popen[bytes]:
        argv = [*self._nsenter(node), SSHD, "-D", "-e", "-f", str(node.node_dir / "sshd_config")]
        return self._popen_logged(argv, node.node_dir / "sshd.log")

    @staticmethod
    def _popen_logged(argv: Sequence[str], log_path: Path) -> subprocess.Popen[bytes]:
        with log_path.open("ab") as log:
            # Its own session: a Ctrl-C at the terminal goes to the test run, not to the nodes.
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _await_sshd(self, nodes: Sequence[LabNode]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        for node in nodes:
            while not _answers_ssh(node.address, SSH_PORT, timeout_s=1):
                exited = node.sshd is None or node.sshd.poll() is not None
                if exited or time.monotonic() > deadline:
                    log = (node.node_dir / "sshd.log").read_text(errors="replace")
                    state = "exited" if exited else f"not answering after {START_TIMEOUT_S:g} s"
                    raise LabError(f"{node.name}: sshd {state}; its stderr:\n{log}")
                time.sleep(0.02)
        # Each probe above made sshd fork a session process (it sent the banner, so it exists
        # by now); let those end, so that a fresh lab shows no processes.
        for node in nodes:
            assert node.sshd is not None
            while _descendants(node.sshd.pid) and time.monotonic() < deadline:
                time.sleep(0.01)

    # -- facts -----------------------------------------------------------------------------

    def _started(self) -> tuple[int, Path]:
        if self._k is None or self._root is None:
            raise LabError("the lab is not started")
        return self._k, self._root

    @property
    def index(self) -> int:
        """The lab's index k: bridge pflabK, subnet 10.199.K.0/24."""
        return self._started()[0]

    @property
    def root(self) -> Path:
        """The directory holding the lab's keys, configs and logs."""
        return self._started()[1]

    @property
    def bridge(self) -> str:
        return f"pflab{self.index}"

    @property
    def bridge_address(self) -> str:
        """The root namespace's address on the bridge (where the controller connects from)."""
        return f"10.199.{self.index}.1"

    @property
    def key_path(self) -> Path:
        """Client private key (ed25519, no passphrase), authorised on every node for root."""
        return self.root / "id_ed25519"

    @property
    def known_hosts_path(self) -> Path:
        """Every node's host key, keyed by address."""
        return self.root / "known_hosts"

    @property
    def _authorized_keys(self) -> Path:
        return self.root / "authorized_keys"

    @property
    def _etc_hosts(self) -> Path:
        return self.root / "hosts"

    @property
    def _empty_file(self) -> Path:
        return self.root / "empty"

    @property
    def _resolv_conf(self) -> Path:
        return self.root / "resolv.conf"

    def node(self, name_or_index: NodeRef) -> LabNode:
        """A node by LabNode, 1-based index, name or address."""
        if isinstance(name_or_index, LabNode):
            return name_or_index
        for node in self.nodes:
            if name_or_index in (node.index, node.name, node.address):
                return node
        raise KeyError(f"no node {name_or_index!r} in this lab")

    def hosts_file(
        self,
        path: Path,
        nodes: Sequence[NodeRef] | None = None,
        *,
        extra_lines: Sequence[str] = (),
        slots: int | None = None,
    ) -> Path:
        """Writes a preflight hosts file: root@ADDRESS per node (all by default, with ``slots=N``
        when given), then extras."""
        chosen = self.nodes if nodes is None else [self.node(ref) for ref in nodes]
        suffix = f" slots={slots}" if slots else ""
        lines = [f"root@{node.address}{suffix}" for node in chosen] + list(extra_lines)
        path.write_text("".join(line + "\n" for line in lines))
        return path

    def unused_address(self) -> str:
        """An address in the lab subnet where nothing answers."""
        return f"10.199.{self.index}.{UNUSED_HOST}"

    def ssh_argv(
        self, node: NodeRef, command: Sequence[str] = (), *, connect_timeout_s: int = 5
    ) -> list[str]:
        """An OpenSSH client command line to the node, trusting only the lab's host keys."""
        return [
            "ssh", "-F", "/dev/null", "-i", str(self.key_path),
            "-o", f"UserKnownHostsFile={self.known_hosts_path}",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={connect_timeout_s}", "-o", "LogLevel=ERROR",
            f"root@{self.node(node).address}", *command,
        ]  # fmt: skip

    # -- running things inside a node -------------------------------------------------------

    def _nsenter(self, node: LabNode) -> list[str]:
        if node.holder is None or node.holder.poll() is not None:
            raise LabError(f"{node.name} is not running")
        return ["nsenter", "-t", str(node.holder.pid), "-n", "-m", "-u", "--"]

    @staticmethod
    def _node_environ(extra: Mapping[str, str] | None) -> dict[str, str]:
        # What an SSH session would have, not the test process's environment.
        return {"PATH": NODE_PATH, "HOME": "/root", "LANG": "C.UTF-8", **(extra or {})}

    def exec(
        self,
        node: NodeRef,
        argv: Sequence[str],
        *,
        timeout_s: float = 30,
        check: bool = True,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Runs argv in the node's net, mount and UTS namespaces (its env, /tmp, hostname)."""
        target = self.node(node)
        result = subprocess.run(
            [*self._nsenter(target), *argv],
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
            env=self._node_environ(env),
            check=False,
        )
        if check and result.returncode != 0:
            raise NodeCommandError(target.name, result)
        return result

    def spawn(
        self, node: NodeRef, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Starts argv in the node in the background (stdout/stderr piped); stop() kills it."""
        proc = subprocess.Popen(
            [*self._nsenter(self.node(node)), *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._node_environ(env),
            start_new_session=True,
        )
        self._spawned.append(proc)
        return proc

    def processes(self, node: NodeRef) -> list[tuple[int, str]]:
        """(pid, cmdline) of every process in the node except the lab's own (sshd listener,
        namespace holder): to assert that nothing was left behind."""
        target = self.node(node)
        own = {proc.pid for proc in (target.sshd, target.holder) if proc is not None}
        found = []
        for pid in _netns_pids(target.netns):
            cmdline = _cmdline(pid)
            if pid not in own and cmdline is not None:
                found.append((pid, cmdline))
        return found

    def job_ranks(self, node: NodeRef) -> list[int]:
        """Pids of the node's running job ranks (they name themselves ``preflight-rank`` in
        /proc/PID/comm): the job has started there."""
        target = self.node(node)
        ranks = []
        for pid in _netns_pids(target.netns):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith(RANK_COMM):
                ranks.append(pid)
        return ranks

    def when_the_job_runs(
        self, node: NodeRef, fault: Callable[[], None], *, after_s: float = 1.0, timeout_s: float = 90
    ) -> threading.Thread:
        """Start a thread that waits for the job's ranks on ``node``, lets them run ``after_s``
        (well into the job: the group formed, the sweep running), then runs ``fault``."""

        def wait_then_fault() -> None:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self.job_ranks(node):
                    time.sleep(after_s)
                    fault()
                    return
                time.sleep(0.2)

        thread = threading.Thread(target=wait_then_fault, daemon=True)
        thread.start()
        return thread

    def lingering_processes(self, node: NodeRef, *, grace_s: float = 5.0) -> list[tuple[int, str]]:
        """processes(node), once it is empty or grace_s has passed: an SSH session's processes
        take a moment to exit after its client has gone."""
        deadline = time.monotonic() + grace_s
        while (found := self.processes(node)) and time.monotonic() < deadline:
            time.sleep(0.02)
        return found

    def tmp_entries(self, node: NodeRef) -> list[str]:
        """The names in the node's private /tmp."""
        out = self.exec(node, ["find", "/tmp", "-mindepth", "1", "-maxdepth", "1",
                               "-printf", "%f\\0"]).stdout  # fmt: skip
        names = sorted(name.decode(errors="replace") for name in out.split(b"\0") if name)
        # A checkout under /tmp, mounted back in the node, is the lab's, not a leftover.
        checkout = CHECKOUT.relative_to("/tmp").parts[0] if CHECKOUT_HIDDEN else None
        return [name for name in names if name != checkout]

    # -- faults ------------------------------------------------------------------------------

    def freeze(self, node: NodeRef) -> list[int]:
        """Stops (SIGSTOP) every process of the node but the lab's own (sshd listener, namespace
        holder): whatever preflight runs there and the SSH sessions that carry it. The node's
        address still answers (the kernel's TCP goes on), as a hung host's does. Returns the
        pids, for :meth:`thaw`."""
        stopped = []
        for pid, _ in self.processes(node):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        return stopped

    @staticmethod
    def thaw(pids: Sequence[int]) -> None:
        """Lets the processes :meth:`freeze` stopped go on."""
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def throttle(self, node: NodeRef, rate_mbit: float) -> None:
        """Limits the node's link, both directions, to rate_mbit."""
        target = self.node(node)
        _check_rate(rate_mbit)
        self._shaping.setdefault(target.index, _Shaping()).node_mbit = rate_mbit
        self._apply_shaping(target)

    def throttle_link(self, a: NodeRef, b: NodeRef, rate_mbit: float) -> None:
        """Limits only the traffic between a and b (both directions) to rate_mbit."""
        node_a, node_b = self.node(a), self.node(b)
        if node_a is node_b:
            raise ValueError("throttle_link needs two different nodes")
        _check_rate(rate_mbit)
        for src, dst in ((node_a, node_b), (node_b, node_a)):
            self._shaping.setdefault(src.index, _Shaping()).peer_mbit[dst.index] = rate_mbit
            self._apply_shaping(src)

    def unthrottle(self, node: NodeRef) -> None:
        """Removes every throttle on the node, including those on its links to peers."""
        target = self.node(node)
        self._shaping.pop(target.index, None)
        self._apply_shaping(target)
        for index, shaping in self._shaping.items():
            if shaping.peer_mbit.pop(target.index, None) is not None:
                self._apply_shaping(self.node(index))

    def _apply_shaping(self, node: LabNode) -> None:
        # Rebuilt from scratch each time: simpler than editing classes in place.
        shaping = self._shaping.get(node.index, _Shaping())
        ns_tc = ["tc", "-n", node.netns]
        _try([*ns_tc, "qdisc", "del", "dev", "eth0", "root"])
        _try(["tc", "qdisc", "del", "dev", node.veth_host, "root"])
        if shaping.node_mbit is not None:
            # Traffic into the node leaves the bridge through the host-side veth.
            _tc_htb(["tc"], node.veth_host, shaping.node_mbit, {})
        if shaping.node_mbit is not None or shaping.peer_mbit:
            peers = {self.node(i).address: rate for i, rate in shaping.peer_mbit.items()}
            _tc_htb(ns_tc, "eth0", shaping.node_mbit, peers)

    def block_port(
        self,
        node: NodeRef,
        port: int,
        *,
        action: Literal["drop", "reject"] = "drop",
        from_node: NodeRef | None = None,
    ) -> None:
        """Blocks TCP connections to the node's port (from one node only, with from_node):
        drop makes connects time out, reject refuses them."""
        target = self.node(node)
        rule = ["INPUT", "-p", "tcp", "--dport", str(port)]
        if from_node is not None:
            rule += ["-s", self.node(from_node).address]
        if action == "drop":
            rule += ["-j", "DROP"]
        else:
            rule += ["-j", "REJECT", "--reject-with", "tcp-reset"]
        _run(["ip", "netns", "exec", target.netns, "iptables", "-w", "-A", *rule])

    def unblock_ports(self, node: NodeRef) -> None:
        _run(["ip", "netns", "exec", self.node(node).netns, "iptables", "-w", "-F", "INPUT"])

    def cut(self, node: NodeRef) -> None:
        """Takes the node's link down: it vanishes from the network (packets are lost)."""
        _run(["ip", "link", "set", self.node(node).veth_host, "down"])

    def restore(self, node: NodeRef) -> None:
        _run(["ip", "link", "set", self.node(node).veth_host, "up"])

    def set_session_env(self, node: NodeRef, env: Mapping[str, str]) -> None:
        """Sets variables in every SSH session of the node (sshd's SetEnv), as a node's own
        environment would: its sshd is restarted with them."""
        target = self.node(node)
        self._session_env[target.index] = dict(env)
        host_key = target.node_dir / "ssh_host_ed25519_key"
        (target.node_dir / "sshd_config").write_text(self._sshd_config(target, host_key))
        self.stop_sshd(target)
        self.start_sshd(target)

    def node_file(self, node: NodeRef, path: str, text: str) -> None:
        """Puts a file with ``text`` at ``path`` in the node only (a bind mount in its own mount
        namespace): its own /etc/hosts, say. ``path`` must exist."""
        target = self.node(node)
        source = target.node_dir / ("file-" + path.strip("/").replace("/", "-"))
        source.write_text(text)
        self.exec(target, ["mount", "--bind", str(source), path])

    def make_gpu_node(self, node: NodeRef, gpus: GpuNode) -> None:
        """Make the node look like a GPU node to the facts probe (tests/lab/gpu.py)."""
        target = self.node(node)
        commands = install_gpu_node(target.node_dir / "gpu", gpus, target.index, NODE_PYTHON)
        self.exec(target, ["sh", "-c", " && ".join(commands)])

    def throttle_loopback(self, node: NodeRef, rate_mbit: float) -> None:
        """Limits the node's loopback to rate_mbit: the stand-in for a slow path inside a node
        (processes of one node talk over it, even to the node's own eth0 address)."""
        _check_rate(rate_mbit)
        _tc_htb(["tc", "-n", self.node(node).netns], "lo", rate_mbit, {})

    def add_rails(self, count: int) -> list[str]:
        """Gives every node ``count`` more interfaces, ``rail1``.., each on a bridge of its own
        (subnet 10.(199-j).K.0/24): the stand-in for a node's NICs on a rail-optimised fabric.
        Returns the interface names."""
        k = self.index
        names = []
        for j in range(1, count + 1):
            bridge, name = f"pflab{k}r{j}", f"rail{j}"
            _run(["ip", "link", "add", bridge, "type", "bridge"])
            _run(["ip", "link", "set", bridge, "up"])
            if _bridge_netfilter_active():
                _run(["iptables", "-w", "-I", *_forward_rule(bridge)])
            for node in self.nodes:
                host_side = f"{node.veth_host}r{j}"
                address = f"10.{199 - j}.{k}.{FIRST_HOST + node.index - 1}/24"
                _run(["ip", "link", "add", host_side, "type", "veth",
                      "peer", "name", name, "netns", node.netns])  # fmt: skip
                _run(["ip", "link", "set", host_side, "master", bridge, "up"])
                _run(["ip", "-n", node.netns, "addr", "add", address, "dev", name])
                _run(["ip", "-n", node.netns, "link", "set", name, "up"])
            names.append(name)
        return names

    def throttle_rail(self, node: NodeRef, rail: str, rate_mbit: float) -> None:
        """Limits one of the node's rails (an interface from :meth:`add_rails`), both directions."""
        target = self.node(node)
        _check_rate(rate_mbit)
        host_side = f"{target.veth_host}r{int(rail.removeprefix('rail'))}"
        _tc_htb(["tc", "-n", target.netns], rail, rate_mbit, {})
        _tc_htb(["tc"], host_side, rate_mbit, {})

    def limit_cpu(self, node: NodeRef, fraction: float) -> None:
        """Limits every process the node's sshd starts from now on (the sessions, and what they
        run) to ``fraction`` of one core: a cgroup v1 cpu quota, the stand-in for a slow GPU."""
        target = self.node(node)
        if not 0 < fraction <= 1 or target.sshd is None:
            raise ValueError(f"fraction must be in (0, 1] and {target.name}'s sshd running")
        group = Path(CPU_CGROUP) / f"pflab{self.index}n{target.index}"
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(max(1000, round(fraction * CFS_PERIOD_US))))
        (group / "cgroup.procs").write_text(str(target.sshd.pid))
        self._cpu_groups.append(group)

    def outside_cpu_limit(self, node: NodeRef) -> list[tuple[int, str, str]]:
        """(pid, cmdline, its cpu cgroup) of each live process of a node held by :meth:`limit_cpu`
        that is not in the node's group: a process that escaped the quota. A process that is
        exiting is left out: the kernel moves an exiting task to the root group, and a task can
        begin to exit between the listing and the reading of its group, so its exit flag is read
        after its group."""
        target = self.node(node)
        group = f"/pflab{self.index}n{target.index}"
        return [
            (pid, command, found)
            for pid, command in self.processes(target)
            if command and (found := _cpu_cgroup(pid)) is not None and found != group and not _exiting(pid)
        ]

    def stop_sshd(self, node: NodeRef) -> None:
        """Kills the node's sshd listener and its sessions; the node itself stays up."""
        target = self.node(node)
        if target.sshd is None:
            return
        in_node = set(_netns_pids(target.netns))
        _kill([pid for pid in _descendants(target.sshd.pid) if pid in in_node])
        _reap(target.sshd)
        target.sshd = None

    def start_sshd(self, node: NodeRef) -> None:
        """Starts the node's sshd again after stop_sshd."""
        target = self.node(node)
        if target.sshd is not None and target.sshd.poll() is None:
            return
        target.sshd = self._launch_sshd(target)
        self._await_sshd([target])


_PF_EXITING = 0x4  # include/linux/sched.h: set first thing in do_exit(), before cgroup_exit()


def _exiting(pid: int) -> bool:
    """Whether a process is exiting or gone (PF_EXITING in /proc/PID/stat's flags, field 9)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] in ("Z", "X") or bool(int(fields[6]) & _PF_EXITING)


def _cpu_cgroup(pid: int) -> str | None:
    """The cgroup v1 ``cpu`` group a process is in ("/pflab3n2"); None when it is gone."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return None


def _check_rate(rate_mbit: float) -> None:
    if not rate_mbit > 0:
        raise ValueError(f"rate_mbit must be positive, not {rate_mbit}")


def _kbit(rate_mbit: float) -> str:
    return f"{max(1, round(rate_mbit * 1000))}kbit"


def _tc_htb(tc: list[str], dev: str, all_mbit: float | None, peers: Mapping[str, float]) -> None:
    """An htb root on dev: all traffic capped at all_mbit (if given), and traffic to each peer
    address capped at its own rate (within the overall cap)."""
    # Unclassified traffic goes to class 1:2 when there is an overall cap, else unshaped.
    default = "2" if all_mbit is not None else "0"
    _run([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", default])
    parent = "1:"
    if all_mbit is not None:
        rate = _kbit(all_mbit)
        _run([*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1",
              "htb", "rate", rate, "ceil", rate])  # fmt: skip
        _run([*tc, "class", "add", "dev", dev, "parent", "1:1", "classid", "1:2",
              "htb", "rate", rate, "ceil", rate])  # fmt: skip
        parent = "1:1"
    for n, (address, peer_mbit) in enumerate(sorted(peers.items()), start=10):
        rate = _kbit(min(peer_mbit, all_mbit) if all_mbit is not None else peer_mbit)
        _run([*tc, "class", "add", "dev", dev, "parent", parent, "classid", f"1:{n}",
              "htb", "rate", rate, "ceil", rate])  # fmt: skip
        _run([*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
              "u32", "match", "ip", "dst", f"{address}/32", "flowid", f"1:{n}"])  # fmt: skip


def _answers_ssh(address: str, port: int, *, timeout_s: float) -> bool:
    """Whether an SSH server accepts a TCP connection there and sends its banner."""
    try:
        with socket.create_connection((address, port), timeout=timeout_s) as sock:
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False
