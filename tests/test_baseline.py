"""The baseline gate: a run compared with a previous known-good one names what got worse, and where."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from checks.allreduce.measures import sweep_busbw
from checks.baseline import BaselineSection, compare
from preflight.config import Config
from preflight.model import CheckResult, HostReport, RunReport

H100 = json.loads((Path(__file__).parent / "data" / "runs" / "h100_node.json").read_text())


def hosts(n: int = 4, **changes: dict[str, Any]) -> list[HostReport]:
    made = []
    for i in range(1, n + 1):
        name = f"gpu{i:02d}"
        facts = copy.deepcopy(H100)
        for key, value in changes.get(name, {}).items():
            facts[key] = value
        made.append(HostReport(name, name, name, True, None, facts))
    return made


def allreduce(busbw_gbps: float, pairs: dict[tuple[str, str], float] | None = None) -> CheckResult:
    sweep = [{"size_bytes": s, "busbw_gbps": busbw_gbps * s / (1 << 30)} for s in (1 << 20, 1 << 25, 1 << 30)]
    return CheckResult(
        "allreduce",
        "pass",
        "ok",
        (),
        {"sweep": sweep, "pairs": [{"nodes": list(p), "busbw_gbps": v} for p, v in (pairs or {}).items()]},
    )


def run(host_list: list[HostReport], results: list[CheckResult]) -> RunReport:
    return RunReport.build(
        tool_version="0.1.0",
        started_at="2026-11-01T09:00:00Z",
        duration_s=30,
        hosts=host_list,
        results=results,
    )


def test_an_unchanged_cluster_passes() -> None:
    baseline = run(hosts(), [allreduce(46.0)])
    (result,) = compare(baseline, hosts(), [allreduce(45.1)], Config())
    assert result.status == "pass"
    assert "as good as the baseline run of 2026-11-01T09:00:00Z" in result.summary


def test_a_node_gone_fails_and_a_new_one_warns() -> None:
    baseline = run(hosts(4), [])
    now = [h for h in hosts(5) if h.name != "gpu02"]
    findings = {f.details["item"] + f.status: f for f in compare(baseline, now, [], Config())}
    assert findings["nodesfail"].hosts == ("gpu02",)
    assert findings["nodesfail"].summary == "gpu02: in the baseline run, gone from this one"
    assert findings["nodeswarn"].hosts == ("gpu05",)


def test_a_changed_driver_is_named_with_before_and_after() -> None:
    driver = dict(H100["driver"], version="550.90.07")
    (finding,) = compare(run(hosts(), []), hosts(gpu03={"driver": driver}), [], Config())
    assert finding.status == "warn"
    assert finding.hosts == ("gpu03",)
    assert finding.summary == f"NVIDIA driver changed on gpu03: {H100['driver']['version']} -> 550.90.07"
    strict = Config().with_sections(BaselineSection(version_change="fail"))
    assert compare(run(hosts(), []), hosts(gpu03={"driver": driver}), [], strict)[0].status == "fail"


def test_a_gpu_that_fell_off_the_bus_fails() -> None:
    (finding,) = compare(run(hosts(), []), hosts(gpu04={"gpus": H100["gpus"][:-1]}), [], Config())
    assert finding.status == "fail"
    assert finding.hosts == ("gpu04",)
    count = len(H100["gpus"])
    assert finding.summary == f"gpu04 has {count - 1} GPUs, {count} in the baseline run"


def test_a_bandwidth_drop_at_the_largest_size_fails() -> None:
    (finding,) = compare(run(hosts(), [allreduce(46.0)]), hosts(), [allreduce(30.0)], Config())
    assert finding.status == "fail"
    assert finding.summary == "all-reduce busbw at 1 GiB dropped to 0.65x the baseline (30.00 vs 46.00 GB/s)"


def test_a_run_slower_as_a_whole_names_no_link() -> None:
    before = {("gpu01", "gpu02"): 24.0, ("gpu03", "gpu04"): 24.0, ("gpu01", "gpu03"): 24.0}
    after = {pair: value * 0.7 for pair, value in before.items()}  # every pair alike: not a link
    findings = compare(run(hosts(), [allreduce(46, before)]), hosts(), [allreduce(46, after)], Config())
    assert [f.details["item"] for f in findings if f.status == "fail"] == []


def test_a_slower_link_is_named_by_its_pair() -> None:
    before = {("gpu01", "gpu02"): 24.0, ("gpu03", "gpu04"): 24.0}
    after = {("gpu01", "gpu02"): 23.5, ("gpu04", "gpu03"): 6.0}
    (finding,) = compare(run(hosts(), [allreduce(46, before)]), hosts(), [allreduce(46, after)], Config())
    assert finding.hosts == ("gpu03", "gpu04")
    assert finding.summary.startswith("the link gpu03-gpu04 dropped to 0.25x its baseline busbw")


def _named(names: list[str], **changes: dict[str, Any]) -> list[HostReport]:
    """Nodes gpu01.. (their own host names), reached by ``names``."""
    made = []
    for index, name in enumerate(names, start=1):
        facts = copy.deepcopy(H100)
        facts["hostname"] = f"gpu{index:02d}"
        facts.update(changes.get(name, {}))
        made.append(HostReport(name, name, facts["hostname"], True, None, facts))
    return made


def test_nodes_the_baseline_reached_by_address_are_the_same_nodes_by_name_now() -> None:
    addresses = [f"10.0.0.{i}" for i in range(1, 5)]
    names = [f"gpu{i:02d}" for i in range(1, 5)]
    before_pairs = {("10.0.0.1", "10.0.0.2"): 24.0, ("10.0.0.3", "10.0.0.4"): 24.0}
    baseline = run(_named(addresses), [allreduce(46, before_pairs)])
    after_pairs = {("gpu01", "gpu02"): 23.5, ("gpu03", "gpu04"): 6.0}
    driver = dict(H100["driver"], version="550.90.07")
    now = _named(names, gpu03={"driver": driver})
    findings = compare(baseline, now, [allreduce(46, after_pairs)], Config())
    # No node gone, none new: the driver change and the slow link are named under today's names.
    assert {(f.details["item"], f.hosts) for f in findings} == {
        ("version", ("gpu03",)),
        ("pair", ("gpu03", "gpu04")),
    }
    # Unchanged, it passes and says which nodes it matched by what they are.
    (passed,) = compare(baseline, _named(names), [allreduce(46, {p: 24.0 for p in after_pairs})], Config())
    assert passed.status == "pass" and passed.details["renamed"]["10.0.0.3"] == "gpu03"
    assert "4 reached by another name then: 10.0.0.1 as gpu01" in passed.summary


def test_the_sweep_is_read_as_allreduce_declares_it() -> None:
    rows = [
        {"size_bytes": 1 << 20, "busbw_gbps": 0.0},  # one rank moves no traffic: no rate
        {"size_bytes": 1 << 25, "busbw_gbps": None},
        {"size_bytes": 1 << 30, "busbw_gbps": 40},
    ]
    sweep = CheckResult("allreduce", "pass", "ok", (), {"sweep": rows})
    assert sweep_busbw(sweep) == {1 << 30: 40.0}
    assert sweep_busbw(CheckResult("allreduce", "fail", "slow", (), {"item": "slow"})) == {}


def test_a_drop_is_found_whichever_allreduce_finding_carries_the_sweep() -> None:
    baseline = run(hosts(), [allreduce(46.0)])
    slow = CheckResult("allreduce", "fail", "slow pair", ("gpu01",), {"item": "slow"})
    (finding,) = compare(baseline, hosts(), [slow, allreduce(20.0)], Config())
    assert finding.details["item"] == "sweep" and finding.details["size_bytes"] == 1 << 30
