"""The ``environment`` judge (pure): each node's variables as the job would see them (those of
the session the node is reached in, SSH or srun, then the job's own from ``--env``/``--env-file``/
``[job_env]`` over them, then NCCL's configuration files for what is still unset), compared
between nodes; the NCCL network plugin each node would load; names in NCCL's files that NCCL never
reads; ``NCCL_IB_HCA`` entries that select more HCAs than they name
(:mod:`checks.environment.hca_list`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from checks.environment.details import Agreement, Differences, VariableValues
from checks.environment.hca_list import VARIABLE as HCA_VARIABLE
from checks.environment.hca_list import judge_hca_lists
from preflight.facts import NodeFacts
from preflight.findings import finding
from preflight.model import CheckResult
from preflight.node.masking import MASK, is_secret_name
from preflight.node.stack import ENV_NAMES, ENV_PREFIXES
from preflight.nodeset import fold, group_by_value, minority
from preflight.status import Status

NAME = "environment"
UNSET = "(unset)"
HOST = "{host}"
# Variables listed by name in one summary line before "and N more" (details have all).
_LISTED = 4


@dataclass(frozen=True)
class Setting:
    """One variable on one node: as shown (secrets masked), its value (a secret's digest), that
    value with the node's own names as ``{host}``, and where it comes from (``session``, ``job``,
    or the NCCL configuration file that sets it)."""

    shown: str
    value: str
    compared: str
    source: str


def compared_name(name: str) -> bool:
    """Whether a variable is one the nodes are compared on (the facts probe's selection)."""
    return name.startswith(ENV_PREFIXES) or name in ENV_NAMES


def _identity_re(identities: Iterable[str]) -> re.Pattern[str] | None:
    words = sorted({i for i in identities if i and len(i) > 1}, key=len, reverse=True)
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![A-Za-z0-9_])(?:{alternatives})(?![A-Za-z0-9_])")


def identities_of(host: str, node: NodeFacts, address: str | None = None) -> set[str]:
    """What a node calls itself and is called: its host name (and short name), its inventory
    name and address, its interface addresses."""
    names = {host, *(node.addresses)}
    if address:
        names.add(address)
    if node.hostname:
        names |= {node.hostname, node.hostname.split(".")[0]}
    return names


def effective_settings(
    node: NodeFacts, job_env: Mapping[str, str], identities: Iterable[str] = ()
) -> dict[str, Setting]:
    """The variables the job sees on this node, by name. Secrets are compared by their keyed
    digest where the node sent one, and the node's own names and addresses in a value are
    compared as ``{host}`` (a per-node log file name is not a difference)."""
    pattern = _identity_re(identities)

    def setting(name: str, value: str, source: str, digest: str | None = None) -> Setting:
        if is_secret_name(name) or value == MASK:
            hidden = f"{MASK}{digest or ''}"
            return Setting(MASK, hidden, hidden, source)
        compared = pattern.sub(HOST, value) if pattern is not None else value
        return Setting(value, value, compared, source)

    digests = node.env_secret_digests
    found = {name: setting(name, value, "session", digests.get(name)) for name, value in node.env.items()}
    for name, value in job_env.items():
        if compared_name(name):
            found[name] = setting(name, value, "job", "job")
    if node.nccl is not None:
        # NCCL reads its files for what the environment leaves unset, the user's file first.
        for conf in sorted(node.nccl.conf_files, key=lambda f: f.role != "user"):
            for name, value in conf.settings.items():
                if name not in found:
                    found[name] = setting(name, value, conf.path)
    return found


