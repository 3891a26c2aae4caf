"""The ``limits`` check's judge of scratch space: where the job and its libraries write on each node
(the temporary directory, the caches of torch, TorchInductor, Triton and Hugging Face) against the
room ``[limits]`` asks for, and against the same places on the other nodes.

Places on one filesystem share its room, so a finding names the filesystem once with every place
on it; nodes short in the same places are folded into one finding.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence

from checks.limits.details import NAME, ScratchBelowPeers, ScratchFewInodes, ScratchNotWritable, ScratchShort
from preflight.facts import NodeFacts, ScratchPlace
from preflight.findings import finding
from preflight.model import CheckResult
from preflight.nodeset import fold, natural_key
from preflight.units import capacity

# A place with under a tenth of the median free space of the same place on the other nodes, and
# under twice the need, warns: that node runs out first. A large filesystem that is merely fuller
# than the others' (twice the need or more still free) is not named.
PEER_RATIO = 0.1
PEER_NEED_FACTOR = 2

LABELS = {
    "tmp": "the temporary directory",
    "torch": "torch's cache",
    "inductor": "TorchInductor's cache",
    "triton": "Triton's cache",
    "huggingface": "Hugging Face's cache",
    "hf_datasets": "Hugging Face's datasets",
}

# The places on one filesystem (their names and paths) and where it is mounted.
Key = tuple[tuple[str, ...], tuple[str, ...], str]


def _filesystems(places: Iterable[ScratchPlace]) -> list[list[ScratchPlace]]:
    """A node's places grouped by the filesystem under them, in the node's order."""
    groups: dict[str, list[ScratchPlace]] = {}
    for place in places:
        groups.setdefault(place.device or place.measured or place.path, []).append(place)
    return list(groups.values())


def _key(group: Sequence[ScratchPlace]) -> Key:
    first = group[0]
    where = first.mount or first.measured or first.path
    return tuple(p.place for p in group), tuple(p.path for p in group), where


def _where(key: Key) -> str:
    places, paths, _ = key
    return ", ".join(f"{LABELS.get(place, place)} {path}" for place, path in zip(places, paths, strict=True))


def _amounts(values: Iterable[int], text: Callable[[int], str]) -> str:
    low, high = min(values), max(values)
    return text(low) if low == high else f"{text(low)} to {text(high)}"


def _in_order(groups: Mapping[Key, Iterable[str]]) -> list[Key]:
    """The keys in the natural order of the first host each names."""
    return sorted(groups, key=lambda key: natural_key(min(groups[key], key=natural_key)))


def _short(
    nodes: Mapping[str, NodeFacts], read: Callable[[ScratchPlace], int | None], need: int
) -> dict[Key, dict[str, int]]:
    """Each filesystem (as the places on it) with less than ``need`` free, and what each host
    whose filesystem it is has free."""
    short: dict[Key, dict[str, int]] = {}
    for host, node in nodes.items():
        for group in _filesystems(node.scratch.values()):
            free = read(group[0])
            if free is not None and free < need:
                short.setdefault(_key(group), {})[host] = free
    return short


def _below_need(nodes: Mapping[str, NodeFacts], need_bytes: int, need_inodes: int) -> list[CheckResult]:
    findings: list[CheckResult] = []
    space = _short(nodes, lambda p: p.free_bytes, need_bytes)
    for key in _in_order(space):
        hosts = sorted(space[key], key=natural_key)
        free = {host: space[key][host] for host in hosts}
        only = "only " if len(hosts) == 1 else ""
        summary = (
            f"{fold(hosts)}: {only}{_amounts(free.values(), capacity)} free on {key[2]}, below the "
            f"{capacity(need_bytes)} a job needs where it writes: {_where(key)}"
        )
        details = ScratchShort(
            item="scratch_space",
            places=list(key[0]),
            paths=list(key[1]),
            mount=key[2],
            free_bytes=free,
            need_bytes=need_bytes,
        )
        findings.append(finding(NAME, "fail", summary, hosts, details))
    inodes = _short(nodes, lambda p: p.free_inodes, need_inodes)
    for key in _in_order(inodes):
        hosts = sorted(inodes[key], key=natural_key)
        free = {host: inodes[key][host] for host in hosts}
        count = _amounts(free.values(), lambda n: f"{n:,}")
        summary = (
            f"{fold(hosts)}: {count} free inodes on {key[2]}, below the {need_inodes:,} a job needs where "
            f"it writes (compile caches are many small files): {_where(key)}"
        )
        many = ScratchFewInodes(
            item="scratch_inodes",
            places=list(key[0]),
            paths=list(key[1]),
            mount=key[2],
            free_inodes=free,
            need_inodes=need_inodes,
        )
        findings.append(finding(NAME, "fail", summary, hosts, many))
    return findings


def _not_writable(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    refused: dict[tuple[Key, str], list[str]] = {}
    for host, node in nodes.items():
        by_directory: dict[str, list[ScratchPlace]] = {}
        for place in node.scratch.values():
            if place.writable is False:
                by_directory.setdefault(place.measured or place.path, []).append(place)
        for measured, group in by_directory.items():
            refused.setdefault((_key(group), measured), []).append(host)
    findings = []
    for (key, measured), hosts in sorted(refused.items(), key=lambda item: natural_key(item[1][0])):
        unmade = " (not made yet: it would be made there)" if any(p != measured for p in key[1]) else ""
        summary = (
            f"{fold(hosts)}: {measured} is not writable by the job's user, and the job writes there: "
            f"{_where(key)}{unmade}"
        )
        details = ScratchNotWritable(
            item="scratch_not_writable",
            places=list(key[0]),
            paths=list(key[1]),
            mount=key[2],
            measured=measured,
        )
        findings.append(finding(NAME, "fail", summary, hosts, details))
    return findings


def _peer_medians(
    nodes: Mapping[str, NodeFacts], need: int, short: set[tuple[str, str]]
) -> dict[str, dict[str, float]]:
    """By host, the places with far less free than the same place on the other nodes (at least one
    other: two nodes are judged as surely as many), and those nodes' median; ``short`` (host,
    place) already failed against the need."""
    found: dict[str, dict[str, float]] = {}
    names = dict.fromkeys(place for node in nodes.values() for place in node.scratch)
    for name in names:
        free = {
            host: p.free_bytes
            for host, node in nodes.items()
            if (p := node.scratch.get(name)) is not None and p.free_bytes is not None
        }
        for host, value in free.items():
            others = [v for h, v in free.items() if h != host]
            if not others or (host, name) in short:
                continue
            median = statistics.median(others)
            if value < PEER_RATIO * median and value < PEER_NEED_FACTOR * need:
                found.setdefault(host, {})[name] = median
    return found


def _below_peers(nodes: Mapping[str, NodeFacts], need: int, short: set[tuple[str, str]]) -> list[CheckResult]:
    medians = _peer_medians(nodes, need, short)
    findings = []
    for host in sorted(medians, key=natural_key):
        for group in _filesystems(nodes[host].scratch.values()):
            odd = [p for p in group if p.place in medians[host]]
            free = odd[0].free_bytes if odd else None
            if free is None:
                continue
            key = _key(odd)
            median = min(medians[host][p.place] for p in odd)
            summary = (
                f"{host}: {capacity(free)} free on {key[2]}, under a tenth of what the other nodes have "
                f"there ({capacity(median)} median): {_where(key)}"
            )
            details = ScratchBelowPeers(
                item="scratch_peers",
                places=list(key[0]),
                paths=list(key[1]),
                mount=key[2],
                free_bytes={host: free},
                median_bytes=median,
            )
            findings.append(finding(NAME, "warn", summary, [host], details))
    return findings


def judge_scratch(nodes: Mapping[str, NodeFacts], need_bytes: int, need_inodes: int) -> list[CheckResult]:
    """Each node's scratch places against the need (free space and inodes: fail), whether the job's
    user may write there (fail), and against the same places on the other nodes (warn)."""
    below = _below_need(nodes, need_bytes, need_inodes)
    short = {
        (host, place)
        for result in below
        if result.details.get("item") == "scratch_space"
        for host in result.hosts
        for place in result.details["places"]
    }
    return [*below, *_not_writable(nodes), *_below_peers(nodes, need_bytes, short)]


def least_free(nodes: Mapping[str, NodeFacts]) -> int | None:
    """The least free space of any node's scratch place (None: none reported a number)."""
    free = [
        p.free_bytes for node in nodes.values() for p in node.scratch.values() if p.free_bytes is not None
    ]
    return min(free) if free else None
