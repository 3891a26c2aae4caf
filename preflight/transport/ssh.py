"""The SSH transport: paramiko, strict host keys, explicit timeouts, nothing left running.

One ``SSHClient`` per host, never shared across threads. Host keys come from
known_hosts files parsed once per run (:class:`KnownHosts`); an unknown key is refused
unless the operator accepts new keys, and a changed key is always refused.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import random
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from preflight.deadline import Deadline
from preflight.inventory import HostSpec, default_user, parse_jump
from preflight.model import HostError
from preflight.stall import controller_stalls
from preflight.transport import (
    HostUnavailable,
    KeptOutput,
    RemoteProcess,
    Transport,
    split_pgid,
    wait_for_any,
    wrap_command,
)

# CBC ciphers and SHA-1/MD5 MACs are weak; paramiko >= 3.4 already drops SHA-1 key exchange
# and ssh-rsa signatures by default.
DISABLED_ALGORITHMS: dict[str, list[str]] = {
    "ciphers": ["3des-cbc", "aes128-cbc", "aes192-cbc", "aes256-cbc", "blowfish-cbc"],
    "macs": ["hmac-sha1", "hmac-md5", "hmac-sha1-96", "hmac-md5-96"],
    "kex": [
        "diffie-hellman-group1-sha1",
        "diffie-hellman-group14-sha1",
        "diffie-hellman-group-exchange-sha1",
    ],
}
# New handshakes at once through one jump host: below sshd's default MaxStartups (10).
JUMP_HANDSHAKES = 8
# Seconds between the keepalives sent on every connection, so that a dead one shows soon (a host's
# silence is named after the run's silence_s, 6 s by default: these come within it).
KEEPALIVE_S = 3
CONNECT_ATTEMPTS = 3
# A handshake that timed out is tried again, up to STALLED_ATTEMPTS times, when the controller was
# stalled for at least this share of it.
STALL_SHARE = 0.25
STALLED_ATTEMPTS = 3
_POLL_S = 0.05
# Seconds between two looks at a handshake's silence.
_HANDSHAKE_LOOK_S = 0.25


class _HeardSocket(socket.socket):
    """The TCP socket of a direct connection, keeping when it last received anything: a handshake
    whose host stopped answering is told from one that is only slow by its silence."""

    heard: float = 0.0
    silenced: bool = False

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        self.heard = time.monotonic()
        return data


class HandshakeSilent(Exception):
    """The host sent nothing for the run's silence_s while its connection was set up."""

    def __init__(self, silence_s: float) -> None:
        super().__init__(f"nothing heard for {silence_s:g} s")
        self.silence_s = silence_s


def _direct_socket(address: str, port: int, timeout_s: float) -> _HeardSocket:
    """A TCP connection to ``address`` (``socket.create_connection``), its descriptor taken over by
    a socket that keeps when it last heard the host."""
    plain = socket.create_connection((address, port), timeout=timeout_s)
    sock = _HeardSocket(plain.family, plain.type, plain.proto, fileno=plain.detach())
    sock.settimeout(timeout_s)
    sock.heard = time.monotonic()
    return sock


