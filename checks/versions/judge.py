"""``versions``: the NVIDIA driver, CUDA, cuDNN, NCCL, Python, torch and every package agree
across nodes and meet ``[expect]``. Drift names the minority nodes and the values on each
side, folded by node set (``gpu31: 550.54.15 (majority gpu[01-30]: 535.104.05)``).

``[expect]`` names a fact or a package. Facts: ``driver`` (driver.version), ``cuda`` (the
driver's CUDA), ``torch``, ``torch_cuda``, ``cudnn`` and ``nccl`` (as torch reports them),
``nccl_system``, ``cudnn_system``, ``nvcc``, ``python``, ``kernel`` and ``os`` (the OS name).
Any other name is a package as pip lists it (``numpy``, ``nvidia-nccl-cu12``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from checks.expectations import matches, specifier_error
from preflight.check import Check, CheckContext
from preflight.config import Config
from preflight.model import CheckResult
from preflight.nodeset import fold, group_by_value, minority
from preflight.status import Status
from preflight.view import Presentation

NAME = "versions"

NOT_FOUND = "(not found)"
NOT_INSTALLED = "(not installed)"

# How many drifting packages one summary line lists before "and N more" (details have all).
_LISTED_PACKAGES = 4

Severity = Literal["fail", "warn", "python"]


@dataclass(frozen=True)
class _Item:
    """One compared fact: its ``[expect]`` name, how a summary calls it, where it is in the facts."""

    name: str
    label: str
    path: tuple[str, ...]
    severity: Severity


# nvcc fails too: extensions compiled on each node at run time (DeepSpeed ops, custom kernels)
# differ when the toolkits do. Kernel and OS drift rarely break a run, so they only warn.
ITEMS: tuple[_Item, ...] = (
    _Item("driver", "NVIDIA driver", ("driver", "version"), "fail"),
    _Item("cuda", "CUDA driver version", ("driver", "cuda"), "fail"),
    _Item("torch", "torch", ("torch", "version"), "fail"),
    _Item("torch_cuda", "torch's CUDA", ("torch", "cuda"), "fail"),
    _Item("cudnn", "torch's cuDNN", ("torch", "cudnn"), "fail"),
    _Item("nccl", "torch's NCCL", ("torch", "nccl"), "fail"),
    _Item("nccl_system", "system NCCL", ("nccl_system",), "fail"),
    _Item("cudnn_system", "system cuDNN", ("cudnn_system",), "fail"),
    _Item("nvcc", "nvcc", ("nvcc",), "fail"),
    _Item("python", "Python", ("python", "version"), "python"),
    _Item("kernel", "kernel", ("os", "kernel"), "warn"),
    _Item("os", "OS", ("os", "name"), "warn"),
)
ITEMS_BY_NAME: dict[str, _Item] = {item.name: item for item in ITEMS}

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
        or _matches_any(canonical, config.versions.stack_packages)
    )


def _as_text(value: Any) -> str:
    # torch.cuda.nccl.version() is a tuple on some builds; a version is dotted text everywhere else.
    if isinstance(value, list | tuple):
        return ".".join(str(v) for v in value)
    return str(value)


def _unavailable(facts: Mapping[str, Any]) -> Mapping[str, Any]:
    reasons = facts.get("unavailable")
    return reasons if isinstance(reasons, Mapping) else {}


def lookup(facts: Mapping[str, Any], item: _Item) -> tuple[str | None, str | None]:
    """The item's value on one node as text, or None and the reason the node gave."""
    node: Any = facts
    for key in item.path:
        node = node.get(key) if isinstance(node, Mapping) else None
        if node is None:
            break
    if node is not None:
        return _as_text(node), None
    reasons = _unavailable(facts)
    dotted = ".".join(item.path)
    reason = reasons.get(dotted) or reasons.get(item.path[0])
    if reason is None:
        reason = f"{dotted} is null" if isinstance(facts.get(item.path[0]), Mapping) else "not reported"
    return None, str(reason)


def _packages(facts: Mapping[str, Any]) -> dict[str, tuple[str, str]] | None:
    """canonical name -> (name as listed, version); None when the node could not list them."""
    listed = facts.get("packages")
    if not isinstance(listed, Mapping):
        return None
    return {canonical_package(str(k)): (str(k), _as_text(v)) for k, v in listed.items()}


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


