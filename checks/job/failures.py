"""Why a job died, from what the nodes printed: each failed node diagnosed from its ranks' stderr
(culprits first, the nodes that only suffered after). The findings made of them are
:mod:`checks.job.job_findings`'s.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from checks.job.node.markers import BEAT_MARKER, END_MARKER, PHASE_MARKER, RANK_MARKER, marked_lines
from checks.job.outcome import JobOutcome, NodeOutcome, phase_errors
from preflight.nodeset import fold

FailureKind = Literal["lost", "never_joined", "crashed", "hung", "victim", "timed_out", "ended"]


@dataclass(frozen=True)
class RendezvousCount:
    """The master's store gave up waiting with fewer nodes than the job has (torch's
    ``2/3 clients joined``)."""

    joined: int
    total: int

    @property
    def said(self) -> str:
        return f"rendezvous saw only {self.joined} of {self.total} nodes join"


@dataclass(frozen=True)
class MissedBarrier:
    """Ranks a monitored barrier reports missing (torch's ``Ranks 2 failed to pass monitoredBarrier
    in 3000 ms``), and how long it waited for them."""

    ranks: tuple[int, ...]
    waited_ms: int

    @property
    def waited(self) -> str:
        return f"monitored_barrier waited {_seconds(self.waited_ms)}"


@dataclass(frozen=True)
class RankEnd:
    """How a node's first failed rank ended: its exit status, or the signal that ended it."""

    rank: int | None  # None: the log did not say which rank
    status: int | None = None
    signal: int | None = None
    signal_name: str | None = None  # ``SIGKILL``; None for a signal without a name

    @property
    def said(self) -> str:
        who = "a rank" if self.rank is None else f"rank {self.rank}"
        if self.signal is None:
            return f"{who} exited with status {self.status}"
        by = self.signal_name or f"signal {self.signal}"
        outside = (
            " (from outside the job: the out-of-memory killer?)" if self.signal_name == "SIGKILL" else ""
        )
        return f"{who} was ended by {by}{outside}"


@dataclass(frozen=True)
class Silence:
    """A node that stopped answering during the job: for how long it had sent no heartbeat when
    preflight gave up on it (``silent_s``; None: its connection was lost, no silence counted), since
    when (``since``, UTC, ISO 8601), and the phase its last heartbeat named (``last_phase``)."""

    silent_s: float | None = None
    since: str | None = None
    last_phase: str | None = None

    def said(self, phase: str | None = None) -> str:
        """What happened to the node, in the phase its last heartbeat named, else in ``phase``
        (the phase the job was in, where the one who says it knows it), else during the job."""
        during = f"during the {phase} phase" if phase else "during the job"
        if self.silent_s is None:
            return f"stopped answering {during}"
        where = f"in the {self.last_phase} phase" if self.last_phase else during
        since = f", since {self.since[11:19]} UTC" if self.since else ""
        return (
            f"went silent {where}: no heartbeat for {self.silent_s:g} s{since} "
            "(its link is down, or its processes are stopped or hung)"
        )


@dataclass(frozen=True)
class NodeFailure:
    """What went wrong on one node; ``culprit`` is False for nodes that only suffered from another.
    What the reason is about, where a finding needs it, is kept as fields too."""

    host: str
    kind: FailureKind
    reason: str
    culprit: bool
    # For a node that waited at the join barrier: the ranks it saw miss it.
    ranks: tuple[int, ...] = ()
    # The master's count, where the failure is the rendezvous falling short of the job's nodes.
    rendezvous: RendezvousCount | None = None
    # It lost its connection to a peer (closed or reset under it).
    peer_lost: bool = False
    # For a node that stopped answering (``lost``): what is known of its silence. ``reason`` says
    # it without the phase the job was in; ``said`` with it, where a finding knows it.
    silence: Silence | None = None
    # For a node that ``crashed``: a signal ended it (or its first failed rank), not an error exit.
    by_signal: bool = False

    def said(self, phase: str | None = None) -> str:
        """The reason, for a node that stopped answering said with the phase the job was in where
        ``phase`` gives it."""
        return self.silence.said(phase) if self.silence is not None else self.reason


