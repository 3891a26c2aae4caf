"""Observing storage (I/O): every node runs :mod:`checks.storage.node` at once and is talked to
in phases, each finished on every node before the next begins: look at the paths and write a
marker (``READY``); look for the others' markers (``SEEN``); walk each data path once per shared
filesystem (``MANIFEST``); remove the markers (``CLEAN``). The markers are removed on every path
out: the controller always says ``DONE``, and the script removes them when it is ended.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from checks.storage.judge import NAME, StorageObservation, sharing, walkers
from checks.storage.settings import StorageSection
from preflight.check import CheckContext, HostSession, Probe
from preflight.deadline import Deadline
from preflight.probes import start_node_script
from preflight.transport import HostUnavailable, RemoteProcess

NODE_SCRIPT = "checks.storage.node"
MARKER_PREFIX = ".preflight-"
_READY_S = 30.0  # the node's Python starting, a stat and a 64 KiB write per path
_LOOK_S = 20.0
_CLEAN_S = 10.0

T = TypeVar("T")


class _NoAnswer(Exception):
    pass


def _answer(process: RemoteProcess, tag: str, deadline: Deadline) -> Any:
    line = process.readline(deadline)
    if line is None or not line.startswith(tag.encode() + b" "):
        result_tail = process.stderr_so_far.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise _NoAnswer(
            f"no {tag} answer from the storage probe" + (f": {result_tail[0]}" if result_tail else "")
        )
    return json.loads(line[len(tag) + 1 :])


def peers_to_look_at(host: str, writers: Sequence[str], count: int) -> list[str]:
    """The nodes whose markers ``host`` looks for: the first writer and the next ``count`` after
    ``host`` in inventory order. Every node looking for every marker would be N\u00b2 lookups on
    one shared filesystem; chained neighbours still join every node of a shared one."""
    if host not in writers:
        return list(writers[: count + 1])
    at = writers.index(host)
    chosen = [writers[0]] + [
        writers[(at + k) % len(writers)] for k in range(1, min(count, len(writers) - 1) + 1)
    ]
    return [h for h in dict.fromkeys(chosen) if h != host]


@dataclass
class _Run:
    """The nodes' storage probes and what every phase shares: markers, processes, errors."""

    ctx: CheckContext
    cfg: StorageSection
    sessions: list[HostSession]
    marker_of: dict[str, str]
    budget: float
    processes: dict[str, RemoteProcess] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def each(self, work: Callable[[HostSession], T], chosen: Sequence[HostSession]) -> dict[str, T]:
        """Run ``work`` on the chosen nodes at once; a node that fails keeps its first error."""
        found: dict[str, T] = {}

        def one(session: HostSession) -> None:
            name = session.spec.name
            try:
                with self.ctx.timeline.span(name, NAME):
                    found[name] = work(session)
            except (HostUnavailable, OSError, _NoAnswer, ValueError) as exc:
                self.errors.setdefault(name, str(exc))

        workers = max(1, min(self.ctx.config.run.fanout, len(self.sessions)))
        with cf.ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(one, chosen))
        return found

    def talking(self) -> list[HostSession]:
        """The nodes whose probe started and has not failed, in inventory order."""
        return [s for s in self.sessions if s.spec.name in self.processes and s.spec.name not in self.errors]


def _start_probes(run: _Run) -> dict[str, Any]:
    """Start the probe on every node and collect what it inspected (``READY``), in inventory order."""
    cfg, ctx = run.cfg, run.ctx

    def start(session: HostSession) -> Any:
        assert session.transport is not None
        options = {
            "data": list(cfg.data),
            "checkpoint": cfg.checkpoint_dir,
            "marker": run.marker_of[session.spec.name][len(MARKER_PREFIX) :],
            "max_files": cfg.max_files,
            "walk_timeout_s": cfg.walk_timeout_s,
            "sample_files": cfg.sample_files,
        }
        process = start_node_script(
            session.transport,
            NODE_SCRIPT,
            python=ctx.config.run.python,
            args=(json.dumps(options),),
            timeout_s=run.budget,
        )
        run.processes[session.spec.name] = process
        return _answer(process, "READY", ctx.deadline.sooner(_READY_S))

    found = run.each(start, run.sessions)
    # Threads finish in any order: inventory order, so that every phase picks the same nodes.
    return {s.spec.name: found[s.spec.name] for s in run.sessions if s.spec.name in found}


