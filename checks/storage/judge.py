"""The ``storage`` judge (pure): each data path and the checkpoint directory as every node saw it.

Which nodes share one filesystem is decided by the markers they saw of each other (a file written
on one node, seen by another), or, where no marker could be written, by the filesystem's identity
(a network filesystem with the same source and id). Copies are compared by their manifests (file
count, total size, a digest of every path and size, the newest file, sampled content); the odd
copies are named with what differs. The checkpoint directory must be writable with room for a
checkpoint on every node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from checks.storage.details import (
    CheckpointFinding,
    CheckpointPass,
    DataFinding,
    DataPass,
    DataWhere,
    Differs,
    Layout,
    LeftBehind,
    SharedBy,
    Skipped,
    Space,
    StorageDetails,
    Where,
)
from checks.storage.settings import StorageSection
from preflight.findings import finding, no_answer
from preflight.model import CheckResult
from preflight.nodeset import fold, group_by_value, minority, natural_key
from preflight.status import Status
from preflight.units import capacity

NAME = "storage"

# Newest files this far apart are the same moment (filesystems keep mtimes at different grains).
MTIME_SLACK_S = 2.0


@dataclass(frozen=True)
class StorageObservation:
    """What the nodes said, by host in inventory order: each path as inspected (``READY``), the
    markers each saw (``SEEN``), whose each marker is, the manifest of each copy walked (path ->
    host -> manifest: one node per shared filesystem), the nodes that did not answer and any
    marker a node could not remove."""

    data: tuple[str, ...]
    checkpoint: str
    inspected: Mapping[str, Mapping[str, Mapping[str, Any]]]
    seen: Mapping[str, Mapping[str, Sequence[str]]] = field(default_factory=dict)
    owners: Mapping[str, str] = field(default_factory=dict)
    manifests: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    errors: Mapping[str, str] = field(default_factory=dict)
    left: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Sharing:
    """The nodes that have a path, in groups that see one filesystem, and how that was told."""

    groups: tuple[tuple[str, ...], ...]
    by: SharedBy

    @property
    def layout(self) -> Layout:
        sizes = [len(g) for g in self.groups]
        if not sizes:
            return "nowhere"
        if sum(sizes) == 1:
            return "one node"
        if len(sizes) == 1:
            return "shared"
        return "separate" if max(sizes) == 1 else "mixed"


def _identity(fs: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A network filesystem's identity: the same on every node that mounts it."""
    if not fs.get("network"):
        return None
    return (fs.get("type"), fs.get("source"), fs.get("fsid"))


def sharing(path: str, obs: StorageObservation) -> Sharing:
    present = [h for h, paths in obs.inspected.items() if paths.get(path, {}).get("exists")]
    parent = {h: h for h in present}

    def root(h: str) -> str:
        while parent[h] != h:
            h = parent[h]
        return h

    def join(a: str, b: str) -> None:
        parent[root(b)] = root(a)

    by: SharedBy = "none"
    for host in present:
        for marker in obs.seen.get(host, {}).get(path, ()):
            owner = obs.owners.get(marker)
            if owner in parent and owner != host:
                join(owner, host)
                by = "marker"
    marked = {h for h in present if obs.inspected[h][path].get("marker")}
    by_identity: dict[tuple[Any, ...], str] = {}
    for host in present:
        identity = _identity(obs.inspected[host][path].get("filesystem") or {})
        if identity is None or (host in marked and by == "marker"):
            continue
        if identity in by_identity:
            join(by_identity[identity], host)
            by = "marker" if by == "marker" else "ids"
        else:
            by_identity[identity] = host
    groups: dict[str, list[str]] = {}
    for host in present:
        groups.setdefault(root(host), []).append(host)
    return Sharing(tuple(tuple(g) for g in groups.values()), by)


def walkers(sharing: Sharing) -> list[str]:
    """One node per filesystem walks a data path: the first of each group."""
    return [group[0] for group in sharing.groups]


