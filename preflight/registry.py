"""The checks and renderers preflight knows, found through their packages' registries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from preflight.check import Check
from preflight.errors import UsageError


def all_checks() -> tuple[Check, ...]:
    import checks

    return checks.registry()


def select_checks(only: Iterable[str] | None, skip: Iterable[str] | None) -> list[Check]:
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
    # `connect` is how every other check gets its facts: it always runs.
    return [c for c in known if c.name == "connect" or (c.name in wanted and c.name not in skipped)]
