"""How the ``allreduce`` check presents itself: busbw against message size for the world and the
pairs, the pair matrix (or the slowest pairs, for many nodes), the transport NCCL used, and the
nodes the job lost in a finding's table.

The judge's keys are read through :class:`AllreduceDetails`; keys other writers used (older
reports, hand-made ones) are read from the plain mapping, and every value is checked as it is read.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from checks.allreduce.details import NAME, AllreduceDetails, PairTest, SweepRow
from checks.compute import root_cause
from checks.job.evidence import merged_details
from checks.job.job_findings import failures_table
from checks.job.pairs import typical_busbw
from preflight import view
from preflight.model import RunReport
from preflight.nodeset import fold, natural_key
from preflight.units import binary_size, significant
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

# Pair lines drawn one by one; beyond, the healthy pairs become a band and their median.
_MAX_PAIR_LINES = 12
# Nodes up to which the pair matrix is drawn; beyond, the slowest pairs are ranked.
_MATRIX_MAX_NODES = 64


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sweep_points(sweep: Any, key: str = "busbw_gbps") -> list[tuple[float, float]]:
    points = []
    for row in sweep if isinstance(sweep, list) else []:
        if not isinstance(row, Mapping):
            continue
        size, value = number(row.get("size_bytes")), number(row.get(key))
        if size is not None and value is not None and size > 0:
            points.append((size, value))
    return sorted(points)


def _pair_nodes(pair: Mapping[str, Any]) -> tuple[str, str] | None:
    """The pair's node names: ``hosts`` (names) before ``nodes`` (names in the judge's records)."""
    for key in ("hosts", "nodes"):
        nodes = pair.get(key)
        if isinstance(nodes, list | tuple) and len(nodes) == 2:
            return str(nodes[0]), str(nodes[1])
    a, b = pair.get("a"), pair.get("b")
    if a is not None and b is not None:
        return str(a), str(b)
    return None


def _pair_value(pair: Mapping[str, Any]) -> float | None:
    for key in ("busbw_gbps", "busbw", "large_busbw_gbps"):
        value = number(pair.get(key))
        if value is not None:
            return value
    points = _sweep_points(pair.get("sweep"))
    return points[-1][1] if points else None


def evidence(report: RunReport) -> list[Block]:
    """The section's charts and tables: the sweep with the pairs, the pair matrix, the transport."""
    results = report.results_for(NAME)
    raw = merged_details(results)
    details = cast(AllreduceDetails, raw)
    culprits = {h for r in results if r.status in ("fail", "warn", "error") for h in r.hosts}
    blocks: list[Block] = []
    series: list[view.Series] = []
    sweep: list[SweepRow] | None = details.get("sweep")
    world = _sweep_points(sweep)
    if world:
        nodes: list[str] | None = details.get("nodes")
        ranks: int | None = details.get("world_size")
        label = f"all {len(nodes)} nodes" if isinstance(nodes, list) and nodes else "whole world"
        if isinstance(ranks, int) and ranks:
            label += f" ({ranks} ranks)"
        series.append(view.Series(label, world, "c0", strong=True))
    tested: list[PairTest] | None = details.get("pairs")
    pairs = [p for p in listed(tested) if isinstance(p, Mapping)]
    pair_series = _pair_series(pairs, culprits)
    band = None
    healthy = [s for s in pair_series if not s.strong]
    if len(healthy) > _MAX_PAIR_LINES:
        sizes = sorted({x for s in healthy for x, _ in s.points})
        lower, upper, middle = [], [], []
        for size in sizes:
            values = sorted(y for s in healthy for x, y in s.points if x == size)
            lower.append((size, values[0]))
            upper.append((size, values[-1]))
            middle.append((size, statistics.median(values)))
        label = f"{len(healthy)} other pairs"
        if len(sizes) > 1:
            band = view.Band(f"{label} (min\u2013max)", lower, upper)
            kept = [view.Series(f"{label}, median", middle, "muted")]
        else:
            # One message size: the others' spread reads as a range bar from min to max.
            spread = [lower[0], middle[0], upper[0]]
            kept = [view.Series(f"{label}: min, median, max", spread, "muted")]
        pair_series = [s for s in pair_series if s.strong] + kept
    series += pair_series
    if series:
        figure: view.Figure = view.LineChart(
            series,
            x=view.Axis("message size", "log2", binary_size),
            y=view.Axis("busbw GB/s"),
            label="All-reduce bus bandwidth against message size",
            band=band,
        )
        legend = [Legend(s.label, s.css) for s in series[:1]]
        if any(s.css == "bad" for s in pair_series):
            legend.append(Legend("pairs with a named node", "bad"))
        if any(s.css == "muted" for s in pair_series):
            legend.append(Legend("other pairs", "muted"))
        if band is not None:
            legend.append(Legend(band.label, "band"))
        blocks.append(
            Chart(
                "Bus bandwidth by message size",
                figure,
                caption="busbw = algbw \u00d7 2(n\u22121)/n, comparable across world sizes "
                "(nccl-tests' definition); "
                "judge the large sizes, where the link, not latency, is the limit.",
                legend=legend,
                data=_sweep_table(sweep),
            )
        )
    measured: dict[str, dict[str, float]] | None = details.get("pair_matrix")
    stated: float | None = details.get("typical_pair_busbw_gbps")
    matrix = raw.get("matrix") or measured or raw.get("busbw_matrix")
    matrix_block = _pair_matrix(matrix, pairs, culprits, number(stated))
    if matrix_block is not None:
        blocks.append(matrix_block)
    per_node: dict[str, str] | None = details.get("transport")
    described: dict[str, dict[str, Any]] | None = details.get("transport_details")
    blocks.extend(_transport_blocks(per_node or raw.get("transports"), described))
    loaded = details.get("nccl_loaded")
    if isinstance(loaded, Mapping) and loaded:
        blocks.append(_nodes_by_value(loaded, "NCCL version", "NCCL the ranks ran", lambda _: "mono"))
    return blocks


