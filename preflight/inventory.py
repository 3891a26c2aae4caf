"""The inventory: which hosts to check and how to reach them.

Parses hosts files (``[user@]host[:port] [slots=N]``, ``[v6]:port``, hostlist ranges,
comments) and hostlist expressions, then resolves each name through ``ssh_config``.
Pure apart from reading the two files; every malformed line is an ``InputError``
naming ``file:line``.
"""

from __future__ import annotations

import getpass
import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import paramiko
from ClusterShell.NodeSet import NodeSet, NodeSetException

from preflight.errors import InputError

DEFAULT_SSH_PORT = 22
LOCAL_NAME = "localhost"

_USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# Host names as written, hostlist brackets allowed: letters, digits, '-', '.', '_', '[', ']', ','.
_HOSTPATTERN_RE = re.compile(r"^[A-Za-z0-9_.\-\[\],]+$")
_HOSTNAME_RE = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$")


@dataclass(frozen=True)
class HostSpec:
    """One host to check, as written (``name``) and as it will be reached."""

    name: str
    address: str
    user: str | None = None
    port: int = DEFAULT_SSH_PORT
    slots: int | None = None
    identity_files: tuple[str, ...] = ()
    proxy_jump: str | None = None
    source: str | None = None  # "hosts.txt:3", for messages
    local: bool = False

    @property
    def key_name(self) -> str:
        """How known_hosts keys this host: ``host`` on port 22, ``[host]:port`` otherwise."""
        if self.port == DEFAULT_SSH_PORT:
            return self.address
        return f"[{self.address}]:{self.port}"


@dataclass(frozen=True)
class _Entry:
    user: str | None
    hosts: tuple[str, ...]
    port: int | None
    slots: int | None


def local_host() -> HostSpec:
    """The embedded default: this machine, through the local transport."""
    return HostSpec(name=LOCAL_NAME, address=LOCAL_NAME, local=True, source="(local)")


def _parse_port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"port {text!r} is not a number from 1 to 65535")
    return int(text)


def _expand(pattern: str) -> tuple[str, ...]:
    if not _HOSTPATTERN_RE.match(pattern):
        raise ValueError(f"{pattern!r} is not a host name or hostlist expression")
    if "[" not in pattern and "]" not in pattern and "," not in pattern:
        if not _HOSTNAME_RE.match(pattern):
            raise ValueError(f"{pattern!r} is not a valid host name")
        return (pattern,)
    try:
        names = tuple(NodeSet(pattern))
    except NodeSetException as exc:
        raise ValueError(f"bad hostlist {pattern!r}: {exc}") from None
    if not names:
        raise ValueError(f"hostlist {pattern!r} names no host")
    for name in names:
        if not _HOSTNAME_RE.match(name):
            raise ValueError(f"hostlist {pattern!r} gives {name!r}, not a valid host name")
    return names


def _split_host_port(text: str) -> tuple[tuple[str, ...], int | None]:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port``, bare ``v6``, ``node[01-04]:2222``."""
    if text.startswith("["):
        end = text.find("]")
        inner = text[1:end] if end > 0 else ""
        if end > 0 and _is_ipv6(inner):
            rest = text[end + 1 :]
            if rest and not rest.startswith(":"):
                raise ValueError(f"unexpected {rest!r} after [{inner}]")
            return (inner,), (_parse_port(rest[1:]) if rest else None)
        raise ValueError(f"{text!r} is not an [IPv6] address")
    if text.count(":") > 1:
        if _is_ipv6(text):
            return (text,), None
        raise ValueError(f"{text!r} is not an address; write IPv6 with a port as [addr]:port")
    host, sep, port = text.partition(":")
    if not host:
        raise ValueError("missing host name")
    return _expand(host), (_parse_port(port) if sep else None)


def _is_ipv6(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv6Address)
    except ValueError:
        return False


def parse_line(line: str) -> _Entry | None:
    """One hosts-file line; ``None`` for blank lines and comments. Raises ValueError."""
    text = line.split("#", 1)[0].strip()
    if not text:
        return None
    first, *options = text.split()
    user: str | None = None
    if "@" in first:
        user, _, first = first.rpartition("@")
        if not _USER_RE.match(user):
            raise ValueError(f"{user!r} is not a valid user name")
    hosts, port = _split_host_port(first)
    slots: int | None = None
    for option in options:
        key, sep, value = option.partition("=")
        if key == "slots" and sep:
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"slots must be a whole number of at least 1, not {value!r}")
            slots = int(value)
        else:
            raise ValueError(f"unknown option {option!r} (expected slots=N)")
    return _Entry(user=user, hosts=hosts, port=port, slots=slots)


def _display_name(host: str, port: int | None) -> str:
    if port is None:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def load_ssh_config(path: Path | None) -> paramiko.SSHConfig | None:
    """The user's ssh_config, or ``None`` when there is none. ``Include`` is not followed."""
    if path is None or not path.exists():
        return None
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except (OSError, UnicodeDecodeError, ValueError, paramiko.ConfigParseError) as exc:
        raise InputError(f"cannot read ssh config: {exc}", path=str(path)) from None


