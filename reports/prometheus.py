"""The node_exporter textfile form of a run: gauges a dashboard or an alert can read.

One ``preflight_check_ok`` gauge per check and node (1: passed or warned; 0: a failed or
errored finding names the node, or one that names no node failed the whole check), each
node's hand-back verdict, the run's exit code and time, the all-reduce bus bandwidth at the
largest size, and every per-node ratio a check publishes (``node_ratio`` in its details: the
all-reduce pair ratio, a compute ratio). The file is written atomically by the CLI, so the
collector never reads half of it.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable, Mapping
from typing import Any

from preflight.handback import Handback
from preflight.model import RunReport
from preflight.view import listed, number

_HELP = {
    "preflight_run_exit_code": "exit code of the last preflight run (0 pass, 1 fail, 3 hosts unchecked)",
    "preflight_run_timestamp_seconds": "when the last preflight run started (Unix time)",
    "preflight_run_duration_seconds": "how long the last preflight run took",
    "preflight_check_ok": "1 when the check passed (or warned) on the node, 0 when it failed there",
    "preflight_node_ok": "1 when the node passed every check and can be used",
    "preflight_allreduce_busbw_gbytes_per_second": "all-reduce bus bandwidth at the largest size (GB/s)",
    "preflight_node_ratio": "a node's measure relative to its peers' (1 = typical), by check",
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"


def _value(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


def _started_unix(report: RunReport) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(report.started_at, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _check_ok(report: RunReport) -> Iterable[tuple[dict[str, str], float]]:
    nodes = [h.name for h in report.hosts]
    reached = {h.name for h in report.hosts if h.reachable}
    for check in dict.fromkeys(r.check for r in report.results):
        failed: set[str] = set()
        for result in report.results_for(check):
            if result.status in ("fail", "error"):
                failed.update(result.hosts or reached)
        for node in nodes:
            if node in failed:
                yield {"check": check, "node": node}, 0.0
            elif node in reached:  # a node not reached was not checked: no sample, not a pass
                yield {"check": check, "node": node}, 1.0


def _busbw(report: RunReport) -> Iterable[tuple[dict[str, str], float]]:
    for result in report.results:
        sweep = [row for row in listed(result.details.get("sweep")) if isinstance(row, Mapping)]
        sized = [(number(row.get("size_bytes")), number(row.get("busbw_gbps"))) for row in sweep]
        measured = [(size, busbw) for size, busbw in sized if size is not None and busbw is not None]
        if measured:
            size, busbw = max(measured)
            yield {"check": result.check, "size_bytes": str(int(size))}, busbw


def _node_ratios(report: RunReport) -> Iterable[tuple[dict[str, str], float]]:
    for result in report.results:
        ratios: Any = result.details.get("node_ratio")
        if not isinstance(ratios, Mapping):
            continue
        for node, ratio in ratios.items():
            if (value := number(ratio)) is not None:
                yield {"check": result.check, "node": str(node)}, value


def render(report: RunReport) -> str:
    handback = Handback.from_dict(report.handback) if report.handback is not None else None
    metrics: dict[str, list[tuple[dict[str, str], float]]] = {
        "preflight_run_exit_code": [({}, float(report.exit_code))],
        "preflight_run_duration_seconds": [({}, report.duration_s)],
        "preflight_check_ok": list(_check_ok(report)),
        "preflight_allreduce_busbw_gbytes_per_second": list(_busbw(report)),
        "preflight_node_ratio": list(_node_ratios(report)),
    }
    if (started := _started_unix(report)) is not None:
        metrics["preflight_run_timestamp_seconds"] = [({}, started)]
    if handback is not None:
        bad = {b.name for b in handback.bad}
        metrics["preflight_node_ok"] = [
            ({"node": h.name}, 0.0 if h.name in bad else 1.0) for h in report.hosts
        ]
    lines: list[str] = []
    for name, samples in metrics.items():
        if not samples:
            continue
        lines += [f"# HELP {name} {_HELP[name]}", f"# TYPE {name} gauge"]
        lines += [f"{name}{_labels(labels)} {_value(value)}" for labels, value in samples]
    return "\n".join(lines) + "\n"