def _socket_fails(transport: str) -> str:
    """A fall-back to TCP sockets, drawn as a failure."""
    return "st-text-fail" if "Socket" in transport else ""


def _nodes_by_value(values: Mapping[Any, Any], head: str, title: str, css: Callable[[str], str]) -> Table:
    """One row per distinct value with the nodes that have it, folded; the most common first."""
    by_value: dict[str, list[str]] = {}
    for node, value in values.items():
        by_value.setdefault(plain(value), []).append(str(node))
    rows = [
        [TCell(plain(fold(nodes)), "mono"), TCell(value, css(value))]
        for value, nodes in sorted(by_value.items(), key=lambda kv: -len(kv[1]))
    ]
    return Table(("nodes", head), rows[:MAX_TABLE_ROWS], title=title)


def _pair_series(pairs: Sequence[Mapping[str, Any]], culprits: set[str]) -> list[view.Series]:
    """One line per pair test, red where a finding names one of its nodes."""
    lines: list[view.Series] = []
    for pair in pairs:
        nodes = _pair_nodes(pair)
        points = _sweep_points(pair.get("sweep"))
        size, value = number(pair.get("size_bytes")), _pair_value(pair)
        if not points and size and value is not None:
            points = [(size, value)]
        if nodes is None or not points:
            continue
        involved = bool(set(nodes) & culprits)
        retest = " (re-test)" if pair.get("retest") else ""
        lines.append(
            view.Series(
                f"{plain(nodes[0])} \u2194 {plain(nodes[1])}{retest}",
                points,
                "bad" if involved else "muted",
                strong=involved,
            )
        )
    return lines


def _transport_blocks(transport: Any, described: Any) -> list[Block]:
    """The transport NCCL used by node: from its log's details, else the one line per node."""
    if (
        isinstance(described, Mapping)
        and described
        and all(isinstance(v, Mapping) for v in described.values())
    ):
        return [_transport_table(described)]
    if (
        isinstance(transport, Mapping)
        and transport
        and all(isinstance(v, Mapping) for v in transport.values())
    ):
        return [_transport_table(transport)]
    if isinstance(transport, Mapping) and transport:
        return [_nodes_by_value(transport, "transport", "Transport NCCL used", _socket_fails)]
    if isinstance(transport, str):
        return [Note(f"Transport: {plain(transport)}")]
    return []


