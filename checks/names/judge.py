"""The ``names`` judge (pure): how each node resolved the master's name, its own and its peers',
against the address the controller reaches each node at.

A node whose own name resolves to a loopback address (``127.0.1.1`` in a Debian ``/etc/hosts``)
is the classic cause of rendezvous failures: gloo and torchrun advertise that address to their
peers. A name that resolves wrongly on most nodes is the name's own record (DNS, a shared
``/etc/hosts``); one that resolves wrongly on a few nodes is those nodes' resolver.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from checks.names.details import (
    NamesDetails,
    NameWrong,
    NodeNames,
    OwnLoopback,
    ResolverWrong,
    Rows,
)
from preflight.findings import finding, no_answer
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold, group_by_value
from preflight.status import Status

NAME = "names"

Verdict = Literal["ok", "unresolvable", "loopback", "wrong", "other_interface"]
_STATUS: dict[Verdict, Status] = {
    "unresolvable": "fail",
    "loopback": "fail",
    "wrong": "fail",
    "other_interface": "warn",
}


@dataclass(frozen=True)
class NamedNode:
    """A name of one node: whose it is, the address the controller reaches that node at (None
    where the controller cannot tell) and the addresses of the node's own interfaces."""

    owner: str
    expected: str | None
    own_addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answer:
    """What one node's resolver said for one name: its addresses in order, or why none."""

    addresses: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class NamesObservation:
    """Every name asked (by name), what each node answered (node -> name -> answer), the nodes
    that gave no answer at all, and the master's host name."""

    names: Mapping[str, NamedNode]
    answers: Mapping[str, Mapping[str, Answer]]
    errors: Mapping[str, str] = field(default_factory=dict)
    master: str = ""


@dataclass(frozen=True)
class Problem:
    resolver: str
    name: str
    verdict: Verdict
    answer: str  # the first address, or the resolver's error


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return False
    return True


def verdict(resolver: str, named: NamedNode, answer: Answer) -> tuple[Verdict, str]:
    """How one resolution went, and the address (or error) it gave."""
    if not answer.addresses:
        return "unresolvable", answer.error or "no address"
    first = answer.addresses[0]
    if is_loopback(first):
        return "loopback", first
    if named.expected is not None:
        if first == named.expected:
            return "ok", first
        return ("other_interface" if first in named.own_addresses else "wrong"), first
    if not named.own_addresses or first in named.own_addresses:
        return "ok", first
    return "wrong", first


def _label(name: str, names: Mapping[str, NamedNode], master: str) -> str:
    owner = names[name].owner
    if owner == master:
        return f"{name} (the master)" if name == owner else f"{name} (the master, {owner})"
    return name if name == owner else f"{name} ({owner})"


def _problem_text(problem: Problem, names: Mapping[str, NamedNode], master: str) -> str:
    label = _label(problem.name, names, master)
    expected = names[problem.name].expected
    if problem.verdict == "unresolvable":
        return f"{label} does not resolve ({problem.answer})"
    where = f", not {expected}" if expected else ""
    if problem.verdict == "other_interface":
        return f"{label} resolves to {problem.answer}, another of its interfaces{where}"
    if problem.verdict == "loopback":
        return f"{label} resolves to the loopback address {problem.answer}{where}"
    return f"{label} resolves to {problem.answer}, an address it does not have{where}"


# Problems of one node spelled out in its summary before "and N more" (details have all).
_LISTED = 3


def _listed(texts: list[str]) -> str:
    shown = "; ".join(texts[:_LISTED])
    return shown + (f"; and {len(texts) - _LISTED} more" if len(texts) > _LISTED else "")


def _result(status: Status, summary: str, hosts: Sequence[str], details: NamesDetails) -> CheckResult:
    return finding(NAME, status, summary, hosts, details, natural_order=True)


def _own_loopback(problems: list[Problem], names: Mapping[str, NamedNode]) -> list[CheckResult]:
    own = [p for p in problems if p.verdict == "loopback" and names[p.name].owner == p.resolver]
    if not own:
        return []
    by_node: dict[str, str] = {}
    for problem in own:
        by_node.setdefault(problem.resolver, f"{problem.name} -> {problem.answer}")
    findings = []
    for text, hosts in group_by_value(by_node):
        findings.append(
            _result(
                "fail",
                f"{fold(hosts)}: the node's own name resolves to a loopback address ({text}): gloo "
                "and torchrun advertise that address to their peers, who then cannot connect "
                "(a 127.0.1.1 line in /etc/hosts?)",
                hosts,
                OwnLoopback(item="own_loopback", resolutions={h: by_node[h] for h in hosts}),
            )
        )
    return findings


