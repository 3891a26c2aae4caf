"""The ``versions`` judge: which facts and packages it compares (:data:`ITEMS`, also the rows
of the version matrix), how one node's value is read, and the findings for drift and for
``[expect]``; the GPUs' firmware is judged in :mod:`checks.versions.gpu_firmware`. Pure: it reads
the nodes' typed facts and writes typed details.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from checks.versions.details import Agreement, ExpectDetails, ItemDrift, PackageDetails
from checks.versions.expectations import matches, specifier_error
from checks.versions.gpu_firmware import judge_gpu_firmware
from checks.versions.settings import VersionsSection
from preflight.config import Config
from preflight.facts import NodeFacts, version_text
from preflight.model import CheckResult
from preflight.nodeset import fold, group_by_value, minority
from preflight.status import Status

NAME = "versions"

NOT_FOUND = "(not found)"
NOT_INSTALLED = "(not installed)"

# How many drifting packages one summary line lists before "and N more" (details have all).
_LISTED_PACKAGES = 4

Severity = Literal["fail", "warn", "python"]


@dataclass(frozen=True)
class Item:
    """One compared fact: its ``[expect]`` name, how a summary calls it, how the version matrix
    labels its row, where it is in the facts."""

    name: str
    label: str
    row: str
    path: tuple[str, ...]
    severity: Severity


# nvcc fails too: extensions compiled on each node at run time (DeepSpeed ops, custom kernels)
# differ when the toolkits do. Kernel and OS drift rarely break a run, so they only warn.
ITEMS: tuple[Item, ...] = (
    Item("driver", "NVIDIA driver", "NVIDIA driver", ("driver", "version"), "fail"),
    Item("cuda", "CUDA driver version", "CUDA (driver)", ("driver", "cuda"), "fail"),
    Item("torch", "torch", "torch", ("torch", "version"), "fail"),
    Item("torch_cuda", "torch's CUDA", "torch CUDA", ("torch", "cuda"), "fail"),
    Item("cudnn", "torch's cuDNN", "torch cuDNN", ("torch", "cudnn"), "fail"),
    Item("nccl", "torch's NCCL", "torch NCCL", ("torch", "nccl"), "fail"),
    Item("nccl_system", "system NCCL", "system NCCL", ("nccl_system",), "fail"),
    Item("cudnn_system", "system cuDNN", "system cuDNN", ("cudnn_system",), "fail"),
    Item("nvcc", "nvcc", "nvcc", ("nvcc",), "fail"),
    Item("python", "Python", "Python", ("python", "version"), "python"),
    Item("kernel", "kernel", "kernel", ("os", "kernel"), "warn"),
    Item("os", "OS", "OS", ("os", "name"), "warn"),
)
ITEMS_BY_NAME: dict[str, Item] = {item.name: item for item in ITEMS}


# --------------------------------------------------------------------------- details (the JSON contract)


# The training stack: drift here breaks or silently changes a run whatever the policy says.
_BUILTIN_STACK = ("torch", "triton")
_NVIDIA_WHEEL_RE = re.compile(r"^nvidia-[a-z0-9-]+-cu\d+$")


def canonical_package(name: str) -> str:
    """PEP 503 normalisation: ``PyYAML``, ``pyyaml`` and ``py_yaml`` are one package to pip."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _matches_any(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name, canonical_package(p)) for p in patterns)


def is_stack_package(name: str, config: Config) -> bool:
    canonical = canonical_package(name)
    return (
        canonical in _BUILTIN_STACK
        or _NVIDIA_WHEEL_RE.match(canonical) is not None
        or _matches_any(canonical, config.section(VersionsSection).stack_packages)
    )


def lookup(node: NodeFacts, item: Item) -> tuple[str | None, str | None]:
    """The item's value on one node as text, or None and the reason the node gave."""
    value = node.value(item.path)
    if value is not None:
        return version_text(value), None
    reasons = node.unavailable
    dotted = ".".join(item.path)
    reason = reasons.get(dotted) or reasons.get(item.path[0])
    if reason is None:
        reason = f"{dotted} is null" if isinstance(node.value(item.path[:1]), Mapping) else "not reported"
    return None, str(reason)


