"""The JSON contract of the ``environment`` check's details: the variables that set nodes apart, or what
every node sees alike (the pass).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class VariableValues(TypedDict):
    """A variable that differs: each value as shown, with the nodes that have it (largest group
    first), where each node's value comes from, and the nodes the finding names."""

    values: dict[str, list[str]]
    sources: dict[str, str]
    odd: list[str]


class Differences(TypedDict):
    """``item: variables``: variables that set the same nodes apart."""

    item: str
    variables: dict[str, VariableValues]
    must_match: bool


class Agreement(TypedDict):
    """The pass: what every node sees alike."""

    nodes: int
    agreed: dict[str, str]
    job_env: list[str]
    net_plugin: str | None
    not_reported: NotRequired[list[str]]
