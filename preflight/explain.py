"""What a finding item means: the declaration a check makes of each item its findings carry, and
how one reads (``preflight explain ITEM``, the reports, docs/findings.md:
:mod:`preflight.explained` gathers them).

A check declares the items its findings carry in ``details.item`` (docs/names.md) as
:class:`Explanation` values beside its settings (``Check.explains``). A threshold names the
settings it reads as ``{field}`` (a field of the check's own section) or ``{table.field}`` (another
table's: ``{run.silence_s}``, ``{allreduce.slow_ratio}``); the explanation shows each as the TOML
line that sets it, with the value its one declaration gives, so a default changed in code is
changed here too.
"""

from __future__ import annotations

import dataclasses
import string
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Explanation:
    """One finding item: what it ``means``; how it is ``measured``; the ``threshold`` it crossed
    (with ``{field}`` references to its settings, empty where it has none); what to do ``first``;
    and what a ``healthy`` node shows instead."""

    item: str
    means: str
    measured: str
    threshold: str
    first: str
    healthy: str


@dataclass(frozen=True)
class SharedExplanations:
    """Items the findings of several checks carry, explained once under ``owner`` (not a check:
    the job every one of ``reporters`` is judged in)."""

    owner: str
    reporters: tuple[str, ...]
    explains: tuple[Explanation, ...]


@dataclass(frozen=True)
class Explained:
    """An explanation, with the check (or the owner of shared items) it comes under, the checks
    whose findings carry it, and its thresholds' settings resolved."""

    check: str
    explanation: Explanation
    threshold: str
    reporters: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.check}/{self.explanation.item}"

    @property
    def first_sentence(self) -> str:
        """The first sentence of what it means: what a list of items shows of each."""
        means = self.explanation.means
        cut = means.find(". ")
        return means if cut < 0 else means[: cut + 1]

    @property
    def first_line(self) -> str:
        """The one line a JUnit failure carries: the key and the first sentence."""
        return f"{self.key}: {self.first_sentence}"

    def fields(self) -> list[tuple[str, str]]:
        """(heading, text) in the order every rendering shows them."""
        e = self.explanation
        rows = [("What it means", e.means), ("How it is measured", e.measured)]
        if self.threshold:
            rows.append(("Threshold", self.threshold))
        rows += [("What to do first", e.first), ("What a healthy node shows", e.healthy)]
        return rows


def setting_line(table: str, section: type[Any], field: str) -> str:
    """``[table] field = value``, the value from the section's declaration."""
    known = {f.name: f for f in dataclasses.fields(section)}
    if field not in known:
        raise KeyError(f"[{table}] has no setting {field!r}")
    declared = known[field]
    if declared.default is not dataclasses.MISSING:
        value: Any = declared.default
    elif declared.default_factory is not dataclasses.MISSING:
        value = declared.default_factory()
    else:
        raise KeyError(f"[{table}] {field} has no default")
    return f"`[{table}] {field} = {_toml(value)}`"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple | frozenset | set):
        return f"[{', '.join(_toml(v) for v in value)}]"
    return repr(value)


def resolve_threshold(check: str, text: str, tables: Mapping[str, type[Any]]) -> str:
    """``text`` with each ``{field}`` or ``{table.field}`` shown as its setting's TOML line."""
    out: list[str] = []
    for literal, name, _, _ in string.Formatter().parse(text):
        out.append(literal)
        if name is None:
            continue
        table, _, field = name.rpartition(".")
        table = table or check
        if table not in tables:
            raise KeyError(f"{check}: a threshold names the table [{table}], which has no settings")
        out.append(setting_line(table, tables[table], field))
    return "".join(out)


def code_spans(text: str) -> list[tuple[bool, str]]:
    """``text`` cut at its backticks: (is code, part), for a page to set the code apart."""
    return [(n % 2 == 1, part) for n, part in enumerate(text.split("`")) if part]


def text_lines(explained: Explained) -> Iterator[str]:
    """The explanation as the terminal prints it."""
    yield explained.key
    for heading, text in explained.fields():
        yield f"  {heading}:"
        yield from (f"    {line}" for line in _wrapped(text))


def _wrapped(text: str, width: int = 92) -> Iterator[str]:
    for paragraph in text.split("\n"):
        yield from textwrap.wrap(paragraph, width) or [""]