def _problems(obs: NamesObservation) -> tuple[list[Problem], dict[str, list[str]]]:
    """Every answer that is not the expected address, and which nodes answered for each name."""
    problems: list[Problem] = []
    asked: dict[str, list[str]] = {}  # name -> the nodes that answered for it
    for resolver, answers in obs.answers.items():
        for name, answer in answers.items():
            if name not in obs.names:
                continue
            asked.setdefault(name, []).append(resolver)
            outcome, text = verdict(resolver, obs.names[name], answer)
            if outcome != "ok":
                problems.append(Problem(resolver, name, outcome, text))
    return problems, asked


def _name_wrong(name: str, found: list[Problem], names: Mapping[str, NamedNode], master: str) -> CheckResult:
    """The finding about a name wrong on most nodes that looked it up, named on the name's node."""
    texts_by_node = {p.resolver: _problem_text(p, names, master) for p in found}
    worst: Status = "fail" if any(_STATUS[p.verdict] == "fail" for p in found) else "warn"
    lines = "; ".join(f"{text} on {fold(hosts)}" for text, hosts in group_by_value(texts_by_node))
    owner = names[name].owner
    return _result(
        worst,
        f"{owner}: {lines}",
        [owner],
        NameWrong(
            item=found[0].verdict,
            name=name,
            expected=names[name].expected,
            answers={p.resolver: p.answer for p in found},
        ),
    )


def _resolvers_wrong(
    per_resolver: Mapping[str, list[Problem]], names: Mapping[str, NamedNode], master: str
) -> list[CheckResult]:
    """A finding for each group of nodes whose resolvers got the same names wrong."""
    texts = {
        resolver: _listed([_problem_text(p, names, master) for p in found])
        for resolver, found in per_resolver.items()
    }
    findings = []
    for text, hosts in group_by_value(texts):
        theirs = per_resolver[hosts[0]]
        status: Status = "fail" if any(_STATUS[p.verdict] == "fail" for p in theirs) else "warn"
        findings.append(
            _result(
                status,
                f"{fold(hosts)}: {text} there, unlike on the other nodes",
                hosts,
                ResolverWrong(item=theirs[0].verdict, names={p.name: p.answer for p in theirs}),
            )
        )
    return findings


def judge_names(obs: NamesObservation) -> list[CheckResult]:
    names, master = obs.names, obs.master
    problems, asked = _problems(obs)
    # On one node the job's ranks meet on that node: its own name on loopback is no fault.
    single = len({n.owner for n in names.values()} | set(obs.answers)) <= 1
    findings = [] if single else _own_loopback(problems, names)
    rest = [p for p in problems if not (p.verdict == "loopback" and names[p.name].owner == p.resolver)]
    # A name wrong on most of the nodes that looked it up is the name's own record: one finding
    # about the name's node. Wrong on a few, it is those nodes' resolver: one finding per node.
    by_name: dict[str, list[Problem]] = {}
    for problem in rest:
        by_name.setdefault(problem.name, []).append(problem)
    per_resolver: dict[str, list[Problem]] = {}
    for name, found in by_name.items():
        if 2 * len(found) > len(asked[name]):
            findings.append(_name_wrong(name, found, names, master))
        else:
            for problem in found:
                per_resolver.setdefault(problem.resolver, []).append(problem)
    findings += _resolvers_wrong(per_resolver, names, master)
    unanswered = no_answer(NAME, obs.errors, "could not look names up")
    findings += [unanswered] if unanswered else []
    rows = _rows(obs)
    if findings:
        return with_check_details(findings, rows)
    if not obs.answers:
        return [_result("skip", "no node answered", [], rows)]
    if single:
        summary = f"the one node resolves its own names ({len(names)}) to where the controller reaches it"
    else:
        summary = (
            f"all {len(obs.answers)} nodes resolve the master's name, their own and their peers' "
            f"({len(names)} names) to the addresses the controller reaches them at"
        )
    return [_result("pass", summary, [], rows)]


def _first(answer: Answer) -> str:
    return answer.addresses[0] if answer.addresses else answer.error or "no address"


def _rows(obs: NamesObservation) -> Rows:
    """Per node: how it resolved its own names and the master's, and how many names it checked."""
    nodes: dict[str, NodeNames] = {}
    for resolver, answers in obs.answers.items():
        own = {n: a for n, a in answers.items() if n in obs.names and obs.names[n].owner == resolver}
        master = {n: a for n, a in answers.items() if n in obs.names and obs.names[n].owner == obs.master}

        def shown(found: Mapping[str, Answer]) -> str:
            return ", ".join(f"{n} -> {_first(a)}" for n, a in found.items())

        nodes[resolver] = {"own": shown(own), "master": shown(master), "names": len(answers)}
    return {"master": obs.master, "nodes": nodes}
