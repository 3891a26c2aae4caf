"""``baseline``: is the cluster at least as good as in a previous known-good run?

The gate after maintenance. Compared with the run given by ``--baseline``: nodes gone or
new, versions that changed, GPUs that disappeared, and bandwidth that dropped (full-world
sweep by message size, and each pair of nodes) beyond ``[baseline] max_busbw_drop``. A node is the
same node in both runs when its identity is (``preflight.identity``: its host name, machine ID or
serials), whatever name reached it in each. The judge is here; ``details`` says what its findings
carry, ``present`` shows them.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence

from checks.allreduce.details import NAME as ALLREDUCE
from checks.allreduce.measures import PAIR_BUSBW, sweep_busbw
from checks.baseline.details import (
    NAME,
    AsGood,
    BaselineDetails,
    GpusGone,
    NoBaseline,
    NodesGone,
    NodesNew,
    PairDrop,
    SweepDrop,
    VersionChanged,
)
from checks.baseline.explain import EXPLAINS
from checks.baseline.present import PRESENTATION
from checks.baseline.settings import BaselineSection
from checks.versions import ITEMS, lookup
from preflight.check import Check, CheckContext
from preflight.config import Config
from preflight.findings import finding
from preflight.identity import INVENTORY, identities
from preflight.model import CheckResult, HostReport, RunReport
from preflight.nodeset import fold
from preflight.settings import Settings
from preflight.status import Status
from preflight.units import binary_size


def _result(status: Status, summary: str, hosts: Sequence[str], details: BaselineDetails) -> CheckResult:
    return finding(NAME, status, summary, hosts, details)


def _policy(value: str) -> Status | None:
    return None if value == "ignore" else ("fail" if value == "fail" else "warn")


def _sweep(results: Sequence[CheckResult]) -> dict[int, float]:
    """busbw (GB/s) by message size of the full-world all-reduce sweep, as ``allreduce`` gives it."""
    for result in results:
        if result.check == ALLREDUCE and (sweep := sweep_busbw(result)):
            return sweep
    return {}


def _pairs(
    results: Sequence[CheckResult], renamed: Mapping[str, str] | None = None
) -> dict[tuple[str, str], float]:
    """Each tested pair's bus bandwidth as ``allreduce`` declares it (its best test, first or
    re-test), by the pair's names, sorted; a node in ``renamed`` (then -> now) under its name now."""
    now = renamed or {}
    found: dict[tuple[str, str], float] = {}
    for result in results:
        if result.check == ALLREDUCE:
            for sample in PAIR_BUSBW.read(result):
                first, second = sorted((now.get(sample.node, sample.node), now.get(sample.part, sample.part)))
                found[(first, second)] = max(found.get((first, second), 0.0), sample.value)
    return found


def _nodes(baseline: RunReport, hosts: Sequence[HostReport], config: Config) -> list[CheckResult]:
    before = {h.name for h in baseline.hosts}
    now = {h.name for h in hosts}
    findings = []
    if gone := sorted(before - now, key=[h.name for h in baseline.hosts].index):
        findings.append(
            _result(
                "fail",
                f"{fold(gone)}: in the baseline run, gone from this one",
                gone,
                NodesGone(item="nodes", gone=gone),
            )
        )
    status = _policy(config.section(BaselineSection).new_node)
    if status and (new := [h.name for h in hosts if h.name not in before]):
        findings.append(
            _result(status, f"{fold(new)}: not in the baseline run", new, NodesNew(item="nodes", new=new))
        )
    return findings


def _versions(baseline: RunReport, hosts: Sequence[HostReport], config: Config) -> list[CheckResult]:
    status = _policy(config.section(BaselineSection).version_change)
    if status is None:
        return []
    old_nodes = {h.name: h.node for h in baseline.hosts if h.reachable}
    changes: dict[tuple[str, str, str], list[str]] = {}
    for host in hosts:
        old = old_nodes.get(host.name)
        if not host.reachable or old is None:
            continue
        for item in ITEMS:
            before, after = lookup(old, item)[0], lookup(host.node, item)[0]
            if before is not None and after is not None and before != after:
                changes.setdefault((item.label, before, after), []).append(host.name)
        old_packages = old.packages or {}
        for name, version in (host.node.packages or {}).items():
            was = old_packages.get(name)
            if was is not None and was != version:
                changes.setdefault((f"package {name}", was, version), []).append(host.name)
    return [
        _result(
            status,
            f"{label} changed on {fold(names)}: {before} -> {after}",
            names,
            VersionChanged(item="version", label=label, before=before, after=after),
        )
        for (label, before, after), names in changes.items()
    ]


def _gpus(baseline: RunReport, hosts: Sequence[HostReport]) -> list[CheckResult]:
    old_counts = {h.name: h.node.gpu_count for h in baseline.hosts if h.reachable}
    findings = []
    for host in hosts:
        before = old_counts.get(host.name)
        after = host.node.gpu_count
        if host.reachable and before and after < before:
            summary = f"{host.name} has {after} GPUs, {before} in the baseline run"
            findings.append(
                _result("fail", summary, [host.name], GpusGone(item="gpus", before=before, after=after))
            )
    return findings