def resolve(spec: HostSpec, config: paramiko.SSHConfig | None) -> HostSpec:
    """Apply ``HostName``, ``User``, ``Port``, ``IdentityFile`` and ``ProxyJump`` from ssh_config.

    What the hosts file says explicitly wins over ssh_config.
    """
    if config is None or spec.local:
        return spec
    found = config.lookup(spec.address)
    port = spec.port
    if spec.port == DEFAULT_SSH_PORT and "port" in found:
        try:
            port = _parse_port(str(found["port"]))
        except ValueError as exc:
            raise InputError(f"ssh config for {spec.name}: {exc}") from None
    proxy = found.get("proxyjump")
    return replace(
        spec,
        address=str(found.get("hostname", spec.address)),
        user=spec.user or found.get("user"),
        port=port,
        identity_files=spec.identity_files or tuple(found.get("identityfile", ())),
        proxy_jump=None if proxy in (None, "none") else str(proxy),
    )


def parse_hosts(lines: Iterable[str], *, source: str) -> list[HostSpec]:
    """Parse hosts-file lines; errors name ``source:line``. Duplicates are errors."""
    specs: list[HostSpec] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        try:
            entry = parse_line(line)
        except ValueError as exc:
            raise InputError(str(exc), path=source, line=number) from None
        if entry is None:
            continue
        for host in entry.hosts:
            name = _display_name(host, entry.port)
            if name in seen:
                raise InputError(
                    f"duplicate host {name} (first on line {seen[name]})", path=source, line=number
                )
            seen[name] = number
            specs.append(
                HostSpec(
                    name=name,
                    address=host,
                    user=entry.user,
                    port=entry.port or DEFAULT_SSH_PORT,
                    slots=entry.slots,
                    source=f"{source}:{number}",
                )
            )
    return specs


def read_hosts_file(path: Path) -> list[HostSpec]:
    try:
        # utf-8-sig: a byte-order mark, as some Windows editors write one, is not part of line 1.
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such hosts file", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read hosts file: {exc}", path=str(path)) from None
    specs = parse_hosts(text.splitlines(), source=str(path))
    if not specs:
        raise InputError("the hosts file names no host", path=str(path))
    return specs


def parse_nodelist(expression: str) -> list[HostSpec]:
    """A hostlist expression such as ``$SLURM_JOB_NODELIST`` (``gpu[01-16,20]``)."""
    try:
        names = _expand(expression.strip())
    except ValueError as exc:
        raise InputError(str(exc), path="--nodes") from None
    return [HostSpec(name=name, address=name, source="--nodes") for name in names]


def parse_jump(text: str) -> HostSpec:
    """A ProxyJump value, ``[user@]host[:port]`` (the first hop of a chain), as a host to reach."""
    first = text.split(",", 1)[0].strip()
    user, _, hostport = first.rpartition("@")
    host, _, port = hostport.partition(":")
    return HostSpec(
        name=host,
        address=host,
        user=user or None,
        port=int(port) if port.isdigit() else DEFAULT_SSH_PORT,
        source="ProxyJump",
    )


def jump_hosts(specs: Sequence[HostSpec], ssh_config: paramiko.SSHConfig | None) -> dict[str, HostSpec]:
    """Every ProxyJump the inventory uses, resolved through ssh_config like any host (an alias
    such as ``bastion`` gets its HostName, User, Port and IdentityFile)."""
    jumps: dict[str, HostSpec] = {}
    for spec in specs:
        if spec.proxy_jump and spec.proxy_jump not in jumps:
            jump = resolve(parse_jump(spec.proxy_jump), ssh_config)
            # A jump host's own ProxyJump (a chain) is not followed: one hop.
            jumps[spec.proxy_jump] = replace(jump, proxy_jump=None)
    return jumps


def build_inventory(specs: Sequence[HostSpec], ssh_config: paramiko.SSHConfig | None) -> list[HostSpec]:
    """Resolve every host through ssh_config and refuse two entries that reach one endpoint."""
    resolved = [resolve(spec, ssh_config) for spec in specs]
    endpoints: dict[tuple[str, int, str | None], HostSpec] = {}
    for spec in resolved:
        key = (spec.address, spec.port, spec.user)
        if key in endpoints:
            first = endpoints[key]
            raise InputError(
                f"{spec.source}: {spec.name} reaches the same node as {first.name} "
                f"({first.source}): {spec.address}:{spec.port}"
            )
        endpoints[key] = spec
    return resolved


def default_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "root"