def _ignored(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def _result(status: Status, summary: str, hosts: Sequence[str], **details: Any) -> CheckResult:
    return finding(NAME, status, summary, hosts, details)


def _side(value: str, hosts: Sequence[str], sources: Mapping[str, str]) -> str:
    origins = sorted({sources[h] for h in hosts if sources.get(h) not in (None, "session")})
    where = f" (from {', '.join(origins)})" if origins and value != UNSET else ""
    return f"{fold(hosts)}: {value}{where}"


def _variable(settings: Mapping[str, Mapping[str, Setting]], name: str) -> VariableValues | None:
    """The variable's values by node group, or None where the nodes agree (as compared)."""
    raw = {h: s[name].value if name in s else UNSET for h, s in settings.items()}
    compared = {h: s[name].compared if name in s else UNSET for h, s in settings.items()}
    if len(set(raw.values())) <= 1 or len(set(compared.values())) <= 1:
        return None
    _, odd = minority(compared)
    values: dict[str, list[str]] = {}
    for number, (_, hosts) in enumerate(group_by_value(compared), start=1):
        shown = {settings[h][name].shown if name in settings[h] else UNSET for h in hosts}
        label = next(iter(shown)) if len(shown) == 1 else compared[hosts[0]]
        if label == MASK:  # masked values that differ: told apart, never shown
            label = f"{MASK} (value {number})"
        values[label] = hosts
    sources = {h: s[name].source for h, s in settings.items() if name in s}
    return {"values": values, "sources": sources, "odd": odd}


def judge_environment(
    nodes: Mapping[str, NodeFacts],
    job_env: Mapping[str, str],
    *,
    ignore: Sequence[str] = (),
    must_match: Sequence[str] = (),
    nccl_in_use: bool = True,
    addresses: Mapping[str, str] | None = None,
) -> list[CheckResult]:
    """Variables that differ between nodes, one finding per set of odd nodes and severity: a node
    with a whole other environment is one finding listing its variables, not one per variable."""
    reported = {h: n for h, n in nodes.items() if "env" in n.raw}
    silent = [h for h in nodes if h not in reported]
    settings = {
        h: effective_settings(n, job_env, identities_of(h, n, (addresses or {}).get(h)))
        for h, n in reported.items()
    }
    names = sorted({name for s in settings.values() for name in s if not _ignored(name, ignore)})
    groups: dict[tuple[tuple[str, ...], bool], dict[str, VariableValues]] = {}
    for name in names:
        values = _variable(settings, name)
        if values is None:
            continue
        fails = _ignored(name, must_match) and (nccl_in_use or not name.startswith("NCCL_"))
        groups.setdefault((tuple(values["odd"]), fails), {})[name] = values
    findings: list[CheckResult] = []
    for (odd, fails), variables in sorted(groups.items(), key=lambda kv: (not kv[0][1], kv[0][0])):
        findings.append(_difference(list(odd), fails, variables, len(settings)))
    hca_values = {h: s[HCA_VARIABLE].shown for h, s in settings.items() if HCA_VARIABLE in s}
    findings += judge_hca_lists(hca_values, reported)
    findings += _judge_plugins(reported, nccl_in_use)
    findings += _judge_unread(reported)
    if findings:
        return findings
    first: Mapping[str, Setting] = next(iter(settings.values()), {})
    agreed = {name: first[name].shown for name in names if name in first}
    return [_agreement(reported, agreed, job_env, silent)]


def _difference(
    odd: list[str], fails: bool, variables: Mapping[str, VariableValues], total: int
) -> CheckResult:
    details: Differences = {"item": "variables", "variables": dict(variables), "must_match": fails}
    if len(variables) == 1:
        ((name, values),) = variables.items()
        sides = "; ".join(_side(v, hosts, values["sources"]) for v, hosts in values["values"].items())
        summary = f"{name} differs between nodes: {sides}"
    else:
        parts = []
        for name, values in list(variables.items())[:_LISTED]:
            mine = [v for v, hosts in values["values"].items() if set(hosts) & set(odd)]
            others = [v for v, hosts in values["values"].items() if not set(hosts) & set(odd)]
            parts.append(f"{name}={'/'.join(mine)}" + (f" (others: {'/'.join(others)})" if others else ""))
        more = f" and {len(variables) - _LISTED} more" if len(variables) > _LISTED else ""
        who = fold(odd) if len(odd) < total else "the nodes"
        verb = "differs" if len(odd) == 1 and len(odd) < total else "differ"
        summary = f"{who} {verb} in {len(variables)} variables: {'; '.join(parts)}{more}"
    if fails:
        summary += ": the ranks of a job must agree on these"
    return _result("fail" if fails else "warn", summary, odd, **details)


def _judge_plugins(nodes: Mapping[str, NodeFacts], nccl_in_use: bool) -> list[CheckResult]:
    loaded = {h: n.nccl.net_plugin for h, n in nodes.items() if n.nccl is not None}
    names = {h: p.rsplit("/", 1)[-1] if p else "none found" for h, p in loaded.items()}
    groups = group_by_value(names)
    if len(groups) <= 1:
        return []
    _, odd = minority(names)
    sides = "; ".join(
        f"{fold(hosts)}: {value}" + (f" ({loaded[hosts[0]]})" if loaded[hosts[0]] else "")
        for value, hosts in groups
    )
    return [
        _result(
            "fail" if nccl_in_use else "warn",
            f"the NCCL network plugin differs between nodes: {sides}: the nodes would not use the same "
            "network transport",
            odd,
            item="net_plugin",
            plugins={h: loaded[h] for h in loaded},
        )
    ]


def _judge_unread(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    unread: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for host, node in nodes.items():
        for conf in node.nccl.conf_files if node.nccl is not None else ():
            if conf.unread:
                unread.setdefault((conf.path, conf.unread), []).append(host)
    return [
        _result(
            "warn",
            f"{path} on {fold(hosts)} sets {', '.join(repr(n) for n in names)}: NCCL reads a line up to its "
            "first '=', spaces included, so it never reads these",
            hosts,
            item="conf_unread",
            path=path,
            names=list(names),
        )
        for (path, names), hosts in unread.items()
    ]


def _agreement(
    nodes: Mapping[str, NodeFacts], agreed: Mapping[str, str], job_env: Mapping[str, str], silent: list[str]
) -> CheckResult:
    plugins = {n.nccl.net_plugin for n in nodes.values() if n.nccl is not None}
    plugin = next(iter(plugins)) if len(plugins) == 1 else None
    details: Agreement = {
        "nodes": len(nodes),
        "agreed": dict(agreed),
        "job_env": sorted(n for n in job_env if compared_name(n)),
        "net_plugin": plugin,
    }
    if silent:
        details["not_reported"] = silent
    if not nodes:
        return _result("skip", "no node reported its environment", [], **details)
    listed = ", ".join(f"{k}={v}" for k, v in list(agreed.items())[:_LISTED])
    more = f" and {len(agreed) - _LISTED} more" if len(agreed) > _LISTED else ""
    where = f"all {len(nodes)} nodes" if len(nodes) > 1 else "the one node"
    if agreed:
        what = f"{len(agreed)} variables agree ({listed}{more}) on {where}"
    else:
        what = f"none of the variables NCCL, torch, CUDA and gloo read is set on {where}"
    job = f", with the job's {len(details['job_env'])} from --env" if details["job_env"] else ""
    plugin_text = f"; NCCL network plugin {plugin}" if plugin else ""
    missing = f" ({fold(silent)} did not report it)" if silent else ""
    return _result("pass", f"{what}{job}{plugin_text}{missing}", [], **details)
