"""Node side of the ``ports`` check: listen on the job's ports, then probe the other nodes.

Self-contained (standard library only, Python 3.8+), never imports preflight. The
controller sends this file on stdin after a length prefix and then talks to it by lines:

    -> (script)                 <- READY {"listening": ..., "ephemeral": port, "route": ...}
    -> GO {"targets": [...]}    <- RESULT {"probes": [...]}
    -> (end of input)           listeners close, the script exits

With ``{"mode": "route"}`` it only prints the route to the master and exits.
"""

from __future__ import annotations

import contextlib
import errno
import json
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any

LISTEN_BACKLOG = 1024
# Connections each node opens at once: with every node probing every other, the whole
# cluster has nodes x this in flight.
PROBE_THREADS = 16


def _interface_holding(address: str) -> str | None:
    try:
        out = subprocess.run(
            ["ip", "-j", "addr", "show", "to", address], capture_output=True, timeout=5, check=True
        ).stdout
        links = json.loads(out.decode() or "[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    names = [str(link.get("ifname")) for link in links if link.get("ifname") and link.get("ifname") != "lo"]
    return names[0] if names else None


def route_to(master: str) -> dict[str, Any]:
    """How this node reaches the master: resolved address, interface, source address, MTU."""
    info: dict[str, Any] = {"master": master}
    try:
        infos = socket.getaddrinfo(master, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        info["error"] = f"cannot resolve {master}: {exc.strerror}"
        return info
    address = str(infos[0][4][0])
    info["address"] = address
    try:
        out = subprocess.run(
            ["ip", "-j", "route", "get", address], capture_output=True, timeout=5, check=True
        ).stdout
        routes = json.loads(out.decode() or "[]")
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        info["error"] = f"no route to {address}: {exc}"
        return info
    if not routes:
        info["error"] = f"no route to {address}"
        return info
    route = routes[0]
    dev = route.get("dev")
    info["src"] = route.get("prefsrc")
    info["local"] = route.get("type") == "local" or dev == "lo"
    if info["local"]:
        # The master reaches itself over loopback; its peers reach it on the interface that
        # holds the address, and that interface's MTU is the one to compare with theirs.
        dev = _interface_holding(address) or dev
    info["dev"] = dev
    try:
        with open(f"/sys/class/net/{dev}/mtu") as handle:
            info["mtu"] = int(handle.read().strip())
    except (OSError, ValueError):
        info["mtu"] = None
    return info


def listen(port: int) -> tuple[socket.socket | None, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("0.0.0.0", port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None, "in_use"
        if exc.errno == errno.EACCES:
            return None, "denied"
        return None, f"error: {exc.strerror}"
    return sock, "ok"


class Acceptor:
    """Accepts every connection at once and closes it when the prober hangs up.

    Accepting never waits on a prober, so a burst of probes from a thousand nodes cannot
    overflow the listen backlog (which would read as a dropped port: a false alarm). The
    prober closes first, so TIME_WAIT lands on its ephemeral port, not on the job's port
    (a job binding that port without SO_REUSEADDR would fail for a minute).
    """

    def __init__(self, listeners: list[socket.socket]) -> None:
        self.listeners = listeners
        self.selector = selectors.DefaultSelector()
        for sock in listeners:
            sock.setblocking(False)
            self.selector.register(sock, selectors.EVENT_READ, "listen")
        # finish() writes a byte here, so that serve() returns at once instead of at its next
        # look (the controller waits for this script's end before its next check).
        self._wake, self._waker = socket.socketpair()
        self.selector.register(self._wake, selectors.EVENT_READ, "wake")
        self.stopped = False

    def serve(self) -> None:
        while not self.stopped:
            for key, _ in self.selector.select(timeout=1.0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if key.data == "listen":
                    self._accept(sock)
                elif key.data == "conn":
                    self._close(sock)

    def finish(self) -> None:
        """Make serve() return now (from another thread)."""
        self.stopped = True
        with contextlib.suppress(OSError):
            self._waker.send(b"x")

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, OSError):
                return
            conn.setblocking(False)
            self.selector.register(conn, selectors.EVENT_READ, "conn")

    def _close(self, conn: socket.socket) -> None:
        self.selector.unregister(conn)
        with contextlib.suppress(OSError):
            conn.recv(1)
        conn.close()

    def stop(self) -> None:
        self.stopped = True
        for key in list(self.selector.get_map().values()):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            if key.data == "conn":  # a prober still connected: reset, no TIME_WAIT here
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        self._waker.close()


def probe(address: str, port: int, timeout_s: float) -> dict[str, Any]:
    started = time.monotonic()
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect((address, port))
        status = "open"
    except socket.timeout:  # noqa: UP041 - not yet TimeoutError on the nodes' Python 3.8/3.9
        status = "dropped"
    except ConnectionRefusedError:
        status = "refused"
    except ConnectionResetError:
        status = "open"  # the handshake completed: something listens there
    except OSError as exc:
        status = "unreachable" if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH) else "error"
    finally:
        sock.close()
    return {"status": status, "seconds": round(time.monotonic() - started, 4)}


def probe_all(targets: list[dict[str, Any]], timeout_s: float) -> list[dict[str, Any]]:
    """Probe every (target, port) with a bounded pool of threads: a thousand peers is fine."""
    work = [(target, port) for target in targets for port in target["ports"]]
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not work:
                    return
                target, port = work.pop()
            found = probe(target["address"], port, timeout_s)
            found.update({"node": target["node"], "port": port})
            with lock:
                results.append(found)

    def run_all() -> None:
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(PROBE_THREADS, len(work)))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    run_all()
    # A port that gave no answer is asked once more, with more time, before it is called
    # dropped: a SYN lost to a momentary overload is not a firewall.
    unanswered = [r for r in results if r["status"] == "dropped"]
    if unanswered:
        by_address = {t["node"]: t for t in targets}
        results = [r for r in results if r["status"] != "dropped"]
        work = [(by_address[r["node"]], r["port"]) for r in unanswered]
        timeout_s *= 2
        run_all()
    return results


def emit(tag: str, document: dict[str, Any]) -> None:
    sys.stdout.write(f"{tag} {json.dumps(document)}\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    args = json.loads(argv[0]) if argv else {}
    if args.get("mode") == "route":
        emit("ROUTE", route_to(args["master"]))
        return 0
    listeners: dict[str, str] = {}
    sockets: list[socket.socket] = []
    for port in args.get("ports", []):
        sock, status = listen(int(port))
        listeners[str(port)] = status
        if sock is not None:
            sockets.append(sock)
    ephemeral = None
    if args.get("ephemeral"):
        sock, status = listen(0)
        if sock is not None:
            ephemeral = sock.getsockname()[1]
            sockets.append(sock)
    acceptor = Acceptor(sockets)
    server = threading.Thread(target=acceptor.serve, daemon=True)
    server.start()
    ready: dict[str, Any] = {"listening": listeners, "ephemeral": ephemeral, "hostname": socket.gethostname()}
    if args.get("master"):
        ready["route"] = route_to(args["master"])
    emit("READY", ready)
    for line in sys.stdin:
        tag, _, payload = line.strip().partition(" ")
        if tag == "GO":
            go = json.loads(payload)
            emit("RESULT", {"probes": probe_all(go["targets"], float(go["timeout_s"]))})
    acceptor.finish()
    server.join(1)
    acceptor.stop()
    return 0


if __name__ == "__main__":
    # Started by the controller as `python -c BOOTSTRAP LENGTH NAME ARGS...` (preflight.probes).
    sys.exit(main(sys.argv[3:] if sys.argv[0] == "-c" else sys.argv[1:]))
