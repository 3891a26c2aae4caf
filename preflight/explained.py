"""Every explanation preflight has, gathered from the checks (``Check.explains``) and the history
store, with their thresholds' settings resolved: looked up by ``preflight explain``, found for each
finding of a report, and written out as docs/findings.md (``python -m preflight.explained
docs/findings.md``)."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from preflight.config import RunSection
from preflight.errors import UsageError
from preflight.explain import Explained, Explanation, resolve_threshold
from preflight.history.settings import HistorySection
from preflight.model import CheckResult

# The tables a threshold may name that are not a check's: the run's own and the history store's.
RUN_TABLES: Mapping[str, type[Any]] = {"run": RunSection, "history": HistorySection}


@functools.cache
def explained_items() -> tuple[Explained, ...]:
    """Every check's explanations, in registry order, thresholds resolved (then the history
    store's)."""
    from preflight.history.annotate import CHECK as HISTORY_CHECK  # not a check: no --only history
    from preflight.history.explain import EXPLAINS as HISTORY
    from preflight.registry import all_checks, setting_tables, shared_explanations

    tables = {**RUN_TABLES, **setting_tables()}
    owned: list[tuple[str, tuple[str, ...], Explanation]] = [
        (c.name, (c.name,), e) for c in all_checks() for e in c.explains
    ]
    owned += [(s.owner, s.reporters, e) for s in shared_explanations() for e in s.explains]
    owned += [(HISTORY_CHECK, (HISTORY_CHECK,), e) for e in HISTORY]
    return tuple(
        Explained(owner, e, resolve_threshold(owner, e.threshold, tables), reporters)
        for owner, reporters, e in owned
    )


def lookup(query: str, known: Sequence[Explained] | None = None) -> list[Explained]:
    """The explanations ``query`` names: ``ITEM`` (every check's that carries it) or
    ``CHECK/ITEM``. An unknown one is a usage error naming the nearest items."""
    known = explained_items() if known is None else known
    wanted = query.strip()
    found = [e for e in known if wanted in (e.key, e.explanation.item)]
    if found:
        return found
    names = sorted({e.explanation.item for e in known} | {e.key for e in known})
    nearest = difflib.get_close_matches(wanted, names, n=4, cutoff=0.5)
    hint = f"; nearest: {', '.join(nearest)}" if nearest else "; `preflight explain` lists them"
    raise UsageError(f"no finding item {wanted!r}{hint}")


def item_of(details: Mapping[str, Any]) -> str | None:
    """The item a finding is about: its ``item``, or for a host that could not be checked, the
    ``cause`` (the host error's kind)."""
    item = details.get("item") or details.get("cause")
    return item if isinstance(item, str) else None


def explanation_for(check: str, details: Mapping[str, Any], known: Sequence[Explained]) -> Explained | None:
    """The explanation of a finding of ``check``: its own, else the shared one its check reports
    (the job's, whichever job check reports it), else the one explanation of the item there is."""
    item = item_of(details)
    if item is None:
        return None
    carried = [e for e in known if e.explanation.item == item]
    exact = [e for e in carried if e.check == check] or [e for e in carried if check in e.reporters]
    found = exact or (carried if len(carried) == 1 else [])
    return found[0] if found else None


def explained_in(results: Sequence[CheckResult], known: Sequence[Explained]) -> list[Explained]:
    """The explanations of the findings that failed, erred or warn, and of the notes, each once, in
    order (a skip says why a check did not run, and a pass has nothing to look into)."""
    found: dict[str, Explained] = {}
    for result in results:
        if result.status == "skip" or (result.status == "pass" and not result.details.get("note")):
            continue
        explained = explanation_for(result.check, result.details, known)
        if explained is not None:
            found.setdefault(explained.key, explained)
    return list(found.values())


def explain_command(results: Sequence[CheckResult], known: Sequence[Explained] | None = None) -> str | None:
    """``preflight explain A B``: the command that explains what a report named; None when it named
    nothing explained."""
    found = explained_in(results, explained_items() if known is None else known)
    return f"preflight explain {' '.join(e.key for e in found)}" if found else None


def findings_markdown(known: Sequence[Explained] | None = None) -> str:
    """docs/findings.md: every item's explanation, by check (generated; a test keeps it so)."""
    known = explained_items() if known is None else known
    lines = [
        "# Findings explained",
        "",
        "<!-- Generated from each check's explanations (`Check.explains`) by",
        "     `python -m preflight.explained docs/findings.md`; edit those, not this file. -->",
        "",
        "What each finding item (`details.item`, [names.md](names.md)) means, how it is measured, the",
        "threshold it crossed and the setting that moves it, what to do first, and what a healthy",
        "node shows instead. `preflight explain ITEM` prints the same.",
    ]
    check = None
    for e in known:
        if e.check != check:
            check = e.check
            lines += ["", f"## `{check}`"]
        lines += ["", f"### `{e.key}`", ""]
        for heading, text in e.fields():
            lines.append(f"- **{heading}.** {text}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    import sys
    from pathlib import Path

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write("usage: python -m preflight.explained docs/findings.md\n")
        return 2
    Path(args[0]).write_text(findings_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
