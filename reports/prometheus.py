"""The node_exporter textfile form of a run: gauges a dashboard or an alert can read.

One ``preflight_check_ok`` gauge per check and node (1: passed or warned; 0: a failed or
errored finding names the node, or one that names no node failed the whole check), each
node's hand-back verdict, the run's exit code and time, and every measure a check publishes as a
gauge (``Measure.gauge``, :mod:`preflight.measures`: the all-reduce bus bandwidth at the largest
size, each node's all-reduce pair ratio). The file is written atomically by the CLI, so the
collector never reads half of it.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable, Mapping

from preflight.handback import Handback
from preflight.measures import Gauge
from preflight.model import RunReport
from preflight.registry import measures_of

_HELP = {
    "preflight_run_exit_code": "exit code of the last preflight run (0 pass, 1 fail, 3 hosts unchecked)",
    "preflight_run_timestamp_seconds": "when the last preflight run started (Unix time)",
    "preflight_run_duration_seconds": "how long the last preflight run took",
    "preflight_check_ok": "1 when the check passed (or warned) on the node, 0 when it failed there",
    "preflight_node_ok": "1 when the node passed every check and can be used",
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


def _gauges(report: RunReport) -> dict[Gauge, list[tuple[dict[str, str], float]]]:
    """The samples of the measures the run's checks publish as gauges (``Measure.gauge``), by
    gauge, labelled with the check, the node where a sample belongs to one, and its own labels."""
    gauges: dict[Gauge, list[tuple[dict[str, str], float]]] = {}
    for result in report.results:
        for measure in measures_of(result.check):
            if measure.gauge is None:
                continue
            for sample in measure.read(result):
                labels = {"check": result.check} | ({"node": sample.node} if sample.node else {})
                gauges.setdefault(measure.gauge, []).append((labels | dict(sample.labels), sample.value))
    return gauges


def render(report: RunReport) -> str:
    handback = Handback.from_dict(report.handback) if report.handback is not None else None
    metrics: dict[str, list[tuple[dict[str, str], float]]] = {
        "preflight_run_exit_code": [({}, float(report.exit_code))],
        "preflight_run_duration_seconds": [({}, report.duration_s)],
        "preflight_check_ok": list(_check_ok(report)),
    }
    helps = dict(_HELP)
    for gauge, samples in _gauges(report).items():
        metrics[gauge.name] = metrics.get(gauge.name, []) + samples
        helps[gauge.name] = gauge.help
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
        lines += [f"# HELP {name} {helps[name]}", f"# TYPE {name} gauge"]
        lines += [f"{name}{_labels(labels)} {_value(value)}" for labels, value in samples]
    return "\n".join(lines) + "\n"
