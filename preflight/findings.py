"""A check's findings, made one way: its hosts once each (in the order given, or natural order),
its details as a dict; and the one finding for the nodes a check's probe got no answer from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from preflight.model import CheckResult
from preflight.nodeset import fold, natural_key
from preflight.status import Status


def finding(
    check: str,
    status: Status,
    summary: str,
    hosts: Iterable[str],
    details: Mapping[str, Any],
    *,
    natural_order: bool = False,
) -> CheckResult:
    """``check``'s finding: ``hosts`` once each, in natural order with ``natural_order``."""
    named = list(dict.fromkeys(hosts))
    if natural_order:
        named.sort(key=natural_key)
    return CheckResult(check, status, summary, tuple(named), dict(details))


def no_answer(check: str, errors: Mapping[str, str], could_not: str) -> CheckResult | None:
    """An error naming the nodes that did not answer ``check``'s probe, with the first reason
    (``item`` ``no_answer``, every node's reason in ``errors``); None when every node answered."""
    if not errors:
        return None
    summary = f"{fold(errors)}: {could_not}: {next(iter(errors.values()))}"
    return finding(
        check, "error", summary, errors, {"item": "no_answer", "errors": dict(errors)}, natural_order=True
    )