def _bandwidth(
    baseline: RunReport, results: Sequence[CheckResult], config: Config, renamed: Mapping[str, str]
) -> list[CheckResult]:
    """The sweep at the largest size both runs measured, and each pair both runs tested (the
    baseline's nodes under their ``renamed`` names now)."""
    floor = 1.0 - config.section(BaselineSection).max_busbw_drop
    findings = []
    old_sweep, new_sweep = _sweep(baseline.results), _sweep(results)
    common = sorted(set(old_sweep) & set(new_sweep))
    if common:
        size = common[-1]  # gate on the largest common size only: small sizes measure latency
        before, after = old_sweep[size], new_sweep[size]
        if after < floor * before:
            summary = (
                f"all-reduce busbw at {binary_size(size)} dropped to {after / before:.2f}x the baseline "
                f"({after:.2f} vs {before:.2f} GB/s)"
            )
            findings.append(
                _result(
                    "fail",
                    summary,
                    [],
                    SweepDrop(item="sweep", size_bytes=size, before_gbps=before, after_gbps=after),
                )
            )
    old_pairs, new_pairs = _pairs(baseline.results, renamed), _pairs(results)
    common_pairs = sorted(set(old_pairs) & set(new_pairs))
    if not common_pairs:
        return findings
    # A link is named when it fell against its own baseline AND against the other pairs of
    # the same run: noise that slows a whole run is not one link's fault (a slower fabric
    # as a whole is the sweep's finding above).
    typical_before = statistics.median(old_pairs[p] for p in common_pairs)
    typical_after = statistics.median(new_pairs[p] for p in common_pairs)
    for pair in common_pairs:
        before, after = old_pairs[pair], new_pairs[pair]
        relative_drop = (after / typical_after) < floor * (before / typical_before) if typical_after else True
        if before > 0 and after < floor * before and relative_drop:
            summary = (
                f"the link {pair[0]}-{pair[1]} dropped to {after / before:.2f}x its baseline busbw "
                f"({after:.2f} vs {before:.2f} GB/s)"
            )
            findings.append(
                _result(
                    "fail",
                    summary,
                    pair,
                    PairDrop(item="pair", nodes=list(pair), before_gbps=before, after_gbps=after),
                )
            )
    return findings


def _as_named_now(baseline: RunReport, hosts: Sequence[HostReport]) -> tuple[RunReport, dict[str, str]]:
    """The baseline run with each of its hosts under the name that reached it in this run, where
    both runs read the same identity from it (a node reached as ``10.0.0.13`` then and ``gpu13``
    now); and those names, then -> now, which its pairs are read under (:func:`_pairs`).
    Identities decided only by the names stay apart."""
    now, _ = identities({h.name: h.facts if h.reachable else None for h in hosts})
    before, _ = identities({h.name: h.facts if h.reachable else None for h in baseline.hosts})
    named_now = {i.key: name for name, i in now.items() if i.source != INVENTORY}
    renamed = {
        old: named_now[i.key]
        for old, i in before.items()
        if i.source != INVENTORY and named_now.get(i.key, old) != old
    }
    taken = set(before) - set(renamed)
    renamed = {old: new for old, new in renamed.items() if new not in taken}
    if not renamed:
        return baseline, {}
    hosts_then = tuple(dataclasses.replace(h, name=renamed.get(h.name, h.name)) for h in baseline.hosts)
    return dataclasses.replace(baseline, hosts=hosts_then), renamed


def compare(
    baseline: RunReport, hosts: Sequence[HostReport], results: Sequence[CheckResult], config: Config
) -> list[CheckResult]:
    baseline, renamed = _as_named_now(baseline, hosts)
    findings = [
        *_nodes(baseline, hosts, config),
        *_gpus(baseline, hosts),
        *_versions(baseline, hosts, config),
        *_bandwidth(baseline, results, config, renamed),
    ]
    if findings:
        return findings
    compared = "bandwidth, " if _sweep(baseline.results) and _sweep(results) else ""
    summary = f"as good as the baseline run of {baseline.started_at}: same nodes, {compared}versions and GPUs"
    details = AsGood(baseline_started_at=baseline.started_at)
    if renamed:
        shown = ", ".join(f"{old} as {new}" for old, new in list(renamed.items())[:3])
        more = f" and {len(renamed) - 3} more" if len(renamed) > 3 else ""
        summary += f" ({len(renamed)} reached by another name then: {shown}{more})"
        details["renamed"] = dict(renamed)
    return [_result("pass", summary, [], details)]


def run(ctx: CheckContext) -> list[CheckResult]:
    if ctx.baseline is None:
        return [_result("skip", "no baseline run given (--baseline RUN.json)", [], NoBaseline())]
    return compare(ctx.baseline, ctx.hosts, ctx.findings.get(ALLREDUCE, ()), ctx.config)


CHECK = Check(
    name=NAME,
    title="at least as good as a previous known-good run (--baseline): nodes, versions, GPUs, bandwidth",
    run=run,
    presentation=PRESENTATION,
    needs_baseline=True,
    reads=(ALLREDUCE,),
    settings=Settings(BaselineSection),
    explains=EXPLAINS,
)