def _look_for_markers(run: _Run, inspected: dict[str, Any]) -> dict[str, Any]:
    """Have every talking node look for its peers' markers on each path (``SEEN``)."""
    written = {
        path: [h for h, paths in inspected.items() if paths.get(path, {}).get("marker")]
        for path in (*run.cfg.data, run.cfg.checkpoint_dir)
        if path
    }

    def look(session: HostSession) -> Any:
        process = run.processes[session.spec.name]
        wanted = {
            path: [run.marker_of[h] for h in peers_to_look_at(session.spec.name, hosts, run.cfg.look_peers)]
            for path, hosts in written.items()
        }
        process.write(f"LOOK {json.dumps(wanted)}\n".encode())
        return _answer(process, "SEEN", run.ctx.deadline.sooner(_LOOK_S))

    return run.each(look, run.talking())


def _walk_data(run: _Run, partial: StorageObservation) -> dict[str, dict[str, Any]]:
    """Walk each data path once per shared filesystem (``MANIFEST``): manifests by path, then node."""
    to_walk: dict[str, list[str]] = {}
    for path in partial.data:
        for host in walkers(sharing(path, partial)):
            to_walk.setdefault(host, []).append(path)

    def walk(session: HostSession) -> Any:
        process = run.processes[session.spec.name]
        process.write(f"WALK {json.dumps(to_walk[session.spec.name])}\n".encode())
        return _answer(process, "MANIFEST", run.ctx.deadline.sooner(run.cfg.walk_timeout_s * 1.5 + 10))

    manifests: dict[str, dict[str, Any]] = {}
    walked = run.each(walk, [s for s in run.talking() if s.spec.name in to_walk])
    for host, found in walked.items():
        for path, manifest in found.items():
            manifests.setdefault(path, {})[host] = manifest
    return manifests


def _clean_up(run: _Run) -> dict[str, list[str]]:
    """Tell every started probe ``DONE`` and collect the markers it could not remove (``CLEAN``)."""
    ctx = run.ctx

    def done(session: HostSession) -> Any:
        process = run.processes[session.spec.name]
        with contextlib.suppress(OSError):
            process.write(b"DONE\n")
            process.close_stdin()
        try:
            return _answer(
                process,
                "CLEAN",
                ctx.deadline.sooner(_CLEAN_S) if not ctx.deadline.expired else Deadline.after(_CLEAN_S),
            )
        finally:
            process.wait(Deadline.after(_CLEAN_S))

    left: dict[str, list[str]] = {}
    for host, answer in run.each(done, [s for s in run.sessions if s.spec.name in run.processes]).items():
        left[host] = [str(f) for f in answer.get("left", [])]
    return left


def observe_storage(ctx: CheckContext) -> StorageObservation:
    cfg = ctx.config.section(StorageSection)
    data, checkpoint = tuple(cfg.data), cfg.checkpoint_dir
    sessions = ctx.live_sessions
    token = secrets.token_hex(6)
    marker_of = {s.spec.name: f"{MARKER_PREFIX}{token}-{i}" for i, s in enumerate(sessions)}
    owners = {m: h for h, m in marker_of.items()}
    budget = ctx.deadline.cap(_READY_S + _LOOK_S + cfg.walk_timeout_s + _CLEAN_S + 30)
    run = _Run(ctx, cfg, sessions, marker_of, budget)
    inspected: dict[str, Any] = {}
    seen: dict[str, Any] = {}
    manifests: dict[str, dict[str, Any]] = {}
    try:
        inspected = _start_probes(run)
        seen = _look_for_markers(run, inspected)
        manifests = _walk_data(run, StorageObservation(data, checkpoint, inspected, seen, owners))
    finally:
        left = _clean_up(run)
    order = {s.spec.name: i for i, s in enumerate(sessions)}
    return StorageObservation(
        data=data,
        checkpoint=checkpoint,
        inspected=dict(sorted(inspected.items(), key=lambda kv: order[kv[0]])),
        seen=seen,
        owners=owners,
        manifests=manifests,
        errors=dict(sorted(run.errors.items(), key=lambda kv: order[kv[0]])),
        left=left,
    )


OBSERVE = Probe("storage", observe_storage)
