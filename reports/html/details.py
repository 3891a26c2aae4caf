"""Any finding's details as readable keys, for the "Details" drawer under each finding: scalars
as text, short lists joined, lists of records as tables, the rest as pretty JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from preflight.view import MAX_TABLE_ROWS, Table, TCell, scalar
from reports.html.text import as_json, text


@dataclass(frozen=True)
class KV:
    """One key of a generic details view: a short text, a table, or (pretty) JSON."""

    key: str
    text: str = ""
    table: Table | None = None
    code: str = ""


def generic_details(details: Mapping[str, Any]) -> list[KV]:
    """Any details as readable keys: scalars as text, short lists joined, lists of records as
    tables, everything else as pretty JSON."""
    out: list[KV] = []
    for key, value in details.items():
        out.append(_kv(text(key), value))
    return out


def _kv(key: str, value: Any) -> KV:
    if _is_scalar(value):
        return KV(key, text=scalar(value))
    if isinstance(value, list) and len(value) <= 40 and all(_is_scalar(v) for v in value):
        return KV(key, text=", ".join(scalar(v) for v in value) or "(none)")
    if (
        isinstance(value, Mapping)
        and 0 < len(value) <= MAX_TABLE_ROWS
        and all(map(_is_scalar, value.values()))
    ):
        rows = [[TCell(text(k), "mono"), TCell(scalar(v))] for k, v in value.items()]
        return KV(key, table=Table(head=("", ""), rows=rows, css="kv"))
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        columns = list(dict.fromkeys(k for v in value for k in v))
        if len(columns) <= 8 and all(_is_scalar(x) for v in value for x in v.values()):
            rows = [[TCell(scalar(v.get(c))) for c in columns] for v in value[:MAX_TABLE_ROWS]]
            extra = len(value) - MAX_TABLE_ROWS
            more = f"{extra} more rows in the JSON report" if extra > 0 else ""
            return KV(key, table=Table(head=[text(c) for c in columns], rows=rows, note=more))
    return KV(key, code=as_json(value))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
