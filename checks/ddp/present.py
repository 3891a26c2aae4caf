"""How the ``ddp`` check presents itself: the loss by step, each rank's step time with the ranks a
finding names in red, whether parameters and gradients agree on every rank, and the nodes the
job lost in a finding's table.

The judge's keys are read through :class:`DdpDetails`; keys other writers used (older reports,
hand-made ones) are read from the plain mapping, and every value is checked as it is read.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping
from typing import Any, cast

from checks.compute import root_cause
from checks.ddp.details import NAME, DdpDetails, RankRow
from checks.job.evidence import merged_details
from checks.job.job_findings import failures_table
from preflight import view
from preflight.model import RunReport
from preflight.units import significant
from preflight.view import (
    MAX_TABLE_ROWS,
    Block,
    Chart,
    Legend,
    Note,
    Presentation,
    Table,
    TCell,
    advice_by_item,
    listed,
    number,
    plain,
    scalar,
)

# Ranks drawn in the step-time chart; beyond, the slowest.
_MAX_BARS = 48


def _numbers(value: Any) -> list[float]:
    if not isinstance(value, list):
        return []
    return [v for v in (number(x) for x in value) if v is not None]


def _per_rank(value: Any) -> dict[int, Any]:
    """A per-rank value given as a list by rank or a mapping keyed by rank."""
    if isinstance(value, list):
        return dict(enumerate(value))
    if isinstance(value, Mapping):
        return {int(k): v for k, v in value.items() if str(k).isdigit()}
    return {}


def rank_table(details: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """rank -> its numbers, from ``ranks`` records and from per-rank lists beside them."""
    judged = cast(DdpDetails, details)
    records: list[RankRow] | None = judged.get("ranks")
    ranks: dict[int, dict[str, Any]] = {}
    for position, record in enumerate(listed(records)):
        if isinstance(record, Mapping):
            rank = record.get("rank", position)
            if isinstance(rank, int):
                entry = ranks.setdefault(rank, {})
                entry.update(record)
                node = record.get("host") or record.get("node") or record.get("hostname")
                if node is not None:
                    entry["host"] = plain(node)
    # Each per-rank list, and the key its values take in a rank's entry.
    per_rank: tuple[tuple[list[Any] | None, str], ...] = (
        (judged.get("compute_step_s"), "compute_step_s"),
        (judged.get("wall_step_s"), "wall_step_s"),
        (details.get("step_time_s"), "step_time_s"),  # another writer's
        (judged.get("param_hashes"), "param_hash"),
        (judged.get("grad_hashes"), "grad_hash"),
        (judged.get("param_checksums"), "param_checksum"),
        (judged.get("grad_checksums"), "grad_checksum"),
    )
    for values, key in per_rank:
        for rank, value in _per_rank(values).items():
            ranks.setdefault(rank, {}).setdefault(key, value)
    return ranks


def _rank_label(rank: int, entry: Mapping[str, Any]) -> str:
    host = entry.get("host")
    return f"rank {rank}" + (f" {host}" if host else "")


def evidence(report: RunReport) -> list[Block]:
    """The section's charts and tables: loss, step time per rank, hashes by rank."""
    results = report.results_for(NAME)
    raw = merged_details(results)
    details = cast(DdpDetails, raw)
    culprits = {plain(h) for r in results if r.status in ("fail", "warn", "error") for h in r.hosts}
    ranks = rank_table(raw)
    blocks: list[Block] = []
    losses: Any = details["losses"] if "losses" in details else raw.get("loss")
    series: list[view.Series] = []
    if _numbers(losses):
        # The global loss (averaged over the ranks) at each step.
        series.append(view.Series("global loss", [(float(i + 1), v) for i, v in enumerate(_numbers(losses))]))
    else:
        for rank, values in sorted(_per_rank(losses).items()):
            points = [(float(i + 1), v) for i, v in enumerate(_numbers(values))]
            if points:
                host = ranks.get(rank, {}).get("host")
                bad = host is not None and host in culprits
                label = _rank_label(rank, ranks.get(rank, {}))
                series.append(view.Series(label, points, "bad" if bad else f"c{rank % 8}", strong=bad))
    if series:
        first, last = series[0].points[0][1], series[0].points[-1][1]
        figure: view.Figure = view.LineChart(
            series[:16], x=view.Axis("step", "linear"), y=view.Axis("loss"), label="Training loss by step"
        )
        trend = "fell" if last < first else "did not fall"
        blocks.append(
            Chart(
                "Loss",
                figure,
                caption=f"A seeded tiny model on synthetic data, every rank on its own batches; the global "
                f"loss {trend} from {significant(first)} to {significant(last)}.",
                legend=[Legend(s.label, s.css) for s in series[:16]] if len(series) > 1 else (),
            )
        )
    stated: float | None = details.get("median_compute_step_s")
    work = details.get("compute_work")
    chart = _step_times(ranks, _named_ranks(report), number(stated), work if isinstance(work, str) else None)
    if chart is not None:
        blocks.append(chart)
    blocks.extend(_hashes(ranks))
    return blocks