_MASTER_TIMEOUT_RE = re.compile(
    r"client socket has timed out after (?P<ms>\d+)ms "
    r"while trying to connect to \((?P<addr>[^,]+), (?P<port>\d+)\)"
)
_MASTER_FAILED_RE = re.compile(r"failed to connect/validate to host (?P<addr>\S+?):(?P<port>\d+)")
_REFUSED_RE = re.compile(r"Connection refused|ECONNREFUSED|errno: 111|\[Errno 111\]", re.IGNORECASE)
_BARRIER_RE = re.compile(
    r"Ranks? (?P<ranks>\d+(?:\s*,\s*\d+)*) failed to pass monitoredBarrier in (?P<ms>\d+) ms"
)
PEER_RE = re.compile(
    r"Connection (?:closed|reset) by peer|Connection reset|Broken pipe|"
    r"Failed to recv, got 0 bytes|socketProgress: Connection closed",
    re.IGNORECASE,
)
TIMEOUT_RE = re.compile(
    r"Timed out waiting|Watchdog caught collective operation timeout|timed out in monitoredBarrier|"
    r"operation timed out|ran for \d+ milliseconds before timing out",
    re.IGNORECASE,
)
_EXCEPTION_RE = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?(?P<name>[A-Za-z_]\w*(?:Error|Exception))\b:?\s*(?P<text>.*)$"
)
_RANK_PREFIX_RE = re.compile(r"^\[rank\d+\]:\s?")
_SOURCE_PREFIX_RE = re.compile(r"\[/[^\]]+:\d+\]\s*")
# torchrun's "Root Cause" block, in logs of nodes whose ranks torchrun started (recorded jobs):
# the rank that died first (``rank      : 2 (local_rank: 0)``) and the signal that ended it
# (``traceback : Signal 9 (SIGKILL) received by PID 17252``).
_TORCHRUN_SIGNAL_RE = re.compile(r"Signal (?P<num>\d+) \((?P<name>SIG\w+)\)")
_TORCHRUN_RANK_RE = re.compile(r"rank\s*:\s*(?P<rank>\d+) \(local_rank: \d+\)")
# The master's store gave up waiting for nodes; a node that joined waited for the others.
_CLIENTS_RE = re.compile(r"waiting for clients\. (?P<joined>\d+)/(?P<total>\d+) clients joined")
_ASSIGNED_RE = re.compile(r"wait timeout after \d+ms, keys: \S*torchelastic/assigned_ranks")
# A rank that waited in the store for keys the other ranks never wrote (the process group's
# addresses while it formed): it came, the others did not.
_STORE_WAIT_RE = re.compile(r"DistStoreError: wait timeout after (?P<ms>\d+)ms")
# Lines that never explain a failure: warnings, launcher chatter, NCCL INFO, C++ frames.
_NOISE_RE = re.compile(
    r"^\s*$|^\s|^\*+$|^frame #|UserWarning|Warning:|warnings\.warn|^Traceback|^Exception raised from|"
    r"<omitting python frames>|NCCL INFO|^\[?[WIE]\d{4} |Setting OMP_NUM_THREADS|"
    + re.escape(RANK_MARKER)
    + "|"
    + re.escape(PHASE_MARKER)
    + "|"
    + re.escape(BEAT_MARKER)
    + "|"
    + re.escape(END_MARKER)
)


