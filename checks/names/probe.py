"""Observing name resolution (I/O): each node resolves, with its own resolver, the master's
names, its own and a bounded set of peers' (``[names] max_peers``, the next ones in inventory
order, so every name is looked up by as many nodes); the controller says which address each
name should give: the address it reaches that node at.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import socket
import threading
from collections.abc import Sequence

from checks.fanout import on_every_node
from checks.names.judge import NAME, Answer, NamedNode, NamesObservation, is_address
from checks.names.settings import NamesSection
from checks.ports import master_of
from preflight.check import CheckContext, HostSession, Probe
from preflight.probes import run_node_script

NODE_SCRIPT = "checks.names.node"


def node_names(session: HostSession) -> list[str]:
    """The names a peer may look a node up by: the name it is reached at (the job's master
    address is the master's) and its own host name (what gloo and torchrun's agents advertise).
    An inventory alias that ``~/.ssh/config`` maps to another host name is the controller's
    alone; addresses are not names."""
    found = [session.spec.address, session.report.hostname or ""]
    return [n for n in dict.fromkeys(found) if n and not is_address(n)]


def controller_address(address: str, timeout_s: float) -> str | None:
    """The address the controller reaches a host at: the inventory's when it is one, else what
    the controller's resolver gives for it (None when it gives nothing in time)."""
    if is_address(address):
        return address
    found: list[str] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(address, None, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return
        found.extend(str(info[4][0]) for info in infos)

    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(timeout_s)
    return found[0] if found else None


def names_to_ask(sessions: Sequence[HostSession], master: str, max_peers: int) -> dict[str, list[str]]:
    """host -> the names it resolves: the master's, its own, then its next ``max_peers`` peers'."""
    names = {s.spec.name: node_names(s) for s in sessions}
    order = [s.spec.name for s in sessions]
    asked: dict[str, list[str]] = {}
    for i, host in enumerate(order):
        peers = [order[(i + k) % len(order)] for k in range(1, min(max_peers, len(order) - 1) + 1)]
        chosen = [*names.get(master, []), *names[host]]
        for peer in peers:
            chosen += names[peer]
        asked[host] = list(dict.fromkeys(chosen))
    return asked


def observe_names(ctx: CheckContext) -> NamesObservation:
    cfg = ctx.config.section(NamesSection)
    master, _ = master_of(ctx)
    sessions = ctx.live_sessions
    named: dict[str, NamedNode] = {}
    workers = max(1, min(ctx.config.run.fanout, len(sessions)))
    with cf.ThreadPoolExecutor(max_workers=workers) as pool:
        reached = list(pool.map(lambda s: controller_address(s.spec.address, cfg.lookup_timeout_s), sessions))
    for session, expected in zip(sessions, reached, strict=True):
        node = session.report.node
        own = tuple(a for a in node.addresses if a)
        for name in node_names(session):
            named.setdefault(name, NamedNode(session.spec.name, expected, own))
    asked = names_to_ask(sessions, master, cfg.max_peers)
    limit_s = cfg.lookup_timeout_s + ctx.config.run.probe_timeout_s

    def resolve(session: HostSession) -> dict[str, Answer]:
        assert session.transport is not None
        args = json.dumps({"names": asked[session.spec.name], "timeout_s": cfg.lookup_timeout_s})
        document = run_node_script(
            session.transport,
            NODE_SCRIPT,
            python=ctx.config.run.python,
            args=(args,),
            timeout_s=ctx.deadline.cap(limit_s),
        )
        answers = document.get("answers")
        found: dict[str, Answer] = {}
        for name, raw in (answers if isinstance(answers, dict) else {}).items():
            raw = raw if isinstance(raw, dict) else {}
            addresses = raw.get("addresses")
            error = raw.get("error")
            found[str(name)] = Answer(
                tuple(str(a) for a in addresses) if isinstance(addresses, list) else (),
                str(error) if error is not None else None,
            )
        return found

    answered = on_every_node(ctx, resolve, limit_s=limit_s, sessions=sessions, phase=NAME)
    return NamesObservation(names=named, answers=answered.answers, errors=answered.errors, master=master)


OBSERVE = Probe("names", observe_names)
