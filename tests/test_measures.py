"""What checks declare they measure (preflight/measures.py, ``Check.measures``) and who reads it:
the history store keeps the declared rates, judges them against their own past and draws them;
Prometheus publishes the declared gauges. A check that declares a new rate is kept, judged, drawn
and published with no change anywhere else. Runs: the recorded lab runs of tests/data/reports
(tests/data/reports/SOURCES.md) and the recorded H100 node of tests/data/runs/h100_node.json."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import preflight.registry
from checks.allreduce.measures import NODE_BUSBW, PAIR_BUSBW, WORLD_BUSBW
from checks.compute.measures import GPU_TFLOPS, slow_gpus
from checks.rails.measures import RAIL_BUSBW
from preflight.check import Check
from preflight.history.annotate import SLOWER
from preflight.history.record import RunInfo, record_of
from preflight.history.session import HistoryRequest, remember
from preflight.history.settings import HistorySection, iso
from preflight.measures import Gauge, Measure, PartRef, Sample
from preflight.model import CheckResult, HostReport, RunReport
from preflight.registry import all_checks, kept_measures
from preflight.view import Presentation
from reports import prometheus
from reports.html.history import history_view

REPORTS = Path(__file__).parent / "data" / "reports"
H100 = json.loads((Path(__file__).parent / "data" / "runs" / "h100_node.json").read_text())
INFO = RunInfo(inventory="hosts.txt", profile="standard", local=False)
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _recorded(name: str) -> RunReport:
    return RunReport.from_dict(json.loads((REPORTS / f"{name}.json").read_text()))


def _allreduce(report: RunReport) -> CheckResult:
    return next(r for r in report.results if r.check == "allreduce" and "sweep" in r.details)


def test_each_kept_metric_is_declared_once_for_a_node_a_pair_a_gpu_or_a_rail() -> None:
    declared = [m.metric for c in all_checks() for m in c.measures]
    assert len(declared) == len(set(declared))  # two checks under one name would share a series
    kept = kept_measures()
    assert {m.entity for m in kept.values()} <= {"node", "pair", "gpu", "rail"}
    # The order drawn: nodes' (in the registry's order of checks), pairs', GPUs', rails'.
    nodes = ["inside_busbw", NODE_BUSBW.metric, "ddp_step_s"]
    assert list(kept) == [*nodes, PAIR_BUSBW.metric, GPU_TFLOPS.metric, RAIL_BUSBW.metric]


def test_a_node_busbw_is_the_median_of_its_first_pair_tests_and_a_pair_its_best_test() -> None:
    result = _allreduce(_recorded("slow_node"))
    tests = result.details["pairs"]
    firsts: dict[str, list[float]] = {}
    for test in tests:
        if not test["retest"]:
            for node in test["nodes"]:
                firsts.setdefault(node, []).append(test["busbw_gbps"])
    nodes = {s.node: s.value for s in NODE_BUSBW.read(result)}
    assert nodes.keys() == firsts.keys()
    for node, values in firsts.items():
        assert min(values) <= nodes[node] <= max(values)
    pairs = {(s.node, s.part): s.value for s in PAIR_BUSBW.read(result)}
    for test in tests:
        first, second = sorted(test["nodes"])
        assert pairs[(first, second)] >= test["busbw_gbps"]  # a re-test faster than the first counts
    # node3 was throttled: every pair with it is slower than every pair without it.
    assert max(v for k, v in pairs.items() if "node3" in k) < min(
        v for k, v in pairs.items() if "node3" not in k
    )


def test_two_nodes_are_one_pair_measured_by_the_whole_sweep_once_it_reached_its_largest_size() -> None:
    sweep = [{"size_bytes": 1 << 20, "busbw_gbps": 1.5}, {"size_bytes": 1 << 26, "busbw_gbps": 2.5}]
    whole = CheckResult(
        "allreduce", "pass", "ok", (), {"nodes": ["a", "b"], "sweep": sweep, "sweep_complete": True}
    )
    assert [(s.node, s.value) for s in NODE_BUSBW.read(whole)] == [("a", 2.5), ("b", 2.5)]
    cut = CheckResult("allreduce", "fail", "cut", (), {**whole.details, "sweep_complete": False})
    assert NODE_BUSBW.read(cut) == []  # a sweep cut short measured no node's bandwidth
    assert WORLD_BUSBW.read(cut) == [Sample(2.5, labels=(("size_bytes", str(1 << 26)),))]


def test_a_burn_names_the_one_slow_gpu_of_each_node_by_its_serial() -> None:
    ranks = [
        {"host": "n1", "gpu_serial": "S1", "gpu_index": 0, "flops_per_s": 600e12, "ratio": 1.0},
        {"host": "n1", "gpu_serial": "S2", "gpu_index": 1, "flops_per_s": 300e12, "ratio": 0.5},
        {"host": "n2", "gpu_serial": None, "gpu_index": 0, "flops_per_s": 610e12, "ratio": 1.01},
    ]
    result = CheckResult("compute", "fail", "slow", ("n1",), {"slow_ratio": 0.9, "ranks": ranks})
    assert slow_gpus(result) == {"n1": [PartRef("gpu", identity="S2", slot="1")]}
    samples = GPU_TFLOPS.read(result)
    assert [(s.node, s.ref, s.value) for s in samples] == [
        ("n1", PartRef("gpu", identity="S1", slot="0"), 600.0),
        ("n1", PartRef("gpu", identity="S2", slot="1"), 300.0),
        ("n2", PartRef("gpu", slot="0"), 610.0),  # no serial from NVML: the history finds it by index
    ]
    errored = CheckResult("compute", "error", "the job died", ("n1",), {"item": "job_failed"})
    assert slow_gpus(errored) == {}  # a finding that judged no ranks names no GPU


# --------------------------------------------------------------------------- a check with a new rate


def _disk_reads(result: CheckResult) -> list[Sample]:
    reads: Any = result.details.get("read_gbps")
    return [Sample(float(v), node=n) for n, v in reads.items()] if isinstance(reads, Mapping) else []


DISK_READ = Measure(
    "disk_read",
    "GB/s",
    "node",
    "local disk read",
    "disk read",
    _disk_reads,
    own_past=True,
    gauge=Gauge("preflight_disk_read_gbytes_per_second", "local disk read rate (GB/s)"),
)
DISK = Check(
    name="disk",
    title="local disk read rate",
    run=lambda ctx: [],
    presentation=Presentation("Local disk", "how fast each node reads its local disk"),
    measures=(DISK_READ,),
)


@pytest.fixture
def with_disk_check(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = (*all_checks(), DISK)
    monkeypatch.setattr(preflight.registry, "all_checks", lambda: checks)


def _host(name: str) -> HostReport:
    facts = {**H100, "hostname": name}
    return HostReport(name=name, address=name, hostname=name, reachable=True, facts=facts)


def _run(at: datetime, reads: Mapping[str, float]) -> RunReport:
    hosts = [_host(name) for name in reads]
    result = CheckResult("disk", "pass", "disks alike", (), {"read_gbps": dict(reads)})
    return RunReport.build(
        tool_version="test", started_at=iso(at), duration_s=1.0, hosts=hosts, results=[result]
    )


@pytest.mark.usefixtures("with_disk_check")
def test_a_check_declaring_a_new_rate_is_kept_judged_drawn_and_published(tmp_path: Path) -> None:
    store = str(tmp_path / "history.sqlite")
    request = HistoryRequest(HistorySection(store=store), INFO)
    for day in range(8):
        remember(_run(NOW - timedelta(days=9 - day), {"d1": 6.0 + day % 2 / 100, "d2": 6.1}), request)
    report = _run(NOW, {"d1": 3.0, "d2": 6.1})
    assert [(r.metric, r.node, r.value) for r in record_of(report, INFO).rates] == [
        ("disk_read", "d1", 3.0),
        ("disk_read", "d2", 6.1),
    ]
    out = remember(report, request)
    [slower] = [r for r in out.results if r.details.get("item") == SLOWER]
    assert slower.hosts == ("d1",)
    assert slower.summary.startswith("d1: local disk read 3.0 GB/s, 50% below its own median of 6.0 GB/s")
    view = history_view(out)
    assert view is not None
    drawn = {row.what: row for row in view.drawn}
    assert drawn["d1"].metric == "disk read" and drawn["d1"].now == "3 GB/s"
    text = prometheus.render(out)
    assert "# HELP preflight_disk_read_gbytes_per_second local disk read rate (GB/s)" in text
    assert 'preflight_disk_read_gbytes_per_second{check="disk",node="d1"} 3' in text.splitlines()