def clean_message(text: str, limit: int = 240) -> str:
    """One readable line from an error: no ``[rankN]:`` or ``[/path/file.cc:123]`` prefixes, bounded."""
    text = _RANK_PREFIX_RE.sub("", text.strip())
    text = _SOURCE_PREFIX_RE.sub("", text)
    text = text.split(" This is typically caused by")[0].strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def last_error_line(stderr: str, ended: RankEnd | None = None) -> str | None:
    """The line a person would quote from a failed node's stderr: the last exception, else how its
    first failed rank ``ended`` (the host writes that last), else the last line that is not noise."""
    lines = [_RANK_PREFIX_RE.sub("", line.rstrip()) for line in stderr.splitlines()]
    exceptions = [line for line in lines if _EXCEPTION_RE.match(line) and "ChildFailedError" not in line]
    if exceptions:
        return clean_message(exceptions[-1])
    if ended is not None:
        return ended.said
    meaningful = [line for line in lines if not _NOISE_RE.search(line)]
    return clean_message(meaningful[-1]) if meaningful else None


def rank_end(stderr: str) -> RankEnd | None:
    """How the node's first failed rank ended: its host's end record (the first, the one the host
    writes), else, for a node whose ranks torchrun started, the signal in its "Root Cause" block."""
    for record in marked_lines(stderr, END_MARKER):
        rank, status, number, name = (record.get(k) for k in ("rank", "status", "signal", "signal_name"))
        if isinstance(status, int) or isinstance(number, int):
            return RankEnd(
                rank if isinstance(rank, int) else None,
                status if isinstance(status, int) else None,
                number if isinstance(number, int) else None,
                name if isinstance(name, str) else None,
            )
    signal = _TORCHRUN_SIGNAL_RE.search(stderr)
    if signal is None:
        return None
    root = _TORCHRUN_RANK_RE.search(stderr)
    rank = int(root.group("rank")) if root else None
    return RankEnd(rank, signal=int(signal.group("num")), signal_name=signal.group("name"))


def _rendezvous_count(text: str) -> RendezvousCount | None:
    """The master's count of the nodes that joined, where torch's store error in ``text`` gives it."""
    clients = _CLIENTS_RE.search(text)
    return RendezvousCount(int(clients.group("joined")), int(clients.group("total"))) if clients else None


def missed_barrier_in(text: str) -> MissedBarrier | None:
    """The ranks a monitored barrier reports missing in ``text``."""
    barrier = _BARRIER_RE.search(text)
    if barrier is None:
        return None
    ranks = tuple(int(r) for r in re.split(r"\s*,\s*", barrier.group("ranks")))
    return MissedBarrier(ranks, int(barrier.group("ms")))


def never_reached(ranks: Sequence[int], hosts: Mapping[int, str]) -> str:
    return f"{describe_ranks(ranks, hosts)} never reached the join barrier"


def rank_hosts(outcome: JobOutcome) -> dict[int, str]:
    """Global rank -> inventory host name: from the document when there is one, else from the rank
    lines every rank writes to its node's stderr."""
    hosts: dict[int, str] = {}
    for node in outcome.nodes:
        for marker in marked_lines(node.stderr, RANK_MARKER):
            if isinstance(marker.get("rank"), int):
                hosts[marker["rank"]] = node.host
    document = outcome.document or {}
    names = list(document.get("nodes") or [])
    by_rank = {n.node_rank: n.host for n in outcome.nodes}
    for info in document.get("ranks") or []:
        node_rank = info.get("node_rank")
        rank = info.get("rank")
        if not isinstance(rank, int) or not isinstance(node_rank, int):
            continue
        if node_rank in by_rank:
            hosts[rank] = by_rank[node_rank]
        elif node_rank < len(names):
            hosts[rank] = str(names[node_rank])
    return hosts


def phases_reached(outcome: JobOutcome) -> list[str]:
    """The phases the job started, in order, from the phase lines in the nodes' stderr."""
    reached: list[str] = []
    for node in outcome.nodes:
        for marker in marked_lines(node.stderr, PHASE_MARKER):
            phase = marker.get("phase")
            if isinstance(phase, str) and phase not in reached:
                reached.append(phase)
    order = {name: i for i, name in enumerate(outcome.phases)}
    return sorted(reached, key=lambda p: order.get(p, len(order)))


