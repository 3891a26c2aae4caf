"""The JSON contract of the ``names`` check's details: how each node resolved its own names and the
master's (the pass or skip, or added to the first finding), and what each finding found.
"""

from __future__ import annotations

from typing import Required, TypedDict


class NodeNames(TypedDict):
    """One node's row: its own names and the master's as ``name -> first address``, and how many
    names it looked up."""

    own: str
    master: str
    names: int


class Rows(TypedDict, total=False):
    """The master's host name and every node's row (by host)."""

    master: str
    nodes: dict[str, NodeNames]


class OwnLoopback(Rows):
    """Nodes whose own name resolves to a loopback address (``item`` ``own_loopback``): by node,
    ``name -> address``."""

    item: Required[str]
    resolutions: Required[dict[str, str]]


class NameWrong(Rows):
    """One name that most of the nodes that looked it up resolve wrongly: its node's own record
    (``item`` the verdict: ``loopback``, ``unresolvable``, ...), what each of them answered."""

    item: Required[str]
    name: Required[str]
    expected: Required[str | None]
    answers: Required[dict[str, str]]


class ResolverWrong(Rows):
    """Nodes whose resolver answers names unlike the other nodes (``item`` the first verdict):
    ``name -> answer`` for each name wrong there."""

    item: Required[str]
    names: Required[dict[str, str]]


class NoAnswer(Rows):
    """Nodes that could not look names up, each with why (``item`` ``no_answer``)."""

    item: Required[str]
    errors: Required[dict[str, str]]


NamesDetails = Rows | OwnLoopback | NameWrong | ResolverWrong | NoAnswer