def installed(node: NodeFacts) -> dict[str, tuple[str, str]] | None:
    """canonical name -> (name as listed, version); None when the node could not list them."""
    listed = node.packages
    if listed is None:
        return None
    return {canonical_package(name): (name, version) for name, version in listed.items()}


def _sides(values: Mapping[str, str], majority: str | None, culprits: Sequence[str]) -> str:
    """``gpu31: 550.54 (majority gpu[01-30]: 535.104)``, or every host with its value on a tie."""
    groups = group_by_value({h: values[h] for h in culprits})
    shown = "; ".join(f"{fold(hosts)}: {value}" for value, hosts in groups)
    if majority is None:
        return shown
    majority_hosts = [h for h, v in values.items() if v == majority]
    return f"{shown} (majority {fold(majority_hosts)}: {majority})"


def _by_value(values: Mapping[str, str]) -> dict[str, list[str]]:
    return {value: hosts for value, hosts in group_by_value(values)}


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


@dataclass(frozen=True)
class _ItemOutcome:
    compared: bool  # False when no node reported the fact
    agreed: str | None  # the value every node has, when they agree
    finding: CheckResult | None


def _judge_item(item: Item, nodes: Mapping[str, NodeFacts]) -> _ItemOutcome:
    """Whether one fact was compared, the value the nodes agree on, or the drift finding."""
    values: dict[str, str] = {}
    missing: dict[str, str] = {}
    for host, node in nodes.items():
        value, reason = lookup(node, item)
        if value is None:
            values[host] = NOT_FOUND
            missing[host] = reason or "not reported"
        else:
            values[host] = value
    if len(missing) == len(values):
        # Unavailable everywhere (a CPU cluster has no driver) is not drift.
        return _ItemOutcome(compared=False, agreed=None, finding=None)
    majority, culprits = minority(values)
    if not culprits:
        return _ItemOutcome(compared=True, agreed=majority, finding=None)
    status: Status
    if item.severity == "python":
        found = {_major_minor(v) for v in values.values() if v != NOT_FOUND}
        status = "fail" if missing or len(found) > 1 else "warn"
    else:
        status = item.severity
    qualifier = " (patch level only)" if item.severity == "python" and status == "warn" else ""
    no_majority = ", no majority" if majority is None else ""
    details: ItemDrift = {
        "item": item.name,
        "label": item.label,
        "majority": majority,
        "values": _by_value(values),
    }
    if missing:
        details["missing"] = missing
    summary = f"{item.label} differs{qualifier}{no_majority}: {_sides(values, majority, culprits)}"
    finding = CheckResult(NAME, status, summary, tuple(culprits), details)
    return _ItemOutcome(compared=True, agreed=None, finding=finding)


@dataclass(frozen=True)
class _PackageDrift:
    name: str
    majority: str | None
    values: dict[str, str]


def _package_status(name: str, config: Config) -> Status | None:
    if is_stack_package(name, config):
        return "fail"
    policy = config.section(VersionsSection).package_drift
    return None if policy == "ignore" else policy


def _describe_package(drift: _PackageDrift, culprits: Sequence[str]) -> str:
    culprit_values = {h: drift.values[h] for h in culprits}
    groups = group_by_value(culprit_values)
    if len(groups) == 1:
        shown = groups[0][0]
    else:
        shown = "(" + "; ".join(f"{fold(hosts)}: {value}" for value, hosts in groups) + ")"
    if drift.majority is None:
        return f"{drift.name} {shown}"
    return f"{drift.name} {shown} vs {drift.majority}"


def _package_finding(
    status: Status, culprits: tuple[str, ...], drifts: list[_PackageDrift], compared: Sequence[str]
) -> CheckResult:
    stack = status == "fail"
    kind = "training-stack package" if stack else "package"
    details: PackageDetails = {
        "item": "packages",
        "stack": stack,
        "packages": {d.name: {"majority": d.majority, "values": _by_value(d.values)} for d in drifts},
    }
    if len(drifts) == 1:
        only = drifts[0]
        no_majority = ", no majority" if only.majority is None else ""
        summary = f"{kind} {only.name} differs{no_majority}: {_sides(only.values, only.majority, culprits)}"
        return CheckResult(NAME, status, summary, culprits, details)
    listed = ", ".join(_describe_package(d, culprits) for d in drifts[:_LISTED_PACKAGES])
    more = f", and {len(drifts) - _LISTED_PACKAGES} more" if len(drifts) > _LISTED_PACKAGES else ""
    if drifts[0].majority is None:
        # A tie names every host; each package then shows every side.
        summary = f"{len(drifts)} {kind}s differ with no majority on {fold(culprits)}: {listed}{more}"
    else:
        culprit_set = set(culprits)
        others = [h for h in compared if h not in culprit_set]
        details["majority_hosts"] = others
        summary = f"{fold(culprits)}: {len(drifts)} {kind}s differ from {fold(others)}: {listed}{more}"
    return CheckResult(NAME, status, summary, culprits, details)