def _transport_table(transport: Mapping[str, Any]) -> Table:
    """What NCCL's log says each node used: network, devices, GPUDirect RDMA, channel transports."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for host, t in transport.items():
        devices = ", ".join(
            f"{plain(d.get('name'))}" + (f" ({plain(d.get('link_layer'))})" if d.get("link_layer") else "")
            for d in listed(t.get("ib_devices")) + listed(t.get("socket_devices"))
            if isinstance(d, Mapping)
        )
        channels = ", ".join(f"{plain(k)} \u00d7{plain(v)}" for k, v in _mapping(t.get("channels")).items())
        warnings = t.get("warning_count") or len(listed(t.get("warnings")))
        row = (
            plain(t.get("version") or "\u2014"),
            plain(t.get("inter_node") or (f"none (chose {t['network']})" if t.get("network") else "\u2014")),
            devices or "\u2014",
            "yes" if t.get("gdrdma") else "no",
            channels or "\u2014",
            str(warnings or ""),
        )
        groups.setdefault(row, []).append(str(host))
    rows = [
        [
            TCell(plain(fold(hosts)), "mono"),
            *(TCell(v, "st-text-fail" if v == "NET/Socket" else "") for v in row),
        ]
        for row, hosts in sorted(groups.items(), key=lambda kv: -len(kv[1]))
    ]
    head = ("nodes", "NCCL", "between nodes", "devices", "GPUDirect RDMA", "channels", "warnings")
    return Table(head, rows[:MAX_TABLE_ROWS], title="Transport NCCL used (from its log)")


def _sweep_table(sweep: Sequence[SweepRow] | None) -> Table | None:
    if not isinstance(sweep, list) or not sweep:
        return None
    rows = []
    for row in sweep:
        if not isinstance(row, Mapping):
            continue
        size = number(row.get("size_bytes"))
        time_s = number(row.get("time_s"))
        rows.append(
            [
                TCell(binary_size(size) if size is not None else "—", "num"),
                TCell(f"{time_s * 1e6:,.0f}" if time_s is not None else "—", "num"),
                TCell(scalar(row.get("algbw_gbps")), "num"),
                TCell(scalar(row.get("busbw_gbps")), "num"),
            ]
        )
    return Table(("size", "time (µs)", "algbw GB/s", "busbw GB/s"), rows, title="Full-world sweep")


def _typical(values: Mapping[tuple[str, str], float], names: Sequence[str]) -> float:
    """The typical pair as the judge defines it, for a report that does not state it."""
    index = {name: i for i, name in enumerate(names)}
    return typical_busbw({(index[a], index[b]): busbw for (a, b), busbw in values.items()})


def _pair_values(matrix: Any, pairs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """busbw by (node, node), both ways: the matrix's, then the pair tests' where it has none."""
    values: dict[tuple[str, str], float] = {}
    if isinstance(matrix, Mapping):
        for a, row in matrix.items():
            if isinstance(row, Mapping):
                for b, value in row.items():
                    busbw = number(value)
                    if busbw is not None:
                        values[(str(a), str(b))] = busbw
    for pair in pairs:
        nodes = _pair_nodes(pair)
        busbw = _pair_value(pair)
        if nodes is not None and busbw is not None:
            values.setdefault(nodes, busbw)
    for (a, b), busbw in list(values.items()):
        values.setdefault((b, a), busbw)
    return values


def _pair_matrix(
    matrix: Any, pairs: Sequence[Mapping[str, Any]], culprits: set[str], stated: float | None
) -> Block | None:
    """busbw between each pair of nodes as a heatmap, or the slowest pairs for many nodes."""
    values = _pair_values(matrix, pairs)
    if not values:
        return None
    names = sorted({n for pair in values for n in pair}, key=natural_key)
    typical = stated if stated else _typical(values, names)
    if len(names) > _MATRIX_MAX_NODES:
        return _slowest_pairs(values, culprits, typical)
    return _pair_heatmap(values, names, typical)


def _slowest_pairs(values: Mapping[tuple[str, str], float], culprits: set[str], typical: float) -> Block:
    """A thousand nodes do not fit a matrix: the pairs ranked instead, slowest first."""
    seen: dict[frozenset[str], float] = {}
    for (a, b), busbw in values.items():
        seen.setdefault(frozenset((a, b)), busbw)
    slowest = sorted(seen.items(), key=lambda kv: kv[1])[:20]
    bars = [
        view.Bar(
            " ↔ ".join(sorted(plain(n) for n in pair)),
            busbw,
            "bad" if pair & culprits or busbw < 0.7 * typical else "c0",
        )
        for pair, busbw in slowest
    ]
    figure = view.BarChart(
        bars, label="Slowest node pairs", axis=view.Axis("busbw GB/s"), markers=[(typical, "typical")]
    )
    return Chart(
        f"The 20 slowest of {len(seen)} pairs",
        figure,
        caption=f"A typical pair (the median of each node's best pair) runs at "
        f"{significant(typical)} GB/s busbw.",
    )


def _pair_heatmap(values: Mapping[tuple[str, str], float], names: Sequence[str], typical: float) -> Block:
    """Each pair's busbw as a cell of a node-by-node heatmap, shaded by its ratio to a typical pair."""
    cells: dict[tuple[int, int], view.Cell] = {}
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if a == b:
                cells[(i, j)] = view.Cell("self", "", f"{a}")
                continue
            busbw_ab = values.get((a, b))
            if busbw_ab is None:
                cells[(i, j)] = view.Cell("none", "", f"{plain(a)} ↔ {plain(b)}: not measured")
                continue
            ratio = busbw_ab / typical if typical else 1.0
            css = (
                "r-good" if ratio >= 0.9 else "r-ok" if ratio >= 0.7 else "r-low" if ratio >= 0.5 else "r-bad"
            )
            cells[(i, j)] = view.Cell(
                css,
                significant(busbw_ab),
                f"{plain(a)} ↔ {plain(b)}: {significant(busbw_ab)} GB/s busbw, "
                f"{ratio:.2f}\u00d7 a typical pair",
            )
    shown = [plain(n) for n in names]
    figure = view.Heatmap(
        shown,
        shown,
        cells,
        label="Pair bus bandwidth",
        row_axis="node",
        col_axis="node",
        cell_px=44 if len(names) <= 12 else 26,
    )
    return Chart(
        "Pair bandwidth",
        figure,
        caption=f"busbw of an all-reduce between each pair of nodes, GB/s; a typical pair (the median of "
        f"each node's best pair) runs at {significant(typical)} GB/s. A slow node darkens its "
        "whole row and column; a slow link, one cell.",
        legend=[
            Legend("≥ 0.9\u00d7 typical", "r-good"),
            Legend("0.7\u20130.9\u00d7", "r-ok"),
            Legend("0.5\u20130.7\u00d7", "r-low"),
            Legend("< 0.5\u00d7", "r-bad"),
        ],
    )


PRESENTATION = Presentation(
    heading="All-reduce bandwidth",
    about="all-reduce bus bandwidth over the whole world and between pairs of nodes",
    evidence=evidence,
    finding=failures_table,
    advice=advice_by_item(
        {
            "nccl_loaded": "Make every node load the same NCCL: check LD_LIBRARY_PATH, the nvidia-nccl "
            "package beside torch and any NCCL in the container image on the named nodes.",
            root_cause.ITEM: root_cause.ADVICE,
            "counter_growth": "Error counters grew while the job drove traffic: look at the named port's "
            "cable, transceiver and switch port (perfquery, ibqueryerrors; ethtool -S for an interface), "
            "and drain the node where link_downed or symbol_error grew.",
            "*": "Check the named node's NIC (link speed, errors: ibstat, ethtool -S), its cable and "
            "switch port; rerun without it to confirm.",
        }
    ),
)
