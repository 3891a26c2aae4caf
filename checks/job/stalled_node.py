"""Which node stalled a phase that timed out, from what every node kept, not from which rank
complained: the rank that reports a timeout is the one that waited, usually on another node.

Two kinds of evidence, from the heartbeats (:mod:`checks.job.node.harness`), read by the launcher
into each node's :attr:`NodeOutcome.progress`:

- progress: each rank's phase, the collectives it completed in it, and whether it had done its
  part. The ranks of one node that are behind every other rank (not done while others are, or
  fewer collectives completed) stalled the others.
- network counters: each node's TCP retransmissions per peer address between the phase's start
  and its last heartbeat. When nearly all of them are on connections of one node (with any
  peer, or inside itself), that node lost its traffic. When no node holds most of them (a busy
  healthy pair retransmits more segments than a stalled lossy one that sends little), the node
  whose every connection lost far more per MiB sent than every other pair lost its traffic.
- link errors: the InfiniBand port error counters (symbol errors, receive errors, link
  downs...) of one node grew during the phase, and no other node's did: NCCL over verbs
  moves no TCP segment, and a bad cable or port shows there.

Where neither names one node, nothing is named from here, and the phase's finding names no node:
the rank that reported the timeout only waited.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checks.job.node.markers import BEAT_MARKER, marked_lines
from checks.job.outcome import Beat, JobOutcome, NetSample, NodeOutcome, PhaseProgress
from preflight.model import CheckResult

# Retransmissions during a phase below this many, on the whole job, name nobody. Few are needed:
# a connection stalled by loss backs off exponentially (0.2, 0.4, 0.8... s), so a phase that
# timed out on it after 20 s may show no more than six or seven, where a healthy fabric shows none.
MIN_RETRANSMITS = 5
# The share of the phase's retransmissions on one node's connections that names it.
RETRANSMIT_SHARE = 0.8
# A pair of nodes counts as a node's peer in the tie-break between two named nodes when it holds
# at least this share of the phase's retransmissions (a stray one on a healthy connection does not).
BROAD_SHARE = 0.05
# A phase that completed, only slowly, moved all its data: loss that slowed it leaves hundreds
# of retransmissions (159 in the lab at 10% loss on one node), where a shaper's queue on a slow
# route drops a handful wherever its bursts land (5, all on one node, in a lab cut between groups).
MIN_RETRANSMITS_COMPLETED = 20


@dataclass(frozen=True)
class Attribution:
    """The node named, the evidence that named it (``by``: ``progress`` or ``retransmits``), in a
    phrase for the finding and as data for its details."""

    host: str
    by: str
    evidence: str
    details: Mapping[str, Any] = field(default_factory=dict)


# Beats kept per rank and phase (the last ones), and counter samples per node and phase.
KEPT_BEATS = 32
# A rank whose last beat came this long before the first failure had stopped beating (its ranks
# beat every 2 s, and at once on each change).
STOPPED_BEATING_S = 5.0


def read_progress(stderr: str) -> dict[str, PhaseProgress]:
    """What a node's heartbeats say, for :attr:`NodeOutcome.progress`, by phase: ``ranks``, each
    rank's last beats in it (:class:`Beat`), and ``net``, the node's counter samples
    (:class:`NetSample`: the phase's first, then its last ones)."""
    phases: dict[str, PhaseProgress] = {}
    for beat in marked_lines(stderr, BEAT_MARKER):
        phase, rank, t = beat.get("phase"), beat.get("rank"), beat.get("t")
        if not isinstance(phase, str) or not isinstance(t, (int, float)):
            continue
        seen = phases.setdefault(phase, {"ranks": {}, "net": []})
        if isinstance(rank, int):
            beats = seen["ranks"].setdefault(str(rank), [])
            beats.append(
                Beat(t=t, ops=beat.get("ops"), done=bool(beat.get("done")), failed=bool(beat.get("failed")))
            )
            del beats[:-KEPT_BEATS]
        net = beat.get("net")
        if isinstance(net, Mapping):
            samples = seen["net"]
            samples.append(NetSample(t=t, net=dict(net)))
            if len(samples) > KEPT_BEATS:
                del samples[1 : len(samples) - KEPT_BEATS + 1]
    return phases


def _rank_beats(outcome: JobOutcome, phase: str) -> Iterator[tuple[str, str, list[Beat]]]:
    """Each rank's kept beats in ``phase``, with its node: (host, rank, beats)."""
    for node in outcome.nodes:
        seen = node.progress.get(phase)
        for rank, beats in ((seen.get("ranks") if seen else None) or {}).items():
            yield node.host, rank, beats


def _net_samples(node: NodeOutcome, phase: str) -> list[NetSample]:
    """The node's counter samples in ``phase``."""
    seen = node.progress.get(phase)
    return (seen.get("net") if seen else None) or []


# The phase whose traffic stays inside each node.
INSIDE_PHASE = "intranode"


def stalled_node(outcome: JobOutcome, phase: str) -> Attribution | None:
    """The one node that stalled ``phase``. Between nodes, by retransmissions first: a node that loses
    segments is named by its own connections, while the partner it slowed in a pair test only lags in
    progress. Inside the nodes (``intranode``), by progress first: a node's ranks talk over its own
    loopback, and both ends of a slowed connection count its retransmissions."""
    first_failure = _first_failure(outcome, phase)
    progress = _by_progress(outcome, phase, first_failure)
    if phase == INSIDE_PHASE:
        return progress or _by_retransmits(outcome, phase, first_failure)
    return (
        _by_retransmits(outcome, phase, first_failure)
        or _by_link_errors(outcome, phase, first_failure)
        or progress
    )


def _first_failure(outcome: JobOutcome, phase: str) -> float | None:
    """When the first rank's part of ``phase`` failed (a timeout, a peer gone), by its beat."""
    times = [beat["t"] for _, _, beats in _rank_beats(outcome, phase) for beat in beats if beat["failed"]]
    return min(times) if times else None


def _by_progress(outcome: JobOutcome, phase: str, until: float | None) -> Attribution | None:
    """The ranks behind all others when the first rank failed: silent, not done while others
    are, or with less than half of the others' collectives completed; named when they are all
    on one node."""
    state: dict[int, tuple[str, float, int, bool]] = {}
    for host, rank, beats in _rank_beats(outcome, phase):
        before = [b for b in beats if until is None or b["t"] <= until]
        if before and isinstance(ops := before[-1]["ops"], int):
            state[int(rank)] = (host, float(before[-1]["t"]), int(ops), bool(before[-1]["done"]))
    if len({host for host, _, _, _ in state.values()}) < 2:
        return None
    behind: set[int] = set()
    how = ""
    if until is not None:
        behind = {r for r, (_, t, _, _) in state.items() if until - t >= STOPPED_BEATING_S}
        if behind:
            quiet = min(until - state[r][1] for r in behind)
            how = f"had sent no heartbeat for {quiet:.0f} s when the first rank timed out"
    done = {r for r, (_, _, _, d) in state.items() if d}
    if not behind and done and len(done) < len(state):
        behind = set(state) - done
        how = "had not done their part of the phase when the others had"
    if not behind and not done:
        # Ranks of a phase may differ in their count (a pair test leaves some ranks out of a
        # round): only a rank at less than half of the others' count is behind.
        least = min(ops for _, _, ops, _ in state.values())
        most = max(ops for _, _, ops, _ in state.values())
        behind = {r for r, (_, _, ops, _) in state.items() if ops == least} if least < most / 2 else set()
        what = "collective" if least == 1 else "collectives"
        how = f"had completed {least} {what} of the phase when the others had {most}"
    hosts = {state[r][0] for r in behind}
    if len(hosts) != 1 or len(behind) == len(state):
        return None
    waited = not how.startswith("had sent no heartbeat") and phase != INSIDE_PHASE
    if waited and hosts & _reporters(outcome, phase, until):
        # Behind only in its count, on the node whose rank timed out first, in a phase between
        # nodes: it may have waited on its peer as well as stalled it, and naming the waiter
        # drains a healthy node. (Inside a node, its ranks wait only on each other.)
        return None
    (host,) = hosts
    ranks = sorted(behind)
    label = "rank" if len(ranks) == 1 else "ranks"
    evidence = f"progress: {label} {', '.join(map(str, ranks))} on {host} {how}"
    details = {
        "ranks": {str(r): {"host": h, "ops": o, "done": d} for r, (h, _, o, d) in sorted(state.items())}
    }
    return Attribution(host, "progress", evidence, details)


def _reporters(outcome: JobOutcome, phase: str, first_failure: float | None) -> set[str]:
    """The nodes whose ranks failed first in ``phase`` (timed out, or saw a peer go)."""
    if first_failure is None:
        return set()
    return {
        host
        for host, _, beats in _rank_beats(outcome, phase)
        if any(beat["failed"] and beat["t"] <= first_failure for beat in beats)
    }


def _owner(address: str, reporter: str, owners: Mapping[str, str]) -> str | None:
    try:
        if ipaddress.ip_address(address).is_loopback:
            return reporter
    except ValueError:
        return None
    return owners.get(address)


def _spans(outcome: JobOutcome, phase: str, until: float | None) -> dict[str, dict[str, Any]]:
    """Each node's counter samples at the phase's start and at its last beat before ``until``."""
    return {n.host: span for n in outcome.nodes if (span := _span(_net_samples(n, phase), until)) is not None}


def _span(samples: Sequence[NetSample], until: float | None) -> dict[str, Any] | None:
    """The first sample and the last one taken before ``until`` (the connections are gone after)."""
    before = [sample["net"] for sample in samples if until is None or sample["t"] <= until]
    return {"start": samples[0]["net"], "end": before[-1]} if len(before) >= 2 else None


def _by_retransmits(
    outcome: JobOutcome, phase: str, until: float | None, least: int = MIN_RETRANSMITS
) -> Attribution | None:
    """The one node on whose connections nearly all of the phase's retransmissions were, when
    they were at least ``least``."""
    samples = _spans(outcome, phase, until)
    owners = {
        str(address): host
        for host, net in samples.items()
        for address in (net.get("end") or {}).get("local") or ()
    }
    pairs: dict[frozenset[str], int] = {}
    sent: dict[frozenset[str], int] = {}
    for host, net in samples.items():
        before = (net.get("start") or {}).get("peers") or {}
        after = (net.get("end") or {}).get("peers") or {}
        for address, counts in after.items():
            peer = _owner(str(address), host, owners)
            if peer is None:
                continue
            earlier = before.get(address) or {}
            key = frozenset((host, peer))
            delta = int(counts.get("retrans") or 0) - int(earlier.get("retrans") or 0)
            if delta > 0:
                pairs[key] = pairs.get(key, 0) + delta
            moved = int(counts.get("bytes_sent") or 0) - int(earlier.get("bytes_sent") or 0)
            sent[key] = sent.get(key, 0) + max(0, moved)
    total = sum(pairs.values())
    if total < least:
        return None
    share = {host: sum(count for pair, count in pairs.items() if host in pair) / total for host in samples}
    counted = _broadest([host for host, part in share.items() if part >= RETRANSMIT_SHARE], pairs, sent)
    rates = _rates(pairs, sent)
    by_rate = _by_loss_rate(list(samples), pairs, rates)
    # The count names the node that moved the most traffic as readily as the one that lost it; the
    # rate per MiB sent tells them apart, and where the two disagree the rate decides.
    if by_rate is not None and by_rate != counted:
        host, how = by_rate, "rate"
    elif counted is not None and not _outlost(counted, pairs, rates):
        host, how = counted, "count"
    else:
        return None
    mine = sum(count for pair, count in pairs.items() if host in pair)
    others = _names(sorted({h for pair in pairs for h in pair if h != host and pairs[pair]}))
    inside = pairs.get(frozenset((host,)), 0)
    where = f"with {others}" if others else "inside the node"
    if others and inside:
        where += " and inside the node"
    if how == "count":
        evidence = (
            f"retransmits: {mine} of the phase's {total} TCP retransmissions were on {host}'s connections "
            f"({where}): it lost traffic"
        )
    else:
        own = min(rate for pair, rate in rates.items() if host in pair)
        other = max((rate for pair, rate in rates.items() if host not in pair), default=0.0)
        evidence = (
            f"retransmits: every connection of {host} ({where}) retransmitted at least {own:.3g} "
            f"segments per MiB sent, the others at most {other:.3g}: it lost traffic"
        )
    details = {
        "retransmits": {_pair_name(pair): n for pair, n in pairs.items()},
        "mib_sent": {_pair_name(pair): round(n / MIB, 3) for pair, n in sent.items() if n},
        "counters": _counter_deltas(samples),
    }
    return Attribution(host, "retransmits", evidence, details)


def _broadest(
    candidates: Sequence[str], pairs: Mapping[frozenset[str], int], sent: Mapping[frozenset[str], int]
) -> str | None:
    """The one candidate; of several (the two ends of the one connection that lost most), the one
    that lost traffic with the most peers: a node that drops what it receives loses it from every
    peer, while its partner lost only what went to it. None when that does not single one out.

    A connection counts as lost with when it holds a share of the phase's retransmissions, or when
    it lost at least as much per MiB sent as the connection that lost most: a peer that only waited
    on the stalled pair sends the lossy node little, and loses it all the same (a real lab run at 25%
    loss on one node: 6 segments retransmitted on 5 KB between it and the waiting node, 0 between
    the waiting node and the lossy node's partner, against 8,891 on the stalled pair's 84 MiB)."""
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    total = sum(pairs.values())
    heaviest = max(pairs, key=lambda pair: pairs[pair])
    worst = _rate(pairs, sent, heaviest)

    def lost_with(pair: frozenset[str]) -> bool:
        count = pairs.get(pair, 0)
        if count >= BROAD_SHARE * total:
            return True
        rate = _rate(pairs, sent, pair)
        return count >= MIN_PAIR_RETRANSMITS and rate is not None and worst is not None and rate >= worst

    peers = {
        host: {peer for pair in pairs if host in pair and lost_with(pair) for peer in pair if peer != host}
        for host in candidates
    }
    widest = max(len(p) for p in peers.values())
    broadest = [host for host in candidates if len(peers[host]) == widest]
    return broadest[0] if len(broadest) == 1 else None


def _rate(
    pairs: Mapping[frozenset[str], int], sent: Mapping[frozenset[str], int], pair: frozenset[str]
) -> float | None:
    """Segments ``pair`` retransmitted per MiB it sent, however little; None where it sent nothing."""
    moved = sent.get(pair, 0)
    return pairs.get(pair, 0) / (moved / MIB) if moved > 0 else None


MIB = 1 << 20
# The loss-rate rule, where no node holds most of the retransmissions (a busy healthy pair can
# retransmit more segments than a stalled lossy one, which sends little): a pair's rate counts from
# this much traffic; a node is named when each of its pairs lost at least LOSS_RATE_FACTOR times the
# rate of every pair without it, and at least MIN_LOSS_RATE segments per MiB.
MIN_RATE_BYTES = 64 << 10
LOSS_RATE_FACTOR = 5.0
MIN_LOSS_RATE = 1.0
# ... and each of its pairs retransmitted at least this many segments (a stray one or two on a
# connection that moved little is no loss rate).
MIN_PAIR_RETRANSMITS = 3


def _pair_name(pair: frozenset[str]) -> str:
    return " - ".join(sorted(pair)) if len(pair) > 1 else next(iter(pair))


def _rates(
    pairs: Mapping[frozenset[str], int], sent: Mapping[frozenset[str], int]
) -> dict[frozenset[str], float]:
    """Segments retransmitted per MiB sent, for each pair of nodes that moved enough to tell."""
    return {
        pair: rate
        for pair, n in sent.items()
        if n >= MIN_RATE_BYTES and len(pair) > 1 and (rate := _rate(pairs, sent, pair)) is not None
    }


def _by_loss_rate(
    hosts: Sequence[str], pairs: Mapping[frozenset[str], int], rates: Mapping[frozenset[str], float]
) -> str | None:
    """The one node whose every connection lost traffic at a rate (:func:`_rates`) far above every
    other pair's."""
    named = []
    for host in hosts:
        own = [rate for pair, rate in rates.items() if host in pair]
        others = [rate for pair, rate in rates.items() if host not in pair]
        if len(own) < 2 or not others:
            continue  # one pair alone does not tell its two ends apart
        few = min(pairs.get(pair, 0) for pair in rates if host in pair)
        if few >= MIN_PAIR_RETRANSMITS and min(own) >= max(MIN_LOSS_RATE, LOSS_RATE_FACTOR * max(others)):
            named.append(host)
    return named[0] if len(named) == 1 else None


def _outlost(host: str, pairs: Mapping[frozenset[str], int], rates: Mapping[frozenset[str], float]) -> bool:
    """Whether a connection without ``host`` lost more per MiB sent (:func:`_rates`) than every one
    of its own: then the count named a busy healthy node, not the lossy one (at 25% loss on one node,
    measured: a healthy pair that moved 170 MiB retransmitted 7 segments a MiB, the lossy node's pairs
    105 and 250)."""
    own = [rate for pair, rate in rates.items() if host in pair]
    lost = [pair for pair in rates if host not in pair and pairs.get(pair, 0) >= MIN_PAIR_RETRANSMITS]
    others = [rates[pair] for pair in lost]
    return bool(own and others) and max(others) > max(own)


# Counters of a node's own fabric link that grow only when it corrupts or loses what crosses it
# (port_rcv_remote_physical_errors is left out: it counts packets corrupted upstream, on another
# link; port_xmit_wait grows under any congestion). Interface errors are left out too: they are
# summed over every interface, and a management or storage NIC's errors say nothing of the job.
LINK_ERROR_COUNTERS = (
    "ib.symbol_error",
    "ib.link_error_recovery",
    "ib.port_rcv_errors",
    "ib.link_downed",
)


def _by_link_errors(outcome: JobOutcome, phase: str, until: float | None) -> Attribution | None:
    """The one node whose own link's error counters grew during the phase: NCCL over InfiniBand
    verbs moves no TCP segment, and a bad cable or port shows here."""
    samples = _spans(outcome, phase, until)
    grown = {
        host: errors
        for host, deltas in _counter_deltas(samples).items()
        if (errors := {name: n for name, n in deltas.items() if name in LINK_ERROR_COUNTERS})
    }
    if len(grown) != 1 or len(samples) < 2:
        return None
    ((host, errors),) = grown.items()
    said = ", ".join(f"{name} +{n}" for name, n in sorted(errors.items()))
    evidence = f"link errors: {said} on {host} during the phase, on no other node: its link lost traffic"
    return Attribution(host, "link_errors", evidence, {"counters": grown})


def _names(hosts: Sequence[str]) -> str:
    return ", ".join(hosts)


def _counter_deltas(samples: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Each node's kernel and interface counters that grew during the phase, by how much."""
    deltas: dict[str, dict[str, int]] = {}
    for host, net in samples.items():
        before = (net.get("start") or {}).get("counters") or {}
        after = (net.get("end") or {}).get("counters") or {}
        grown = {
            name: int(value) - int(before.get(name) or 0)
            for name, value in after.items()
            if isinstance(value, int) and int(value) > int(before.get(name) or 0)
        }
        if grown:
            deltas[host] = grown
    return deltas


def with_loss_cause(result: CheckResult, outcome: JobOutcome, phase: str) -> CheckResult:
    """A finding about slow pairs with the loss that explains it, where the phase's
    retransmissions were on one of its nodes' connections: a slow link is then that node's (one
    cause, one finding: the partner it was paired with is not named), and a slow node says why.
    A finding about two groups of nodes is left as it is: a route between groups is its cause."""
    if result.status != "fail" or not result.hosts or "groups" in result.details:
        return result
    lossy = _by_retransmits(outcome, phase, None, MIN_RETRANSMITS_COMPLETED)
    if lossy is None or lossy.host not in result.hosts:
        return result
    details = {**result.details, "attribution": {"host": lossy.host, "by": lossy.by, **lossy.details}}
    if len(result.hosts) == 1:
        return dataclasses.replace(result, summary=f"{result.summary}; {lossy.evidence}", details=details)
    summary = f"{lossy.host} loses traffic ({lossy.evidence}): {result.summary}"
    return dataclasses.replace(result, summary=summary, hosts=(lossy.host,), details=details)


def attribute_stall(result: CheckResult, outcome: JobOutcome, phase: str) -> CheckResult:
    """A failure about the whole job (no node named) pinned on the node whose connections lost
    the phase's traffic, where its retransmissions say; else as it was."""
    lossy = _by_retransmits(outcome, phase, None, MIN_RETRANSMITS_COMPLETED)
    if result.status != "fail" or result.hosts or lossy is None:
        return result
    details = {**result.details, "attribution": {"host": lossy.host, "by": lossy.by, **lossy.details}}
    summary = f"{lossy.host} loses traffic ({lossy.evidence}): {result.summary}"
    return dataclasses.replace(result, summary=summary, hosts=(lossy.host,), details=details)