def _judge_packages(
    nodes: Mapping[str, NodeFacts], config: Config, torch_compared: bool
) -> tuple[list[CheckResult], int]:
    """Package drift grouped by (status, culprit nodes), and how many packages were compared.

    One finding per set of nodes rather than per package: a node with its own environment
    differs in dozens of packages at once, and reads as one row naming it, not dozens.
    """
    listed: dict[str, dict[str, tuple[str, str]]] = {}
    unlisted: dict[str, str] = {}
    for host, node in nodes.items():
        packages = installed(node)
        if packages is None:
            unlisted[host] = str(node.unavailable.get("packages") or "not reported")
        else:
            listed[host] = packages
    if not listed:
        return [], 0
    names: dict[str, str] = {}
    for packages in listed.values():
        for canonical, (shown, _version) in packages.items():
            names.setdefault(canonical, shown)
    results: list[CheckResult] = []
    if unlisted:
        # Unlisted packages hide the training stack when the other nodes have one.
        stack_elsewhere = any(is_stack_package(n, config) for n in names)
        policy = config.section(VersionsSection).package_drift
        status: Status | None = "fail" if stack_elsewhere else (None if policy == "ignore" else policy)
        if status is not None:
            hosts = list(unlisted)
            reasons = "; ".join(f"{fold(h)}: {r}" for r, h in group_by_value(unlisted))
            missing: PackageDetails = {"item": "packages", "missing": dict(unlisted)}
            results.append(
                CheckResult(
                    NAME,
                    status,
                    f"packages could not be listed, so they were not compared: {reasons}",
                    tuple(hosts),
                    missing,
                )
            )
    groups: dict[tuple[Status, tuple[str, ...]], list[_PackageDrift]] = {}
    compared = 0
    for canonical, shown in names.items():
        if _matches_any(canonical, config.section(VersionsSection).ignore_packages):
            continue
        # torch is compared as the version torch itself reports; a second finding would repeat it.
        if canonical == "torch" and torch_compared:
            continue
        compared += 1
        values = {
            host: packages[canonical][1] if canonical in packages else NOT_INSTALLED
            for host, packages in listed.items()
        }
        majority, culprits = minority(values)
        if not culprits:
            continue
        package_status = _package_status(canonical, config)
        if package_status is None:
            continue
        key = (package_status, tuple(culprits))
        groups.setdefault(key, []).append(_PackageDrift(shown, majority, values))
    for (package_status, group_hosts), drifts in groups.items():
        results.append(_package_finding(package_status, group_hosts, drifts, list(listed)))
    # Failures first, so the training stack leads a table.
    results.sort(key=lambda r: r.status != "fail")
    return results, compared


def _expected_values(
    name: str, nodes: Mapping[str, NodeFacts]
) -> tuple[dict[str, str], dict[str, str], Literal["fact", "package"]] | None:
    """Per host: the value to match (or a placeholder), why it is missing, and the kind of name."""
    values: dict[str, str] = {}
    missing: dict[str, str] = {}
    item = ITEMS_BY_NAME.get(name)
    if item is not None:
        for host, node in nodes.items():
            value, reason = lookup(node, item)
            values[host] = NOT_FOUND if value is None else value
            if value is None:
                missing[host] = reason or "not reported"
        return values, missing, "fact"
    canonical = canonical_package(name)
    seen = False
    for host, node in nodes.items():
        packages = installed(node)
        if packages is None:
            values[host] = NOT_FOUND
            missing[host] = str(node.unavailable.get("packages") or "packages not reported")
        elif canonical in packages:
            values[host] = packages[canonical][1]
            seen = True
        else:
            values[host] = NOT_INSTALLED
    return (values, missing, "package") if seen else None