def describe_ranks(ranks: Sequence[int], hosts: Mapping[int, str]) -> str:
    """``rank 5 on node2`` / ``ranks 4, 5 on node2``, grouped by node."""
    by_host: dict[str, list[int]] = {}
    for rank in sorted(set(ranks)):
        by_host.setdefault(hosts.get(rank, "an unknown node"), []).append(rank)
    parts = []
    for host, group in by_host.items():
        label = "rank" if len(group) == 1 else "ranks"
        parts.append(f"{label} {', '.join(map(str, group))} on {host}")
    return "; ".join(parts)


def _seconds(ms: str | int) -> str:
    return f"{int(ms) / 1000:g} s"


def _never_joined(stderr: str) -> str | None:
    """Why this node's ranks never reached the master's store, when its stderr says so."""
    master = _MASTER_TIMEOUT_RE.search(stderr) or _MASTER_FAILED_RE.search(stderr)
    if master is None:
        return None
    address = f"{master.group('addr')}:{master.group('port')}"
    if _REFUSED_RE.search(stderr):
        detail = "connection refused"
    elif master.groupdict().get("ms"):
        waited = _seconds(master.group("ms"))
        detail = f"no connection within {waited}: the port is closed, filtered or dropped"
    else:
        detail = "no connection"
    return f"its ranks could not reach the master {address} ({detail})"


def _diagnose(node: NodeOutcome, hosts: Mapping[int, str]) -> NodeFailure:
    """What one failed node's outcome and stderr say happened to it."""
    stderr = node.stderr
    if (
        node.lost
        and node.silent_s is not None
        and node.last_phase is None
        and not marked_lines(stderr, RANK_MARKER)
    ):
        reason = (
            f"started no rank: sent nothing for {node.silent_s:g} s while the others beat, and no longer "
            "answers (its link is down, or its processes are stopped)"
        )
        return NodeFailure(node.host, "never_joined", reason, True)
    if node.lost:
        silence = (
            Silence(node.silent_s, node.silent_since, node.last_phase)
            if node.silent_s is not None
            else Silence()
        )
        return NodeFailure(node.host, "lost", silence.said(), True, silence=silence)
    unreachable = _never_joined(stderr)
    if unreachable is not None:
        # Even when ended by preflight: the master gave up on it first.
        return NodeFailure(node.host, "never_joined", unreachable, True)
    if node.killed:
        return NodeFailure(node.host, "ended", "ended by preflight after another node failed", False)
    barrier = missed_barrier_in(stderr)
    if barrier:
        reason = f"saw {describe_ranks(barrier.ranks, hosts)} miss the join barrier ({barrier.waited})"
        return NodeFailure(node.host, "victim", reason, False, barrier.ranks)
    count = _rendezvous_count(stderr)
    if count:
        return NodeFailure(node.host, "victim", f"the {count.said}", False, rendezvous=count)
    if _ASSIGNED_RE.search(stderr):
        return NodeFailure(
            node.host, "victim", "joined the rendezvous, but the other nodes never came", False
        )
    store_wait = _STORE_WAIT_RE.search(stderr)
    if store_wait:
        reason = (
            f"joined, and waited {_seconds(store_wait.group('ms'))} at the rendezvous for ranks that "
            "never came"
        )
        return NodeFailure(node.host, "victim", reason, False)
    peer = PEER_RE.search(stderr)
    if peer:
        line = next((ln for ln in stderr.splitlines() if PEER_RE.search(ln)), peer.group(0))
        reason = f"lost its connection to a peer: {clean_message(line)}"
        return NodeFailure(node.host, "victim", reason, False, peer_lost=True)
    if TIMEOUT_RE.search(stderr):
        line = next((ln for ln in stderr.splitlines() if TIMEOUT_RE.search(ln)), "")
        reason = f"a collective timed out waiting for peers: {clean_message(line)}"
        return NodeFailure(node.host, "victim", reason, False)
    if node.timed_out:
        return NodeFailure(node.host, "timed_out", "did not finish before its deadline", False)
    ended = rank_end(stderr)
    if ended is not None and ended.signal is not None:
        return NodeFailure(node.host, "crashed", ended.said, True, by_signal=True)
    if node.exit_status is not None and node.exit_status < 0:
        return NodeFailure(node.host, "crashed", f"ended by signal {-node.exit_status}", True, by_signal=True)
    quoted = last_error_line(stderr, ended)
    status = "no exit status" if node.exit_status is None else f"exit status {node.exit_status}"
    reason = f"failed ({status}): {quoted}" if quoted else f"failed ({status})"
    return NodeFailure(node.host, "crashed", reason, True)


