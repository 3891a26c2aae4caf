"""A pair of nodes, by node rank, always smaller first: the one form every planner, test and judge
of the pair tests uses (the job's ranks and the controller import it alike)."""

from __future__ import annotations

from typing import Tuple  # noqa: UP035 (see Pair)

# typing.Tuple, not tuple[int, int]: nodes run Python 3.8, where the latter is no type at run time.
Pair = Tuple[int, int]  # noqa: UP006


def pair_key(a: int, b: int) -> Pair:
    """The pair of nodes ``a`` and ``b``, smaller first."""
    return (a, b) if a < b else (b, a)