@contextlib.contextmanager
def _silence_ends(sock: _HeardSocket, silence_s: float) -> Iterator[None]:
    """While the block sets the connection up, a look every quarter second: once the host has sent
    nothing for ``silence_s`` (the controller's own stalls taken out), the socket is shut, which
    ends paramiko's wait at once, and marked ``silenced``."""
    done = threading.Event()

    def watch() -> None:
        stalls = controller_stalls()
        while not done.wait(_HANDSHAKE_LOOK_S):
            now = time.monotonic()
            if now - sock.heard - stalls.stalled_s(sock.heard, now) >= silence_s:
                sock.silenced = True
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                return

    watcher = threading.Thread(target=watch, name="handshake-silence", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's SHA256 fingerprint, ``ssh-ed25519 SHA256:...``."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


class KnownHosts:
    """known_hosts files parsed once per run and shared, read-only, by every host's client."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._keys = paramiko.HostKeys()
        self.paths = [p for p in paths if p.exists()]
        for path in self.paths:
            self._keys.load(str(path))

    @classmethod
    def default_paths(cls) -> list[Path]:
        return [Path("~/.ssh/known_hosts").expanduser(), Path("/etc/ssh/ssh_known_hosts")]

    def lookup(self, key_name: str) -> dict[str, paramiko.PKey]:
        found = self._keys.lookup(key_name)
        return dict(found) if found else {}


class HostKeyUnknown(paramiko.SSHException):
    def __init__(self, key_name: str, key: paramiko.PKey) -> None:
        super().__init__(f"{key_name} is not in known_hosts ({fingerprint(key)})")
        self.key_name = key_name
        self.key = key


@dataclass
class _NewKeyPolicy(paramiko.MissingHostKeyPolicy):
    accept_new: bool
    accepted: list[str] = field(default_factory=list)

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if not self.accept_new:
            raise HostKeyUnknown(hostname, key)
        self.accepted.append(fingerprint(key))


@dataclass
class SshSettings:
    """What every host's connection shares."""

    known_hosts: KnownHosts
    accept_new_host_keys: bool = False
    identity_files: tuple[str, ...] = ()
    connect_timeout_s: float = 10.0
    # Seconds a host may send nothing while its connection is set up (the run's silence_s).
    silence_s: float = 8.0
    default_user: str = field(default_factory=default_user)
    # ProxyJump targets, resolved through the same inventory rules.
    resolve_jump: dict[str, HostSpec] = field(default_factory=dict)
    _jump_limits: dict[str, threading.Semaphore] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def jump_limit(self, jump: str) -> threading.Semaphore:
        with self._lock:
            return self._jump_limits.setdefault(jump, threading.Semaphore(JUMP_HANDSHAKES))


def _classify(exc: BaseException, spec: HostSpec, timeout_s: float) -> HostError:
    where = f"{spec.address}:{spec.port}"
    if isinstance(exc, paramiko.BadHostKeyException):
        return HostError(
            "host_key_changed",
            f"host key for {spec.key_name} CHANGED: got {fingerprint(exc.key)}, known_hosts has "
            f"{fingerprint(exc.expected_key)}; refusing (someone may be intercepting the connection)",
        )
    if isinstance(exc, HostKeyUnknown):
        return HostError(
            "host_key_unknown",
            f"host key of {exc.key_name} is not in known_hosts ({fingerprint(exc.key)}); "
            "add it, or pass --accept-new-host-keys",
        )
    if isinstance(exc, HandshakeSilent):
        return HostError(
            "timeout", f"{where} went silent while connecting: nothing heard for {exc.silence_s:g} s"
        )
    text = str(exc).lower()
    if isinstance(exc, paramiko.AuthenticationException) and "timeout" in text:
        # The server said nothing for the whole time: silence (a link cut, a node hung), not keys.
        return HostError(
            "timeout", f"{where} went silent during authentication: no answer within {timeout_s:g} s"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return HostError("auth_refused", f"authentication refused by {where}: {exc}")
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        errors = list(exc.errors.values())
        if errors and all(isinstance(e, ConnectionRefusedError) for e in errors):
            return HostError("unreachable", f"connection refused by {where} (is sshd running?)")
        return HostError("unreachable", f"cannot connect to {where}: {exc}")
    if isinstance(exc, socket.gaierror):
        return HostError("unreachable", f"cannot resolve {spec.address}: {exc.strerror}")
    if isinstance(exc, ConnectionRefusedError):
        return HostError("unreachable", f"connection refused by {where} (is sshd running?)")
    if isinstance(exc, TimeoutError | socket.timeout):
        return HostError("timeout", f"no answer from {where} within {timeout_s:g} s")
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return HostError("unreachable", f"no route to {where}")
    if _banner_silence(exc):
        return HostError("timeout", f"{where} accepted TCP but sent no SSH banner within {timeout_s:g} s")
    if _handshake_silence(exc):
        # paramiko's word for a key exchange that never finished: the peer stopped answering.
        return HostError(
            "timeout", f"{where} went silent during the SSH handshake: no answer within {timeout_s:g} s"
        )
    return HostError("unreachable", f"cannot connect to {where}: {exc}")


def _loaded_key(path: str) -> paramiko.PKey | None:
    """The key in ``path``, whatever its type and format; None where paramiko must try it itself
    (a key with a passphrase, a file it cannot read now). Given as one key, paramiko reports what
    authentication itself said: given a file name, it tries the file as every key type in turn, and
    what it reports is the last type's "expected OPENSSH key", whatever the server did."""
    try:
        return paramiko.PKey.from_path(path)
    except (OSError, ValueError, paramiko.SSHException):
        return None


def _banner_silence(exc: BaseException) -> bool:
    return isinstance(exc, paramiko.SSHException) and "banner" in str(exc).lower()


def _handshake_silence(exc: BaseException) -> bool:
    return isinstance(exc, paramiko.SSHException) and "no existing session" in str(exc).lower()


def _silent(exc: BaseException) -> bool:
    """The host said nothing in time: a timeout, no banner, a handshake or authentication left
    unanswered (what a stalled controller also looks like from inside)."""
    if isinstance(exc, TimeoutError | socket.timeout | HandshakeSilent):
        return True
    if isinstance(exc, paramiko.AuthenticationException):
        return "timeout" in str(exc).lower()
    return _banner_silence(exc) or _handshake_silence(exc)


def _retryable(exc: BaseException) -> bool:
    """Handshakes that sshd drops under load (MaxStartups) or that were reset are retried."""
    if isinstance(exc, ConnectionResetError | ConnectionRefusedError):
        return True
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return True
    text = str(exc).lower()
    return isinstance(exc, paramiko.SSHException) and (
        "error reading ssh protocol banner" in text or "connection reset" in text
    )


class SshTransport(Transport):
    def __init__(self, spec: HostSpec, settings: SshSettings) -> None:
        super().__init__(spec)
        self.settings = settings
        self._client: paramiko.SSHClient | None = None
        self._jump: SshTransport | None = None
        self._policy = _NewKeyPolicy(settings.accept_new_host_keys)
        self._pgids: set[int] = set()
        self._lock = threading.Lock()

    @property
    def accepted_host_keys(self) -> list[str]:
        return list(self._policy.accepted)

    def open(self, deadline: Deadline) -> None:
        timeout = deadline.cap(self.settings.connect_timeout_s)
        # Every attempt together within connect_timeout_s: a host silent in its handshake is named
        # then, not after as many timeouts as attempts; a handshake dropped at once is retried. A
        # handshake that timed out while the controller itself stood still (preflight.stall) is
        # the controller's, not the host's: it is tried again with the time the stall took.
        connecting = Deadline.after(timeout).sooner(deadline.remaining())
        last: BaseException | None = None
        attempt = excused = 0
        while attempt < CONNECT_ATTEMPTS and not connecting.expired:
            began = time.monotonic()
            try:
                self._connect(connecting.remaining())
                return
            except HostUnavailable:
                raise
            except Exception as exc:
                # A peer silent from the start says so best in its first words (no banner); what a
                # retry then reports of the same silence is paramiko's vaguer "No existing session".
                if not (last is not None and _banner_silence(last) and _handshake_silence(exc)):
                    last = exc
                self._discard()
                stalled = controller_stalls().stalled_s(began) >= STALL_SHARE * (time.monotonic() - began)
                if _silent(exc) and stalled and excused < STALLED_ATTEMPTS and not deadline.expired:
                    excused += 1
                    connecting = Deadline.after(timeout).sooner(deadline.remaining())
                    continue
                attempt += 1
                if not _retryable(exc) or attempt == CONNECT_ATTEMPTS:
                    break
                time.sleep(min(connecting.remaining(), random.uniform(0.2, 0.6) * 2 ** (attempt - 1)))
        if last is None:
            last = TimeoutError()
        raise HostUnavailable(_classify(last, self.spec, timeout)) from last

    def _connect(self, timeout_s: float) -> None:
        spec = self.spec
        client = paramiko.SSHClient()
        known = self.settings.known_hosts.lookup(spec.key_name)
        for keytype, key in known.items():
            client.get_host_keys().add(spec.key_name, keytype, key)
        client.set_missing_host_key_policy(self._policy)
        direct: _HeardSocket | None = None
        if spec.proxy_jump:
            sock: paramiko.Channel | socket.socket = self._jump_channel(timeout_s)
        else:
            sock = direct = self._direct_socket(timeout_s)
        identities = [str(Path(p).expanduser()) for p in spec.identity_files or self.settings.identity_files]
        pkey = _loaded_key(identities[0]) if len(identities) == 1 else None
        limit = self.settings.jump_limit(spec.proxy_jump) if spec.proxy_jump else None
        if limit is not None:
            limit.acquire()
        try:
            self._client = client
            with _silence_ends(direct, self.settings.silence_s) if direct else contextlib.nullcontext():
                client.connect(
                    hostname=spec.address,
                    port=spec.port,
                    username=spec.user or self.settings.default_user,
                    pkey=pkey,
                    # paramiko takes a list here too, whatever its stubs say
                    key_filename=None if pkey else identities or None,  # type: ignore[arg-type]
                    look_for_keys=not identities,
                    allow_agent=True,
                    timeout=timeout_s,
                    banner_timeout=timeout_s,
                    auth_timeout=timeout_s,
                    channel_timeout=timeout_s,
                    sock=sock,
                    disabled_algorithms=DISABLED_ALGORITHMS,
                )
        except Exception as exc:
            if direct is not None and direct.silenced:
                raise HandshakeSilent(self.settings.silence_s) from exc
            raise
        finally:
            if limit is not None:
                limit.release()
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(KEEPALIVE_S)

    def _direct_socket(self, timeout_s: float) -> _HeardSocket:
        """The TCP connection to the host: a SYN left unanswered for the run's silence_s is its
        silence, as a handshake's is."""
        silence_s = self.settings.silence_s
        try:
            return _direct_socket(self.spec.address, self.spec.port, min(timeout_s, silence_s))
        except TimeoutError as exc:
            if timeout_s >= silence_s:
                raise HandshakeSilent(silence_s) from exc
            raise

    def _jump_channel(self, timeout_s: float) -> paramiko.Channel:
        name = self.spec.proxy_jump or ""
        jump_spec = self.settings.resolve_jump.get(name) or parse_jump(name)
        self._jump = SshTransport(jump_spec, self.settings)
        try:
            self._jump.open(Deadline.after(timeout_s))
        except HostUnavailable as exc:
            raise HostUnavailable(
                HostError(exc.error.kind, f"via jump host {name}: {exc.error.message}")
            ) from exc
        jump_transport = self._jump.client.get_transport()
        assert jump_transport is not None
        return jump_transport.open_channel(
            "direct-tcpip", (self.spec.address, self.spec.port), ("127.0.0.1", 0), timeout=timeout_s
        )

    @property
    def client(self) -> paramiko.SSHClient:
        if self._client is None:
            raise RuntimeError(f"{self.spec.name}: not connected")
        return self._client

    def start(self, argv: Sequence[str], *, timeout_s: float) -> SshProcess:
        transport = self._client.get_transport() if self._client else None
        if transport is None or not transport.is_active():
            raise HostUnavailable(HostError("unreachable", f"connection to {self.spec.name} was lost"))
        try:
            channel = transport.open_session(timeout=max(1.0, min(timeout_s, 15.0)))
            channel.exec_command(wrap_command(argv, timeout_s))
        except (OSError, paramiko.SSHException) as exc:
            raise HostUnavailable(HostError("unreachable", f"cannot start a command: {exc}")) from exc
        return SshProcess(self, channel, timeout_s)

    def responsive(self, timeout_s: float) -> bool:
        """An OpenSSH keepalive request answered within ``timeout_s`` (paramiko's own wait has no
        deadline, so it runs in a helper thread that is abandoned if the host never answers)."""
        transport = self._client.get_transport() if self._client else None
        if transport is None or not transport.is_active():
            return False
        answered = threading.Event()

        def ask() -> None:
            with contextlib.suppress(Exception):
                transport.global_request("keepalive@openssh.com", wait=True)
                answered.set()

        threading.Thread(target=ask, daemon=True, name=f"keepalive-{self.spec.name}").start()
        return answered.wait(timeout_s) and transport.is_active()

    def _track(self, pgid: int) -> None:
        with self._lock:
            self._pgids.add(pgid)

    def _untrack(self, pgid: int) -> None:
        with self._lock:
            self._pgids.discard(pgid)

    def _kill(self, pgid: int) -> None:
        """End a process group on the host: TERM, then KILL; best effort, bounded."""
        self._untrack(pgid)
        transport = self._client.get_transport() if self._client else None
        if transport is None or not transport.is_active():
            return
        try:
            channel = transport.open_session(timeout=5)
            channel.settimeout(10)
            # TERM first, and time to act on it (torchrun ends its workers, a shell runs its
            # cleanup trap); KILL whatever is left after 3 s.
            channel.exec_command(
                f"kill -TERM -- -{pgid} 2>/dev/null || exit 0; "
                "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.3; "
                f"kill -0 -- -{pgid} 2>/dev/null || exit 0; done; "
                f"kill -KILL -- -{pgid} 2>/dev/null; true"
            )
            channel.recv_exit_status()
            channel.close()
        except (OSError, paramiko.SSHException):
            pass

    def _discard(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._jump is not None:
            self._jump.close()
            self._jump = None

    def close(self) -> None:
        with self._lock:
            pgids = list(self._pgids)
        for pgid in pgids:
            self._kill(pgid)
        self._discard()

    def abandon(self) -> None:
        self._discard()


class SshProcess(RemoteProcess):
    """A command on an SSH channel; its process group id arrives first on stderr."""

    def __init__(self, owner: SshTransport, channel: paramiko.Channel, timeout_s: float) -> None:
        super().__init__(timeout_s)
        self._owner = owner
        self._channel = channel
        self.pgid: int | None = None

    def write(self, data: bytes) -> None:
        self._channel.settimeout(max(0.1, self.deadline.remaining()))
        try:
            self._channel.sendall(data)
        except (TimeoutError, paramiko.SSHException) as exc:
            raise OSError(f"cannot send to {self._owner.spec.name}: {exc}") from exc

    def close_stdin(self) -> None:
        if not self._channel.closed:
            self._channel.shutdown_write()

    def _pump(self, wait_s: float) -> bool:
        got = _drain(self._channel, self._stdout, self._stderr)
        if self.pgid is None and b"\n" in self._stderr.head:
            self.pgid, _ = split_pgid(bytes(self._stderr.head))
            if self.pgid is not None:
                self._owner._track(self.pgid)
        if got:
            return True
        if self._channel.exit_status_ready() or self._channel.closed:
            _drain(self._channel, self._stdout, self._stderr)
            return False
        transport = self._channel.get_transport()
        if transport is None or not transport.is_active():
            return False
        if wait_s > 0:
            wait_for_any([self], min(wait_s, _POLL_S))
        return True

    def waitables(self) -> list[int]:
        # paramiko makes the channel a pipe that turns readable when data or its end arrives.
        return [] if self._channel.closed else [self._channel.fileno()]

    def _exit_status(self) -> int | None:
        if not self._channel.exit_status_ready():
            return None
        status = self._channel.recv_exit_status()
        return None if status == -1 else status

    def kill(self) -> None:
        if self.pgid is not None:
            self._owner._kill(self.pgid)

    def _release(self) -> None:
        self._channel.close()
        if self.pgid is not None:
            self._owner._untrack(self.pgid)


def _drain(channel: paramiko.Channel, out: KeptOutput, err: KeptOutput) -> bool:
    got = False
    while channel.recv_ready():
        out.add(channel.recv(65536))
        got = True
    while channel.recv_stderr_ready():
        err.add(channel.recv_stderr(65536))
        got = True
    return got