def _judge_expectations(
    nodes: Mapping[str, NodeFacts], config: Config
) -> tuple[list[CheckResult], list[str]]:
    results: list[CheckResult] = []
    met: list[str] = []
    for name, wanted in config.expect.items():
        problem = specifier_error(wanted)
        if problem is not None:
            summary = f"expect.{name} = {wanted!r} {problem}"
            invalid: ExpectDetails = {"item": "expect", "name": name, "wanted": wanted}
            results.append(CheckResult(NAME, "fail", summary, (), invalid))
            continue
        found = _expected_values(name, nodes)
        if found is None:
            summary = f"expected {name} {wanted} but no node has it (neither a fact nor an installed package)"
            known: ExpectDetails = {
                "item": "expect",
                "name": name,
                "wanted": wanted,
                "known_facts": list(ITEMS_BY_NAME),
            }
            results.append(CheckResult(NAME, "fail", summary, (), known))
            continue
        values, missing, kind = found
        unmet: dict[str, str] = {}
        notes: dict[str, str] = {}
        for host, value in values.items():
            if value == NOT_FOUND:
                unmet[host] = f"(not found: {missing[host]})"
                continue
            if value == NOT_INSTALLED:
                unmet[host] = value
                continue
            match = matches(wanted, value)
            if not match.ok:
                unmet[host] = f"{value} ({match.note})" if match.note else value
                if match.note:
                    notes[host] = match.note
        if not unmet:
            met.append(name)
            continue
        shown = "; ".join(f"{fold(hosts)}: {value}" for value, hosts in group_by_value(unmet))
        details: ExpectDetails = {
            "item": "expect",
            "name": name,
            "wanted": wanted,
            "kind": kind,
            "values": _by_value({h: values[h] for h in unmet}),
        }
        if missing:
            details["missing"] = {h: r for h, r in missing.items() if h in unmet}
        if notes:
            details["notes"] = notes
        results.append(CheckResult(NAME, "fail", f"expected {name} {wanted}: {shown}", tuple(unmet), details))
    return results, met


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def judge_versions(nodes: Mapping[str, NodeFacts], config: Config) -> list[CheckResult]:
    """Findings for version drift across ``nodes`` (reachable hosts by name) and for ``[expect]``."""
    if not nodes:
        return [CheckResult(NAME, "skip", "no reachable hosts: no versions to compare")]
    expect_results, met = _judge_expectations(nodes, config)
    outcomes = {item.name: _judge_item(item, nodes) for item in ITEMS}
    agreed = {name: o.agreed for name, o in outcomes.items() if o.agreed is not None}
    firmware_results = judge_gpu_firmware(nodes, NAME)
    if len(nodes) < 2:
        (host,) = nodes
        if expect_results or firmware_results:
            return expect_results + firmware_results
        alone: Agreement = {"nodes": 1, "versions": agreed, "expectations_met": met}
        if met:
            met_on = f"{_plural(len(met), 'expectation')} met on {host}"
            summary = f"{met_on}; nothing compared (only one node reachable)"
            return [CheckResult(NAME, "pass", summary, (), alone)]
        return [CheckResult(NAME, "skip", f"only {host} reachable: nothing compared", (), alone)]
    results = list(expect_results)
    item_results = [o.finding for o in outcomes.values() if o.finding is not None]
    results.extend(sorted(item_results, key=lambda r: r.status != "fail"))
    results.extend(firmware_results)
    compared_items = sum(1 for o in outcomes.values() if o.compared)
    package_results, packages_compared = _judge_packages(nodes, config, outcomes["torch"].compared)
    results.extend(package_results)
    if results:
        return results
    met_note = f"; {_plural(len(met), 'expectation')} met" if met else ""
    summary = (
        f"{_plural(compared_items, 'version')} and {_plural(packages_compared, 'package')} "
        f"agree on {len(nodes)} nodes{met_note}"
    )
    details: Agreement = {
        "nodes": len(nodes),
        "versions": agreed,
        "packages": packages_compared,
        "expectations_met": met,
    }
    return [CheckResult(NAME, "pass", summary, (), details)]
