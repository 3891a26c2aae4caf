"""The values each rank puts in the sweep's first op and the sums every element must come back as:
an all-reduce that delivers a chunk at the wrong offset, or drops one, shows up as wrong elements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

# Correctness values repeat with this period over elements; prime, so that a chunk landing
# at the wrong offset (a multiple of any power of two) shows up as wrong values.
PATTERN_PERIOD = 11


def pattern_values(period_index: int, rank: int) -> int:
    """The value rank ``rank`` puts at an element whose index is ``period_index`` mod the period."""
    return (7 * period_index + rank) % PATTERN_PERIOD + 1


def expected_sums(world_size: int) -> list[int]:
    """The exact all-reduce sum of ``pattern_values`` over every rank, per index in the period."""
    return [sum(pattern_values(k, r) for r in range(world_size)) for k in range(PATTERN_PERIOD)]


def _by_period(buffer: Any, period: int) -> tuple[Any, Any]:
    """``buffer`` as rows of ``period`` elements, and the elements left over (views, no copy)."""
    whole = buffer.numel() - buffer.numel() % period
    return buffer[:whole].view(-1, period), buffer[whole:]


def fill_periodic(torch: Any, buffer: Any, values: Sequence[float]) -> None:
    """Write ``values`` over ``buffer`` again and again, in place."""
    period = torch.tensor(list(values), dtype=buffer.dtype, device=buffer.device)
    rows, rest = _by_period(buffer, len(values))
    rows.copy_(period.expand_as(rows))
    rest.copy_(period[: rest.numel()])


def count_unlike(torch: Any, buffer: Any, values: Sequence[float]) -> int:
    """Elements of ``buffer`` that differ from ``values`` repeated over it (as fill_periodic writes)."""
    period = torch.tensor(list(values), dtype=buffer.dtype, device=buffer.device)
    rows, rest = _by_period(buffer, len(values))
    return int((rows != period).sum().item()) + int((rest != period[: rest.numel()]).sum().item())