def _when(mtime: Any) -> str:
    if not isinstance(mtime, int | float):
        return "\u2014"
    return datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _samples(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    found = manifest.get("samples")
    return found if isinstance(found, Mapping) else {}


def _content(manifest: Mapping[str, Any]) -> tuple[Any, ...]:
    samples = _samples(manifest)
    return (
        manifest.get("files"),
        manifest.get("bytes"),
        manifest.get("listing"),
        tuple(sorted(samples.items())),
    )


def describe(manifest: Mapping[str, Any]) -> str:
    files, size = manifest.get("files"), manifest.get("bytes")
    text = f"{files:,} files, {capacity(size)}" if isinstance(files, int) and isinstance(size, int) else "?"
    if manifest.get("newest") is not None:
        text += f", newest {_when(manifest.get('newest_mtime'))} ({manifest.get('newest') or 'the file'})"
    return text


def difference(odd: Mapping[str, Any], good: Mapping[str, Any]) -> str:
    """What sets a copy apart from the reference copy, most telling first."""
    parts = []
    if odd.get("files") != good.get("files"):
        parts.append(f"{odd.get('files'):,} files, not {good.get('files'):,}")
    if (
        odd.get("bytes") != good.get("bytes")
        and isinstance(odd.get("bytes"), int)
        and isinstance(good.get("bytes"), int)
    ):
        parts.append(f"{capacity(odd['bytes'])}, not {capacity(good['bytes'])}")
    odd_t, good_t = odd.get("newest_mtime"), good.get("newest_mtime")
    if (
        isinstance(odd_t, int | float)
        and isinstance(good_t, int | float)
        and abs(odd_t - good_t) > MTIME_SLACK_S
    ):
        older = "older" if odd_t < good_t else "newer"
        parts.append(f"newest file {_when(odd_t)}, {older} than {_when(good_t)}")
    odd_s, good_s = _samples(odd), _samples(good)
    changed = sorted(n for n in set(odd_s) & set(good_s) if odd_s[n] != good_s[n])
    missing = sorted(set(good_s) - set(odd_s))
    if changed:
        parts.append(f"content differs in {', '.join(changed[:3])}" + (" ..." if len(changed) > 3 else ""))
    if missing and odd.get("files") == good.get("files"):
        parts.append(f"missing {', '.join(missing[:3])}")
    if not parts and odd.get("listing") != good.get("listing"):
        parts.append("the same count and size, but other file names or sizes")
    return "; ".join(parts) or "a different manifest"


def _result(status: Status, summary: str, hosts: Sequence[str], details: StorageDetails) -> CheckResult:
    return finding(NAME, status, summary, hosts, details, natural_order=True)


def _path_details(path: str, role: str, share: Sharing) -> Where:
    """What every finding about one path carries: the path, its role and where it lives."""
    return {
        "path": path,
        "role": role,
        "layout": share.layout,
        "shared_by": share.by,
        "groups": [list(g) for g in share.groups],
    }


def _missing(
    path: str, role: str, obs: StorageObservation, details: DataFinding | CheckpointFinding
) -> list[CheckResult]:
    """A finding for each reason the path is absent, each with ``details`` (``item`` ``missing``)."""
    absent = {
        h: str(p[path].get("error") or "not there")
        for h, p in obs.inspected.items()
        if path in p and not p[path].get("exists")
    }
    findings = []
    everywhere = len(absent) == len(obs.inspected)
    for why, hosts in group_by_value(absent):
        where = "on any node" if everywhere else "there, unlike on the other nodes"
        findings.append(
            _result(
                "fail",
                f"{fold(hosts)}: the {role} path {path} does not exist {where} ({why})",
                hosts,
                details,
            )
        )
    return findings


def _layout_text(share: Sharing, obs: StorageObservation, path: str) -> str:
    layout = share.layout
    if layout == "shared":
        host = share.groups[0][0]
        fs = obs.inspected[host][path].get("filesystem") or {}
        told = (
            "a file written on one node is seen by the others"
            if share.by == "marker"
            else "same filesystem ids"
        )
        return f"one shared filesystem ({fs.get('type', '?')} {fs.get('source', '')}; {told})"
    if layout == "separate":
        return "a separate copy on each node"
    if layout == "mixed":
        return "shared by " + ", ".join(fold(g) for g in share.groups if len(g) > 1) + ", separate elsewhere"
    return "on one node" if layout == "one node" else layout


def _alike(nodes: int, many: str = "alike on all {n} nodes", one: str = "on the one node") -> str:
    return many.format(n=nodes) if nodes > 1 else one


def _copy_on_each_node(
    share: Sharing, manifests: Mapping[str, Mapping[str, Any]]
) -> dict[str, Mapping[str, Any]]:
    """The manifest of the copy each node sees: the one walked on its shared filesystem."""
    per_node: dict[str, Mapping[str, Any]] = {}
    for group in share.groups:
        walked = next((manifests[h] for h in group if h in manifests), None)
        per_node.update({h: walked for h in group if walked is not None})
    return per_node


def _differing_copies(
    path: str,
    details: DataWhere,
    compared: Mapping[str, Mapping[str, Any]],
    reference: Any,
    odd: Sequence[str],
) -> list[CheckResult]:
    """A finding for each way the odd copies differ from the copy most nodes have."""
    findings = []
    good = next((m for m in compared.values() if _content(m) == reference), None)
    texts = {h: difference(compared[h], good) if good else describe(compared[h]) for h in odd}
    for text, hosts in group_by_value(texts):
        if good is not None:
            summary = f"{fold(hosts)}: the copy of {path} differs from the one the other nodes have: {text}"
        else:
            sides = "; ".join(
                f"{fold(hs)}: {describe(compared[hs[0]])}"
                for _, hs in group_by_value({h: _content(compared[h]) for h in odd})
            )
            summary = f"the copies of {path} differ and no copy is on most nodes: {sides}"
        differs: Differs = {
            "item": "differs",
            **details,
            "reference": describe(good) if good else None,
        }
        # With no copy on most nodes no side can be cleared: every node with a copy is named.
        findings.append(_result("fail", summary, hosts if good is not None else odd, differs))
        if good is None:
            break
    return findings


def _newest_times_differ(
    path: str, details: DataWhere, compared: Mapping[str, Mapping[str, Any]]
) -> list[CheckResult]:
    """A warning when alike copies have newest files further apart in time than the slack."""
    times = {h: m.get("newest_mtime") for h, m in compared.items()}
    stamps = [t for t in times.values() if isinstance(t, int | float)]
    if not (stamps and max(stamps) - min(stamps) > MTIME_SLACK_S):
        return []
    _, late = minority({h: round(t or 0) for h, t in times.items()})
    mtime: DataFinding = {"item": "mtime", **details}
    return [
        _result(
            "warn",
            f"{fold(late)}: the copy of {path} has the same files and sampled content, but its "
            "newest modification time differs (copied without keeping times?)",
            late,
            mtime,
        )
    ]


def _data_passed(
    path: str,
    obs: StorageObservation,
    share: Sharing,
    details: DataWhere,
    nodes: int,
    compared: Mapping[str, Mapping[str, Any]],
) -> CheckResult:
    """The pass for a data path alike on every node, with its manifest."""
    sample = next(iter(compared.values()), {})
    truncated = " (the first files only)" if sample.get("truncated") else ""
    passed: DataPass = {
        **details,
        "manifest": {
            "files": sample.get("files"),
            "bytes": sample.get("bytes"),
            "newest": sample.get("newest"),
            "newest_mtime": sample.get("newest_mtime"),
            "truncated": sample.get("truncated"),
        },
    }
    return _result(
        "pass",
        f"{path}: {_layout_text(share, obs, path)}; {_alike(nodes)}: {describe(sample)}{truncated}",
        [],
        passed,
    )


def judge_data(path: str, obs: StorageObservation) -> list[CheckResult]:
    share = sharing(path, obs)
    per_node = _copy_on_each_node(share, obs.manifests.get(path, {}))
    incomplete = [h for h, m in per_node.items() if m.get("incomplete")]
    compared = {h: m for h, m in per_node.items() if not m.get("incomplete")}
    reference, odd = minority({h: _content(m) for h, m in compared.items()})
    # Each distinct copy as people read it, with the nodes that have it: the evidence.
    details: DataWhere = {
        **_path_details(path, "data", share),
        "copies": {
            text: hosts for text, hosts in group_by_value({h: describe(m) for h, m in per_node.items()})
        },
    }
    missing: DataFinding = {**details, "item": "missing"}
    findings = _missing(path, "data", obs, missing)
    if odd:
        findings += _differing_copies(path, details, compared, reference, odd)
    else:
        findings += _newest_times_differ(path, details, compared)
    if incomplete:
        not_walked: DataFinding = {"item": "incomplete", **details}
        findings.append(
            _result(
                "warn",
                f"{fold(incomplete)}: {path} could not be walked in time; its copy is not compared",
                incomplete,
                not_walked,
            )
        )
    if findings:
        return findings
    if share.layout == "nowhere":
        return []
    return [_data_passed(path, obs, share, details, len(per_node), compared)]


def _unwritable(path: str, details: Where, present: Mapping[str, Mapping[str, Any]]) -> list[CheckResult]:
    """A finding for each reason nodes cannot write to the checkpoint directory."""
    unwritable = {
        h: str(i.get("write_error") or i.get("error") or "not writable")
        for h, i in present.items()
        if not i.get("writable")
    }
    findings = []
    for why, hosts in group_by_value(unwritable):
        not_writable: CheckpointFinding = {"item": "not_writable", **details}
        findings.append(
            _result(
                "fail",
                f"{fold(hosts)}: cannot write to the checkpoint directory {path} ({why})",
                hosts,
                not_writable,
            )
        )
    return findings


def _short_of_room(
    path: str,
    details: Where,
    free: Mapping[str, Any],
    inodes: Mapping[str, Any],
    cfg: StorageSection,
) -> list[CheckResult]:
    """Findings for nodes with less free space or fewer free inodes than a checkpoint needs."""
    findings = []
    need = cfg.free_needed_bytes
    short = {h: f for h, f in free.items() if need is not None and isinstance(f, int) and f < need}
    if short and need is not None:
        hosts = sorted(short, key=natural_key)
        least = min(short.values())
        space: Space = {
            "item": "space",
            **details,
            "free_bytes": {h: short[h] for h in hosts},
            "need_bytes": need,
        }
        findings.append(
            _result(
                "fail",
                f"{fold(hosts)}: {capacity(least)} free in {path}, below the {capacity(need)} "
                "a checkpoint needs",
                hosts,
                space,
            )
        )
    few = {h: n for h, n in inodes.items() if isinstance(n, int) and n < cfg.checkpoint_files}
    if few:
        hosts = sorted(few, key=natural_key)
        no_inodes: CheckpointFinding = {"item": "inodes", **details}
        findings.append(
            _result(
                "fail",
                f"{fold(hosts)}: {min(few.values()):,} free inodes in {path}, below the "
                f"{cfg.checkpoint_files:,} files a checkpoint writes",
                hosts,
                no_inodes,
            )
        )
    return findings


def judge_checkpoint(path: str, obs: StorageObservation, cfg: StorageSection) -> list[CheckResult]:
    share = sharing(path, obs)
    details = _path_details(path, "checkpoint", share)
    missing: CheckpointFinding = {**details, "item": "missing"}
    findings = _missing(path, "checkpoint", obs, missing)
    present = {h: p[path] for h, p in obs.inspected.items() if p.get(path, {}).get("exists")}
    findings += _unwritable(path, details, present)
    need = cfg.free_needed_bytes
    free = {h: (i.get("filesystem") or {}).get("free_bytes") for h, i in present.items()}
    inodes = {h: (i.get("filesystem") or {}).get("free_inodes") for h, i in present.items()}
    findings += _short_of_room(path, details, free, inodes, cfg)
    if share.layout == "mixed":
        lone = [g[0] for g in share.groups if len(g) == 1]
        not_shared: CheckpointFinding = {"item": "not_shared", **details}
        findings.append(
            _result(
                "warn",
                f"{fold(lone)}: the checkpoint directory {path} is not the filesystem the other nodes share "
                f"({_layout_text(share, obs, path)}): a checkpoint saved there is not seen elsewhere",
                lone,
                not_shared,
            )
        )
    if findings or not present:
        return findings
    amounts = [f for f in free.values() if isinstance(f, int)]
    room = f"{capacity(min(amounts))} free or more" if amounts else "free space unknown"
    if need is not None:
        room += f" (a checkpoint needs {capacity(need)})"
    passed: CheckpointPass = {**details, "free_bytes": free, "free_inodes": inodes, "need_bytes": need}
    return [
        _result(
            "pass",
            f"{path}: writable {_alike(len(present), 'on all {n} nodes', 'on the node')}, "
            f"{_layout_text(share, obs, path)}; {room}",
            [],
            passed,
        )
    ]


def judge_storage(obs: StorageObservation, cfg: StorageSection) -> list[CheckResult]:
    if not obs.data and not obs.checkpoint:
        nothing: Skipped = {}
        return [
            _result(
                "skip", "no data path or checkpoint directory given (--data, --checkpoint-dir)", [], nothing
            )
        ]
    findings: list[CheckResult] = []
    for path in obs.data:
        findings += judge_data(path, obs)
    if obs.checkpoint:
        findings += judge_checkpoint(obs.checkpoint, obs, cfg)
    for host, left in obs.left.items():
        if left:
            left_behind: LeftBehind = {"item": "left_behind", "files": list(left)}
            findings.append(
                _result("error", f"{host}: could not remove its marker: {left[0]}", [host], left_behind)
            )
    unanswered = no_answer(NAME, obs.errors, "storage could not be looked at")
    findings += [unanswered] if unanswered else []
    return findings
