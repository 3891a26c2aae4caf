"""Node side of the ``ports`` check: listen on the job's ports, then probe the other nodes.

Node code (:mod:`preflight.bundle`): standard library only, Python 3.8+; of preflight, only other
node modules. The controller sends its bundle on stdin after a length prefix and then talks to it
by lines:

    -> (script)                 <- READY {"listening": ..., "ephemeral": port, "route": ...}
    -> GO {"targets": [...]}    <- RESULT {"probes": [...]}
    -> (end of input)           listeners close, the script exits

With ``{"mode": "route"}`` it only prints the route to the master and exits.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import json
import os
import selectors
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any

from preflight.node.net import IP_FALLBACK_PATHS

LISTEN_BACKLOG = 1024
# Connections each node opens at once: with every node probing every other, the whole
# cluster has nodes x this in flight.
PROBE_THREADS = 16

# Without ``ip``, a UDP socket is connected to the master on this port (the rendezvous port where
# the controller gives one) so that the kernel picks the route; no packet is sent.
ROUTE_PORT = 29500
NO_IP = "no `ip` command"
PROC_NET_ROUTE = "/proc/net/route"
PROC_NET_IPV6_ROUTE = "/proc/net/ipv6_route"
PROC_NET_IF_INET6 = "/proc/net/if_inet6"
SIOCGIFADDR = 0x8915  # linux/sockios.h: an interface's (primary) IPv4 address
RTF_UP, RTF_REJECT = 0x1, 0x200  # linux/route.h
_UNREACHABLE = (errno.ENETUNREACH, errno.EHOSTUNREACH)


def _ip_command() -> str | None:
    """The ``ip`` command, also where the SSH session's PATH has no sbin directory; None where
    the node has none (containers and minimal images often lack iproute2)."""
    return shutil.which("ip") or next((p for p in IP_FALLBACK_PATHS if os.access(p, os.X_OK)), None)


def _ip_json(ip: str, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run([ip, "-j", *args], capture_output=True, timeout=5, check=True).stdout
    found = json.loads(out.decode() or "[]")
    if not isinstance(found, list):
        raise ValueError(f"`ip -j {' '.join(args)}` printed no list")
    return [item for item in found if isinstance(item, dict)]


def _interface_holding(ip: str, address: str) -> str | None:
    try:
        links = _ip_json(ip, "addr", "show", "to", address)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    names = [str(link.get("ifname")) for link in links if link.get("ifname") and link.get("ifname") != "lo"]
    return names[0] if names else None


def _route_by_ip(ip: str, address: str) -> dict[str, Any] | None:
    """The route ``ip route get`` names; None where it names none. Raises where ``ip`` fails
    (an unreachable address, an ``ip`` too old for ``-j``): the kernel is asked directly then."""
    routes = _ip_json(ip, "route", "get", address)
    if not routes:
        return None
    route = routes[0]
    dev = route.get("dev")
    local = route.get("type") == "local" or dev == "lo"
    if local:
        # The master reaches itself over loopback; its peers reach it on the interface that
        # holds the address, and that interface's MTU is the one to compare with theirs.
        dev = _interface_holding(ip, address) or dev
    return {"src": route.get("prefsrc"), "local": local, "dev": dev}


def _plain(address: str) -> str:
    return address.split("%", 1)[0]  # without an IPv6 link-local address's scope ("%eth0")


def _proc_rows(path: str, width: int) -> list[list[str]]:
    try:
        with open(path) as handle:
            return [row for row in (line.split() for line in handle) if len(row) >= width]
    except OSError:
        return []


def _holders(address: str) -> list[str]:
    """Interfaces that hold ``address``, without ``ip``: an IPv4 address as each interface's
    primary address (SIOCGIFADDR), an IPv6 one from /proc/net/if_inet6."""
    want = ipaddress.ip_address(address)
    if want.version == 6:
        rows = _proc_rows(PROC_NET_IF_INET6, 6)
        return [row[5] for row in rows if ipaddress.ip_address(bytes.fromhex(row[0])) == want]
    try:
        import fcntl
    except ImportError:
        return []
    holders = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                answer = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:  # no IPv4 address on this interface
                continue
            if socket.inet_ntoa(answer[20:24]) == address:
                holders.append(name)
    return holders


def _table_dev(address: str) -> str | None:
    """The interface of the main routing table's longest prefix holding ``address``
    (/proc/net/route, /proc/net/ipv6_route): where no interface holds the source address."""
    want = ipaddress.ip_address(address)
    best: tuple[int, int, str] | None = None  # (-prefix length, metric, interface)
    v4 = want.version == 4
    rows = _proc_rows(PROC_NET_ROUTE, 8)[1:] if v4 else _proc_rows(PROC_NET_IPV6_ROUTE, 10)
    for row in rows:
        if v4:  # Iface Destination Gateway Flags RefCnt Use Metric Mask, in host byte order
            destination, mask = (struct.pack("=I", int(row[i], 16)) for i in (1, 7))
            prefix = bin(int.from_bytes(mask, "big")).count("1")
            network = ipaddress.ip_network((destination, prefix), strict=False)
            flags, metric, dev = int(row[3], 16), int(row[6]), row[0]
        else:  # destination, its prefix length, source, its length, next hop, metric, ..., flags, dev
            network = ipaddress.ip_network((bytes.fromhex(row[0]), int(row[1], 16)), strict=False)
            flags, metric, dev = int(row[8], 16), int(row[5], 16), row[9]
        if flags & RTF_UP and not flags & RTF_REJECT and want in network:
            candidate = (-network.prefixlen, metric, dev)
            best = candidate if best is None or candidate < best else best
    return best[2] if best else None


def _route_by_socket(family: int, sockaddr: tuple[Any, ...], port: int) -> dict[str, Any]:
    """The route the kernel picks for a UDP socket connected to the master (nothing is sent):
    the source address it chose, and the interface holding that address (the master's own
    address on the master; loopback only where no other interface holds it)."""
    address = _plain(str(sockaddr[0]))
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.connect((sockaddr[0], port, *sockaddr[2:]))
        src = _plain(str(sock.getsockname()[0]))
    local = src == address or ipaddress.ip_address(address).is_loopback
    try:
        dev = next((name for name in _holders(src) if name != "lo"), None)
        if dev is None and not ipaddress.ip_address(address).is_loopback:
            dev = _table_dev(address)
    except (OSError, ValueError):
        dev = None
    return {"src": src, "local": local, "dev": dev or ("lo" if local else None)}


def _failure(exc: BaseException) -> str:
    stderr = getattr(exc, "stderr", None)
    if isinstance(stderr, bytes) and stderr.strip():
        return stderr.decode(errors="replace").strip().splitlines()[-1]
    return getattr(exc, "strerror", None) or str(exc)


def route_to(master: str, port: int = ROUTE_PORT) -> dict[str, Any]:
    """How this node reaches the master: resolved address, interface, source address, MTU.

    ``ip route get`` where the node has ``ip``; else (or where it fails) the route the kernel
    picks for a UDP socket connected to the master. ``error``: the master's name does not
    resolve, or the kernel has no route to it. ``undetermined``: neither way could tell (a
    missing tool on a healthy node is no failure: the judge makes it a note)."""
    info: dict[str, Any] = {"master": master}
    try:
        infos = socket.getaddrinfo(master, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        info["error"] = f"cannot resolve {master}: {exc.strerror}"
        return info
    family, sockaddr = infos[0][0], infos[0][4]
    address = str(sockaddr[0])
    info["address"] = address
    ip = _ip_command()
    why = NO_IP
    route = None
    if ip is not None:
        try:
            route = _route_by_ip(ip, address)
            if route is None:
                why = "`ip route get` named no route"
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            why = f"`ip route get` failed: {_failure(exc)}"
    if route is None:
        try:
            route = _route_by_socket(family, sockaddr, port)
        except OSError as exc:
            if exc.errno in _UNREACHABLE:
                info["error"] = f"no route to {address}: {exc.strerror}"
            else:
                info["undetermined"] = f"route not determined: {why} ({_failure(exc)})"
            return info
    info.update(route)
    try:
        with open(f"/sys/class/net/{info['dev']}/mtu") as handle:
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
    port = int((args.get("ports") or [ROUTE_PORT])[0])
    if args.get("mode") == "route":
        emit("ROUTE", route_to(args["master"], port))
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
        ready["route"] = route_to(args["master"], port)
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