def _started_hosts(outcome: JobOutcome) -> set[str]:
    return {
        n.host for n in outcome.nodes if marked_lines(n.stderr, RANK_MARKER) or _ASSIGNED_RE.search(n.stderr)
    }


def _short_rendezvous(outcome: JobOutcome, failures: Sequence[NodeFailure]) -> RendezvousCount | None:
    """The master's count of the nodes that joined, when it gave up short of the job's nodes: on a
    node that failed, or in the document's errors (a master that reported its failed join and ended
    cleanly)."""
    said = next((f.rendezvous for f in failures if f.rendezvous is not None), None)
    if said is not None:
        return said
    for errors in phase_errors(outcome.document).values():
        for error in errors:
            count = _rendezvous_count(error["message"])
            if count:
                return count
    return None


# Culprits that stalled the others: what the others' timeouts and ends are consequences of.
_STALLING: frozenset[FailureKind] = frozenset({"lost", "never_joined", "hung"})


def _as_consequences(failures: Sequence[NodeFailure]) -> list[NodeFailure]:
    """The nodes that only waited (a timeout, a peer gone, ended by preflight) said to have stopped
    because of the nodes that stalled, when some did: one cause, one finding."""
    stalled = list(dict.fromkeys(f.host for f in failures if f.culprit and f.kind in _STALLING))
    if not stalled:
        return list(failures)
    because = f"stopped because {fold(stalled)} stalled"
    return [
        f if f.culprit or f.host in stalled else dataclasses.replace(f, reason=f"{because}: {f.reason}")
        for f in failures
    ]


def explain_failures(outcome: JobOutcome) -> list[NodeFailure]:
    """Every node that did not finish cleanly, culprits first.

    Culprits: nodes that stopped answering, never joined, or failed on their own; ranks a
    monitored barrier reports missing. Victims (a peer closed the connection, a collective
    timed out) and nodes preflight ended are not culprits, unless nothing else explains the
    failure: then the nodes that timed out are named.
    """
    hosts = rank_hosts(outcome)
    failures = [_diagnose(node, hosts) for node in outcome.nodes if not node.ok]
    named = {f.host for f in failures if f.culprit}
    extra: list[NodeFailure] = []
    for failure in failures:
        for rank in failure.ranks:
            host = hosts.get(rank)
            if host is not None and host not in named:
                named.add(host)
                extra.append(NodeFailure(host, "hung", never_reached([rank], hosts), True))
    failures = extra + failures
    short = _short_rendezvous(outcome, failures)
    if short is not None and not any(f.culprit for f in failures):
        # The master counted fewer nodes than expected; the ones that show no sign of joining
        # (no worker started, no wait on the rendezvous) are the missing ones.
        failures = [
            NodeFailure(
                f.host, "never_joined", f"never joined the rendezvous ({short.said})", True, rendezvous=short
            )
            if f.kind in ("ended", "timed_out") and f.host not in _started_hosts(outcome)
            else f
            for f in failures
        ]
    failures = _as_consequences(failures)
    if not any(f.culprit for f in failures):
        # Nobody failed on their own: the ones that hung until their deadline are the suspects.
        failures = [dataclasses.replace(f, culprit=True) if f.kind == "timed_out" else f for f in failures]
    failures.sort(key=lambda f: not f.culprit)
    return failures