def _judge_item(item: _Item, facts: Mapping[str, Mapping[str, Any]]) -> _ItemOutcome:
    """Whether one fact was compared, the value the nodes agree on, or the drift finding."""
    values: dict[str, str] = {}
    missing: dict[str, str] = {}
    for host, host_facts in facts.items():
        value, reason = lookup(host_facts, item)
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
    details: dict[str, Any] = {
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
    policy = config.versions.package_drift
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
    details: dict[str, Any] = {
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
    facts: Mapping[str, Mapping[str, Any]], config: Config, torch_compared: bool
) -> tuple[list[CheckResult], int]:
    """Package drift grouped by (status, culprit nodes), and how many packages were compared.

    One finding per set of nodes rather than per package: a node with its own environment
    differs in dozens of packages at once, and reads as one row naming it, not dozens.
    """
    listed: dict[str, dict[str, tuple[str, str]]] = {}
    unlisted: dict[str, str] = {}
    for host, host_facts in facts.items():
        packages = _packages(host_facts)
        if packages is None:
            unlisted[host] = str(_unavailable(host_facts).get("packages") or "not reported")
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
        policy = config.versions.package_drift
        status: Status | None = "fail" if stack_elsewhere else (None if policy == "ignore" else policy)
        if status is not None:
            hosts = list(unlisted)
            reasons = "; ".join(f"{fold(h)}: {r}" for r, h in group_by_value(unlisted))
            results.append(
                CheckResult(
                    NAME,
                    status,
                    f"packages could not be listed, so they were not compared: {reasons}",
                    tuple(hosts),
                    {"item": "packages", "missing": dict(unlisted)},
                )
            )
    groups: dict[tuple[Status, tuple[str, ...]], list[_PackageDrift]] = {}
    compared = 0
    for canonical, shown in names.items():
        if _matches_any(canonical, config.versions.ignore_packages):
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
    name: str, facts: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, str], dict[str, str], str] | None:
    """Per host: the value to match (or a placeholder), why it is missing, and the kind of name."""
    values: dict[str, str] = {}
    missing: dict[str, str] = {}
    item = ITEMS_BY_NAME.get(name)
    if item is not None:
        for host, host_facts in facts.items():
            value, reason = lookup(host_facts, item)
            values[host] = NOT_FOUND if value is None else value
            if value is None:
                missing[host] = reason or "not reported"
        return values, missing, "fact"
    canonical = canonical_package(name)
    seen = False
    for host, host_facts in facts.items():
        packages = _packages(host_facts)
        if packages is None:
            values[host] = NOT_FOUND
            missing[host] = str(_unavailable(host_facts).get("packages") or "packages not reported")
        elif canonical in packages:
            values[host] = packages[canonical][1]
            seen = True
        else:
            values[host] = NOT_INSTALLED
    return (values, missing, "package") if seen else None


def _judge_expectations(
    facts: Mapping[str, Mapping[str, Any]], config: Config
) -> tuple[list[CheckResult], list[str]]:
    results: list[CheckResult] = []
    met: list[str] = []
    for name, wanted in config.expect.items():
        base: dict[str, Any] = {"item": "expect", "name": name, "wanted": wanted}
        problem = specifier_error(wanted)
        if problem is not None:
            summary = f"expect.{name} = {wanted!r} {problem}"
            results.append(CheckResult(NAME, "fail", summary, (), base))
            continue
        found = _expected_values(name, facts)
        if found is None:
            summary = f"expected {name} {wanted} but no node has it (neither a fact nor an installed package)"
            known = {**base, "known_facts": list(ITEMS_BY_NAME)}
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
        details: dict[str, Any] = {
            **base,
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


def judge_versions(facts: Mapping[str, Mapping[str, Any]], config: Config) -> list[CheckResult]:
    """Findings for version drift across ``facts`` (reachable hosts by name) and for ``[expect]``."""
    if not facts:
        return [CheckResult(NAME, "skip", "no reachable hosts: no versions to compare")]
    expect_results, met = _judge_expectations(facts, config)
    outcomes = {item.name: _judge_item(item, facts) for item in ITEMS}
    agreed = {name: o.agreed for name, o in outcomes.items() if o.agreed is not None}
    if len(facts) < 2:
        (host,) = facts
        if expect_results:
            return expect_results
        details = {"nodes": 1, "versions": agreed, "expectations_met": met}
        if met:
            met_on = f"{_plural(len(met), 'expectation')} met on {host}"
            summary = f"{met_on}; nothing compared (only one node reachable)"
            return [CheckResult(NAME, "pass", summary, (), details)]
        return [CheckResult(NAME, "skip", f"only {host} reachable: nothing compared", (), details)]
    results = list(expect_results)
    item_results = [o.finding for o in outcomes.values() if o.finding is not None]
    results.extend(sorted(item_results, key=lambda r: r.status != "fail"))
    compared_items = sum(1 for o in outcomes.values() if o.compared)
    package_results, packages_compared = _judge_packages(facts, config, outcomes["torch"].compared)
    results.extend(package_results)
    if results:
        return results
    met_note = f"; {_plural(len(met), 'expectation')} met" if met else ""
    summary = (
        f"{_plural(compared_items, 'version')} and {_plural(packages_compared, 'package')} "
        f"agree on {len(facts)} nodes{met_note}"
    )
    details = {
        "nodes": len(facts),
        "versions": agreed,
        "packages": packages_compared,
        "expectations_met": met,
    }
    return [CheckResult(NAME, "pass", summary, (), details)]


def _run(ctx: CheckContext) -> list[CheckResult]:
    return judge_versions(ctx.facts(), ctx.config)


_ADVICE = {
    "driver": "Install the majority's driver on the odd nodes (or drain them): ranks with "
    "different drivers can hang or crash inside NCCL.",
    "cuda": "Install the majority's driver on the odd nodes (or drain them).",
    "packages": "Rebuild the odd nodes' environment from the same image or lock file as the others.",
    "packages-other": "Not part of the training stack: harmless unless your code imports these "
    "packages; align the environments when convenient.",
    "expect": "Install the expected version, or change [expect] in the config.",
    "*": "Make the odd nodes match the majority (same image, same lock file) before the run.",
}


def _advice(result: CheckResult) -> str:
    if result.status in ("pass", "skip"):
        return ""
    item = str(result.details.get("item") or "")
    if item == "packages" and result.details.get("stack") is False:
        item = "packages-other"
    return _ADVICE.get(item, _ADVICE["*"])


PRESENTATION = Presentation(
    heading="Versions",
    about="driver, CUDA, cuDNN, NCCL, Python, torch and packages agree across nodes",
    advice=_advice,
)

CHECK = Check(
    name=NAME,
    title="driver, CUDA, cuDNN, NCCL, Python, torch and package versions agree and meet [expect]",
    run=_run,
    presentation=PRESENTATION,
)
