"""The checks preflight knows, found through the ``checks`` package's registry.

This module is the only place in the core that reaches into ``checks``; everything else
receives checks as :class:`~preflight.check.Check` values, or what they declare through the
functions here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from preflight.check import Check
from preflight.errors import UsageError
from preflight.explain import SharedExplanations
from preflight.measures import Entity, Measure, PartsNamed
from preflight.view import Presentation


def all_checks() -> tuple[Check, ...]:
    import checks

    return checks.registry()


def presentation_of(name: str) -> Presentation | None:
    """How the check ``name`` presents itself; None for a check this version does not know
    (a report written by another version)."""
    return next((c.presentation for c in all_checks() if c.name == name), None)


def measures_of(name: str) -> tuple[Measure, ...]:
    """The rates the check ``name`` measures; none for a check this version does not know."""
    return next((c.measures for c in all_checks() if c.name == name), ())


def kept_measures() -> dict[str, Measure]:
    """The rates the history store keeps, by metric, in the order reports show them: by entity
    (nodes, pairs, GPUs), then in registry order."""
    kept = [m for c in all_checks() for m in c.measures if m.kept]
    return {m.metric: m for m in sorted(kept, key=lambda m: m.order)}


def kept_metrics(*entities: Entity) -> tuple[str, ...]:
    """The metrics of the kept rates that belong to ``entities``, in :func:`kept_measures`' order."""
    return tuple(m.metric for m in kept_measures().values() if m.entity in entities)


def parts_named_by(name: str) -> PartsNamed | None:
    """How the check ``name`` says which parts one of its findings is about, where it says so."""
    return next((c.parts_named for c in all_checks() if c.name == name), None)


def setting_tables() -> Mapping[str, type[Any]]:
    """Each check's config table (named after the check) and the section read from it."""
    return {c.name: c.settings.section for c in all_checks() if c.settings is not None}


def shared_explanations() -> tuple[SharedExplanations, ...]:
    """The items several checks' findings carry, each explained once (the job's)."""
    import checks

    return checks.shared_explanations()


def unreached_check() -> str:
    """The check the hand-back lists a node under when the node could not be checked."""
    return next(c.name for c in all_checks() if c.names_unreached)


def select_checks(
    only: Iterable[str] | None, skip: Iterable[str] | None, *, has_baseline: bool = False
) -> list[Check]:
    """The checks to run, in registry order; unknown names are a usage error listing the known ones."""
    known = all_checks()
    names = {c.name for c in known}
    for option, given in (("--only", only), ("--skip", skip)):
        for name in given or ():
            if name not in names:
                raise UsageError(
                    f"{option}: unknown check {name!r} (known: {', '.join(c.name for c in known)})"
                )
    wanted: Sequence[str] = list(only) if only else [c.name for c in known]
    skipped = set(skip or ())

    def chosen(check: Check) -> bool:
        if check.always:
            return True
        if check.needs_baseline:
            return has_baseline and check.name not in skipped
        return check.name in wanted and check.name not in skipped

    return [c for c in known if chosen(c)]
