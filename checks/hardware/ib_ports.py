"""InfiniBand/RoCE ports judged against like ports. A GPU node carries, beside its compute HCAs,
front-end Ethernet/RoCE NICs, bonds, storage NICs and second ports nobody cabled, each at its own
rate: a port is compared with the same port (device and port number, on a card of the same kind)
on the other nodes, and a port no other node has with the ports of its own node that sit on the
same kind of card. The kind of a card is its link layer, chip (``hca_type``) and board
(``board_id``). A port down, INIT or Polling, or at a lower rate or width, where its like ports
are ACTIVE is a fault of its node; a port down on every node that has it is a fact of the site,
said once in a note. A port whose physical link is up but which is not ACTIVE (INIT, ARMED, or DOWN
while ``LinkUp``: cabled, and waiting for a subnet manager, or a virtual function not brought up)
is a fault of its node whatever its like ports do: a cable that was plugged in was meant to carry
traffic. A virtual function DOWN on its physical function's up link is a spare of its host, judged
as any port down. A port whose state or rate could not be read (an I/O error:
``port_reading_errors``) is that finding's, not judged here. Pure: ports in, findings out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from checks.hardware.details import IbPortDown, IbPortRate, IbPortUnused, UnusedPort
from preflight.facts import IbPort, NodeFacts
from preflight.facts_gpu import reading_errors
from preflight.facts_values import records
from preflight.model import CheckResult
from preflight.nodeset import fold

NAME = "hardware"
ACTIVE_IB = "ACTIVE"
LINK_UP = "LinkUp"

# A port's card: link layer, chip and board; None where the file is missing.
Kind = tuple[str | None, str | None, str | None]
# A port as the same port on every node: device, port number, kind.
Key = tuple[str, int | str | None, Kind]


def kind_of(port: IbPort) -> Kind:
    return (port.link_layer, port.hca_type, port.board_id)


def kind_text(kind: Kind) -> str:
    """``InfiniBand, MT4129`` (the board is left out when the chip is known)."""
    layer, chip, board = kind
    return ", ".join(part for part in (layer, chip or board) if part) or "of unknown kind"


def port_label(port: IbPort) -> str:
    """How a finding names a port: ``mlx5_2 port 1``."""
    return f"{port.device} port {port.port}"


_LABEL_RE = re.compile(r"^(\S+) port (\d+)$")


def port_slot(label: str) -> str | None:
    """Where the facts place the port a :func:`port_label` names (``mlx5_2/1``, the history's slot of
    an HCA port); None for any other text."""
    found = _LABEL_RE.match(label)
    return f"{found[1]}/{found[2]}" if found else None


# The port files its state and rate are judged on: one that could not be read is no fault of the link.
JUDGED_FILES = frozenset(("state", "phys_state", "rate", "link_layer"))


def port_errors(node: NodeFacts) -> list[tuple[IbPort, dict[str, str]]]:
    """Each port of the node with its files whose read failed (:func:`reading_errors`: ``state``,
    ``counters/symbol_error`` ... by the kernel's words), in the node's order."""
    raws = records(node.value(("net", "ib_devices")))
    return [(port, reading_errors(raw)) for port, raw in zip(node.ib_ports, raws, strict=True)]


def is_up(port: IbPort) -> bool:
    """ACTIVE, and LinkUp where the physical state is known."""
    return port.state == ACTIVE_IB and port.phys_state in (None, LINK_UP)


# mlx5 virtual functions by chip (``hca_type``, the PCI device id in decimal): ConnectX-4, -4 Lx,
# -5, -5 Ex and -6 VFs, and the mlx5 family VF of ConnectX-6 Dx and later (pci.ids 1014 ... 101e).
VF_HCA_TYPES = frozenset({"MT4114", "MT4116", "MT4118", "MT4120", "MT4122", "MT4124", "MT4126"})


def is_virtual(port: IbPort) -> bool:
    """An SR-IOV virtual function: as the node read it (``device/physfn``), else by its chip."""
    return port.virtual if port.virtual is not None else port.hca_type in VF_HCA_TYPES


def is_cabled_not_active(port: IbPort) -> bool:
    """The physical link is up and the port's state is known and not ACTIVE; a virtual function
    DOWN on its physical function's link is one not given to anything yet (a host's spare VFs),
    judged as any port that is down."""
    if port.phys_state != LINK_UP or port.state is None or port.state == ACTIVE_IB:
        return False
    return not (port.state == "DOWN" and is_virtual(port))


@dataclass(frozen=True)
class Usual:
    """How the like ports that are up run: the most common rate and width (the faster on a tie),
    as the rate line shows it, and where (the nodes, or this node's other ports)."""

    gbps: float | None
    lanes: int | None
    rate: str | None
    where: str

    def faster_than(self, port: IbPort) -> bool:
        slower_rate = self.gbps is not None and port.rate_gbps is not None and port.rate_gbps < self.gbps
        narrower = self.lanes is not None and port.lanes is not None and port.lanes < self.lanes
        return slower_rate or narrower


def usual(up: Sequence[IbPort], where: str) -> Usual:
    counts = Counter((p.rate_gbps, p.lanes) for p in up)
    (gbps, lanes), _ = max(counts.items(), key=lambda item: (item[1], item[0][0] or 0, item[0][1] or 0))
    rate = next(p.rate for p in up if (p.rate_gbps, p.lanes) == (gbps, lanes))
    return Usual(gbps, lanes, rate, where)


@dataclass(frozen=True)
class Fault:
    """One port of one node that is down or slower than its like ports; a port cabled but not
    active is one on its own (no ``usual``) where no like port is up to compare it with."""

    port: IbPort
    usual: Usual | None

    @property
    def down(self) -> bool:
        return not is_up(self.port)

    def text(self) -> str:
        p = self.port
        if self.usual is None:
            return f"{port_label(p)} is {p.state} with its physical link up (LinkUp): cabled but not ACTIVE"
        if self.down:
            return (
                f"{port_label(p)} is {p.state or 'in no known state'} "
                f"(physical state {p.phys_state or 'unknown'}), ACTIVE {self.usual.where}"
            )
        return f"{port_label(p)} at {p.rate}, {self.usual.rate} {self.usual.where}"


def _across_nodes(
    groups: Mapping[Key, Mapping[str, IbPort]],
    faults: dict[str, list[Fault]],
    unused: dict[Key, list[str]],
) -> None:
    """Ports that other nodes have too. Where at least half of the nodes that have a port have it
    up, the others are faults; where none has it up, it is unused at this site."""
    for key, members in groups.items():
        up = {h: p for h, p in members.items() if is_up(p)}
        if not up:
            idle = [h for h, p in members.items() if not is_cabled_not_active(p)]
            if idle:
                unused[key] = idle
            continue
        if len(up) * 2 < len(members):
            continue  # up on a few nodes only: a port most of the site does not use
        for host, port in members.items():
            others = [h for h in up if h != host]
            if not others:
                continue
            found = usual([up[h] for h in others], f"on {fold(others)}")
            if not is_up(port) or found.faster_than(port):
                faults.setdefault(host, []).append(Fault(port, found))


def _within_node(
    host: str,
    alone: Sequence[IbPort],
    ports: Sequence[IbPort],
    faults: dict[str, list[Fault]],
    unused: dict[Key, list[str]],
) -> None:
    """Ports no other node has (all of them on a node judged alone), against the node's ports on
    cards of the same kind. Most of those must be up for a port down to be a fault: a dual-port
    card whose second port is not cabled has as many ports down as up."""
    for port in alone:
        kind = kind_of(port)
        like = [p for p in ports if kind_of(p) == kind and p is not port]
        up = [p for p in like if is_up(p)]
        if not is_up(port) and not up:
            if not is_cabled_not_active(port):
                unused[(port.device, port.port, kind)] = [host]
            continue
        up_here = len(up) + (1 if is_up(port) else 0)
        if not up or up_here * 2 <= len(like) + 1:
            continue
        found = usual(up, f"on this node's other {len(up)} {kind_text(kind)} ports")
        if not is_up(port) or found.faster_than(port):
            faults.setdefault(host, []).append(Fault(port, found))


def _unused_note(unused: Mapping[Key, Sequence[str]]) -> CheckResult:
    shown = "; ".join(
        f"{device} port {port} ({kind_text(kind)}) on {fold(hosts)}"
        for (device, port, kind), hosts in unused.items()
    )
    ports: list[UnusedPort] = [
        {"port": f"{device} port {port}", "kind": kind_text(kind), "nodes": list(hosts)}
        for (device, port, kind), hosts in unused.items()
    ]
    details: IbPortUnused = {"item": "ib_port_unused", "ports": ports}
    summary = f"InfiniBand/RoCE ports down on every node that has them, taken as unused here: {shown}"
    return CheckResult.note(NAME, summary, (), details)


def _cabled_not_active(nodes: Mapping[str, NodeFacts], faults: dict[str, list[Fault]]) -> None:
    """Ports cabled but not active that their like ports did not already name: faults on their own."""
    for host, node in nodes.items():
        named = {id(f.port) for f in faults.get(host, [])}
        for port in node.ib_ports:
            if is_cabled_not_active(port) and id(port) not in named:
                faults.setdefault(host, []).append(Fault(port, None))


def like_ports(nodes: Mapping[str, NodeFacts]) -> dict[Key, dict[str, IbPort]]:
    """Every port as the same port on every node that has it: by device, port number and kind of
    card, each node's port of that key, in the nodes' order."""
    groups: dict[Key, dict[str, IbPort]] = {}
    for host, node in nodes.items():
        for port in node.ib_ports:
            groups.setdefault((port.device, port.port, kind_of(port)), {})[host] = port
    return groups


def judge_ib_ports(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Per node, one fail for its ports down (and cabled but not active) and one for its ports
    slower than their like ports; one note for the ports down everywhere."""
    groups = like_ports(nodes)
    faults: dict[str, list[Fault]] = {}
    unused: dict[Key, list[str]] = {}
    _across_nodes({k: m for k, m in groups.items() if len(m) > 1}, faults, unused)
    for host, node in nodes.items():
        alone = [p for p in node.ib_ports if len(groups[(p.device, p.port, kind_of(p))]) == 1]
        _within_node(host, alone, node.ib_ports, faults, unused)
    _cabled_not_active(nodes, faults)
    results: list[CheckResult] = []
    for host, node in nodes.items():
        unread = {id(port) for port, errors in port_errors(node) if JUDGED_FILES & set(errors)}
        found = [f for f in faults.get(host, []) if id(f.port) not in unread]
        down = [f for f in found if f.down]
        if down:
            port_down: IbPortDown = {
                "item": "ib_port_down",
                "node": host,
                "ports": [port_label(f.port) for f in down],
            }
            summary = f"{host}: " + "; ".join(f.text() for f in down)
            results.append(CheckResult(NAME, "fail", summary, (host,), port_down))
        slow = [f for f in found if not f.down]
        if slow:
            rate: IbPortRate = {
                "item": "ib_rate",
                "node": host,
                "ports": [port_label(f.port) for f in slow],
            }
            summary = f"{host}: " + "; ".join(f.text() for f in slow)
            results.append(CheckResult(NAME, "fail", summary, (host,), rate))
    if unused:
        results.append(_unused_note(unused))
    return results
