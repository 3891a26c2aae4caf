"""The cause a user reads at connect is the one that happened: a peer that goes silent during the
handshake or authentication is silence (named with the phase), never a refusal; and no library's
traceback reaches the terminal. Real servers on this machine's loopback stand in for the nodes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import paramiko
import pytest

from preflight.inventory import HostSpec
from preflight.transport.ssh import _classify

PYTHON = sys.executable
# Connections each test server accepted, by its port.
ACCEPTED: dict[int, int] = {}


def _serve(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)
            ACCEPTED[port] = ACCEPTED.get(port, 0) + 1
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """Accepts TCP and says nothing: a node whose sshd hangs, or a link that died after SYN."""
    yield from _serve(lambda conn: None)


@pytest.fixture
def banner_then_silent_port() -> Iterator[int]:
    """Sends an SSH banner, then nothing: the link died during the key exchange."""
    yield from _serve(lambda conn: conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"))


# A talking server's lines before it stops: one every TRICKLE_S, TRICKLE_LINES of them, for three
# times the run's silence_s in the tests below.
TRICKLE_LINES = 9
TRICKLE_S = 0.5
# What the trickling server saw, by its port: lines it sent before the client hung up.
TRICKLED: dict[int, int] = {}


@pytest.fixture
def trickle_then_silent_port() -> Iterator[int]:
    """Sends a line before its banner every half second (RFC 4253 allows such lines), for longer
    than the run's silence_s in all, then nothing: slow while it talks, silent after."""

    def handle(conn: socket.socket) -> None:
        port = conn.getsockname()[1]
        TRICKLED[port] = 0
        try:
            for _ in range(TRICKLE_LINES):
                conn.sendall(b"still here\r\n")
                TRICKLED[port] += 1
                time.sleep(TRICKLE_S)
        except OSError:
            pass

    yield from _serve(handle)


class _SilentAuth(paramiko.ServerInterface):
    """A real SSH server (paramiko's) whose authentication never answers."""

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        time.sleep(30)
        return paramiko.AUTH_FAILED


@pytest.fixture
def silent_auth(tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    """(port, known_hosts, identity) of a server that stops answering once authentication starts."""
    host_key = paramiko.ECDSAKey.generate()
    identity = tmp_path / "id_rsa"
    paramiko.RSAKey.generate(2048).write_private_key_file(str(identity))

    def handle(conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        transport.add_server_key(host_key)
        try:
            transport.start_server(server=_SilentAuth())
            transport.accept(30)
        except (paramiko.SSHException, EOFError, OSError):
            pass

    for port in _serve(handle):
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {host_key.get_name()} {host_key.get_base64()}\n")
        yield port, known, identity


def _check(tmp_path: Path, port: int, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"127.0.0.1:{port}\n")
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    run = subprocess.run(
        [
            PYTHON,
            "-m",
            "preflight",
            "check",
            str(hosts),
            "--connect-timeout",
            "2",
            "--json",
            "run.json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    (host,) = json.loads((tmp_path / "run.json").read_text())["hosts"]
    return run, host["error"]


def test_a_node_that_never_sends_its_banner_is_silence_and_no_traceback_is_printed(
    tmp_path: Path, silent_port: int
) -> None:
    run, error = _check(tmp_path, silent_port)
    assert run.returncode == 3
    # Silence, in the words of the phase it was in (the banner, or the key exchange when a retry
    # got that far), never a refusal.
    assert error["kind"] == "timeout"
    assert re.search(r"sent no SSH banner within 2 s|went silent during the SSH handshake", error["message"])
    assert "Traceback" not in run.stderr and "Exception (client)" not in run.stderr
    # Named once its connect timeout was spent, not after one timeout per attempt.
    assert ACCEPTED[silent_port] == 1


def test_with_debug_the_library_s_own_lines_are_shown(tmp_path: Path, silent_port: int) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"127.0.0.1:{silent_port}\n")
    run = subprocess.run(
        [PYTHON, "-m", "preflight", "--debug", "check", str(hosts), "--connect-timeout", "1", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert "preflight: debug: paramiko.transport:" in run.stderr


def test_a_node_that_goes_silent_during_the_key_exchange_is_silence_not_a_refusal(
    tmp_path: Path, banner_then_silent_port: int
) -> None:
    _, error = _check(tmp_path, banner_then_silent_port)
    assert error["kind"] == "timeout"
    assert "went silent during the SSH handshake" in error["message"]


def test_a_node_that_goes_silent_during_authentication_is_silence_not_a_refusal(
    tmp_path: Path, silent_auth: tuple[int, Path, Path]
) -> None:
    port, known, identity = silent_auth
    _, error = _check(tmp_path, port, "--known-hosts", str(known), "-i", str(identity))
    assert error["kind"] == "timeout"
    assert "went silent during authentication: no answer within 2 s" in error["message"]
    assert "refused" not in error["message"]


def test_only_what_the_server_said_is_a_refusal() -> None:
    spec = HostSpec(name="node1", address="10.0.0.11")
    refused = _classify(paramiko.AuthenticationException("Authentication failed."), spec, 10)
    assert refused.kind == "auth_refused" and "refused by 10.0.0.11:22" in refused.message
    keys = _classify(paramiko.BadAuthenticationType("Bad authentication type", ["publickey"]), spec, 10)
    assert keys.kind == "auth_refused"
    silent = _classify(paramiko.AuthenticationException("Authentication timeout."), spec, 10)
    assert silent.kind == "timeout"


def _silence_config(tmp_path: Path, silence_s: float) -> str:
    config = tmp_path / "silence.toml"
    config.write_text(f"[run]\nsilence_s = {silence_s}\n")
    return str(config)


def test_a_connection_silent_for_the_run_s_silence_is_named_before_its_connect_timeout(
    tmp_path: Path, banner_then_silent_port: int
) -> None:
    # The connect timeout bounds a handshake that talks; one that stopped is named on its silence.
    slow = ("--connect-timeout", "60", "--config", _silence_config(tmp_path, 1.5))
    _, error = _check(tmp_path, banner_then_silent_port, *slow)
    assert error["kind"] == "timeout"
    assert "went silent while connecting: nothing heard for 1.5 s" in error["message"]


def test_a_handshake_that_keeps_talking_is_slow_not_silent(
    tmp_path: Path, trickle_then_silent_port: int
) -> None:
    # Each line comes within the silence; their sum is three times it. The connection is named
    # silent only once the lines stop, never while they come.
    slow = ("--connect-timeout", "60", "--config", _silence_config(tmp_path, 1.5))
    _, error = _check(tmp_path, trickle_then_silent_port, *slow)
    assert TRICKLED[trickle_then_silent_port] == TRICKLE_LINES
    assert error["kind"] == "timeout"
    assert "went silent while connecting: nothing heard for 1.5 s" in error["message"]