def _named_ranks(report: RunReport) -> set[int]:
    """The ranks a finding names (the check's own straggler rule decides, not this page)."""
    return {
        r.details["rank"]
        for r in report.results_for(NAME)
        if r.status != "pass" and isinstance(r.details.get("rank"), int)
    }


def _step_times(
    ranks: Mapping[int, Mapping[str, Any]], named: set[int], stated: float | None, work: str | None
) -> Chart | None:
    """Each rank's median step time as a bar, red where a finding names the rank: its compute time
    when the job measured it (``work`` says what ran); ``stated`` is the judge's median of it."""
    for key, title, about in (
        (
            "compute_step_s",
            "Compute step time per rank",
            plain(work) if work else "forward and backward on a local copy, no all-reduce",
        ),
        ("step_time_s", "Step time per rank", "one DDP step"),
        ("wall_step_s", "Step time per rank", "one DDP step, waiting for the slowest rank"),
    ):
        times = {rank: t for rank, entry in ranks.items() if (t := number(entry.get(key))) is not None}
        if not times:
            continue
        median = (
            stated if key == "compute_step_s" and stated is not None else statistics.median(times.values())
        )
        bars = []
        for rank, value in times.items():
            label = _rank_label(rank, ranks[rank])
            ms = value * 1000
            ratio = f"{value / median:.2f}\u00d7 the median rank" if median else ""
            tip = f"{label}: {significant(ms)} ms, {ratio}"
            bars.append((value, view.Bar(label, ms, "bad" if rank in named else "c0", tip)))
        note = ""
        if len(bars) > _MAX_BARS:
            # Many ranks: the slowest, which are the ones to look at.
            bars = sorted(bars, key=lambda vb: -vb[0])[:_MAX_BARS]
            note = f" The {_MAX_BARS} slowest of {len(times)} ranks are shown."
        return Chart(
            title,
            view.BarChart(
                [bar for _, bar in bars],
                label=title,
                axis=view.Axis("median step time (ms)"),
                markers=[(median * 1000, "median")],
            ),
            caption=f"Median per rank of {about}. A straggler holds every other rank back at each step; "
            "red: a rank a finding names." + note,
        )
    return None


def _hashes(ranks: Mapping[int, Mapping[str, Any]]) -> list[Block]:
    """Whether parameters and gradients agree on every rank: a note when they do, else the ranks."""
    hash_keys = [k for k in ("param_hash", "grad_hash") if any(k in e for e in ranks.values())]
    if not hash_keys:
        return []
    majority = {
        k: Counter(str(e.get(k)) for e in ranks.values() if k in e).most_common(1)[0][0] for k in hash_keys
    }
    odd = {r for r, e in ranks.items() for k in hash_keys if k in e and str(e[k]) != majority[k]}
    if not odd:
        sample = next(iter(ranks.values()))
        hashes = ", ".join(f"{k.replace('_', ' ')} {scalar(sample.get(k))}" for k in hash_keys)
        return [Note(f"Parameters and gradients identical on all {len(ranks)} ranks ({hashes}).")]
    shown = sorted(ranks) if len(ranks) <= 32 else sorted(odd)
    rows = [
        [
            TCell(f"rank {rank}"),
            TCell(plain(ranks[rank].get("host") or "\u2014"), "mono"),
            *(
                TCell(
                    scalar(ranks[rank].get(k)),
                    "mono odd odd-fail" if str(ranks[rank].get(k)) != majority[k] else "mono",
                )
                for k in hash_keys
            ),
        ]
        for rank in shown[:MAX_TABLE_ROWS]
    ]
    return [
        Table(
            ("rank", "node", *(k.replace("_", " ") for k in hash_keys)),
            rows,
            title="Parameters and gradients after training, by rank",
            note=f"{len(ranks) - len(odd)} of {len(ranks)} ranks agree"
            + ("; only the ranks that differ are listed." if len(ranks) > 32 else "."),
        )
    ]


PRESENTATION = Presentation(
    heading="DDP smoke training",
    about="a tiny model trains with DDP on every rank: loss falls, ranks agree, no straggler",
    evidence=evidence,
    finding=failures_table,
    advice=advice_by_item(
        {
            root_cause.ITEM: root_cause.ADVICE,
            "*": "Look at the named rank's node first: versions, GPU health and its link.",
        }
    ),
)
