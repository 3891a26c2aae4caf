"""The ``compute`` check, judged on recorded jobs (tests/data/jobs/compute_*.json) and variants that
change one thing; the burn and its re-test on this machine's CPU; the network checks referring to it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from checks.allreduce.phase import PHASE as ALLREDUCE_PHASE
from checks.compute import judge_compute
from checks.compute.present import PRESENTATION, evidence
from checks.compute.root_cause import ITEM, refer_to_compute, slow_at_compute
from checks.job.node.compute import burn, retest_plan
from checks.job.node.nvml import reason_names, summarise_samples
from checks.job.settings import ComputeSection
from preflight.config import Config
from preflight.config_file import parse_config
from preflight.errors import ConfigError
from preflight.model import CheckResult, RunReport
from preflight.view import Note, Table
from tests.test_allreduce import failing, load_job, only, with_document

HEALTHY = load_job("compute_three_nodes")
QUOTA = load_job("compute_cpu_quota")  # node2 held to a tenth of a core; recorded before the re-test
QUOTA_RETEST = load_job("compute_cpu_quota_retest")  # node2 held to a twentieth, slow in the re-test too
SLOW_ONCE = load_job("compute_slow_once")  # node2's worker stopped during the first burn only
CONFIG = Config()

# The nvml.h bits (nvmlClocksEventReason*): HW slowdown 0x8, HW thermal 0x40, HW power brake 0x80,
# SW power cap 0x4, GPU idle 0x1.
HW_SLOWDOWN, HW_THERMAL, HW_POWER_BRAKE, SW_POWER_CAP, GPU_IDLE = 0x8, 0x40, 0x80, 0x4, 0x1

# The keys of allreduce's findings about a node's speed.
SPEED = ALLREDUCE_PHASE.speed_keys


def with_gpus(job: Any, reasons: dict[int, int], flops: dict[int, float] | None = None) -> Any:
    """The job as if each rank had a GPU that NVML described, rank r being GPU r; ``reasons`` are
    the reason bits its samples showed; ``flops`` replace ranks' throughput."""

    def change(document: dict[str, Any]) -> None:
        document["device"] = "cuda"
        for record in document["compute"]["ranks"]:
            rank = record["rank"]
            record["dtype"] = "bf16"
            record["flops_per_s"] = (flops or {}).get(rank, 7.4e14)
            hot = bool(reasons.get(rank))
            sample = {
                "sm_clock_mhz": 990 if hot else 1980,
                "reasons": reasons.get(rank, SW_POWER_CAP),
                "temperature_c": 91 if hot else 66,
                "power_w": 402.5,
            }
            samples = [dict(sample) for _ in range(10)]
            record["gpu"] = {
                "index": rank,
                "serial": f"165492200{rank:04d}",
                "uuid": f"GPU-{rank}",
                "max_sm_clock_mhz": 1980,
                "power_limit_w": 700.0,
                **summarise_samples(samples),
            }

    return with_document(job, change)


def test_a_recorded_healthy_burn_passes_with_the_median_and_the_slowest() -> None:
    result = only(judge_compute(HEALTHY, CONFIG))
    assert result.status == "pass"
    assert re.fullmatch(
        r"3 ranks on node\[1-3\] burned 1 s of matrix multiplications: median [\d.]+ GFLOPS fp32, "
        r"slowest rank \d on node\d at 0\.\d+x",
        result.summary,
    ), result.summary
    assert result.details["burn_s"] == 1.0 and result.details["slow_hosts"] == []
    assert [row["host"] for row in result.details["ranks"]] == ["node1", "node2", "node3"]


def test_a_node_held_to_a_tenth_of_a_core_is_named_with_its_ratio() -> None:
    (result,) = failing(judge_compute(QUOTA, CONFIG))
    assert result.hosts == ("node2",)
    ratio = result.details["ratio"]
    assert 0 < ratio < 0.5
    assert result.summary.startswith(f"node2 is slow at compute: rank 1 at {ratio:.2g}x the median rank (")
    assert "GFLOPS fp32 vs" in result.summary
    assert result.summary.endswith("(a CPU rank: is the node's CPU limited, shared or throttled?)")
    assert result.details["slow_hosts"] == ["node2"]
    assert [r["host"] for r in result.details["ranks"] if r["ratio"] < 0.8] == ["node2"]


def test_the_margin_is_configurable() -> None:
    lenient = Config().with_sections(ComputeSection(cpu_slow_ratio=0.2))
    assert only(judge_compute(QUOTA, lenient)).status == "pass"
    # GPU ranks have their own, tighter margin: CPU processes sharing cores vary more.
    strict = Config().with_sections(ComputeSection(cpu_slow_ratio=0.99))
    assert [r.hosts for r in failing(judge_compute(HEALTHY, strict))] != []


def test_an_absolute_floor_names_every_rank_below_it() -> None:
    floor = Config().with_sections(ComputeSection(min_tflops=1.0))  # no CPU reaches a TFLOPS
    found = failing(judge_compute(HEALTHY, floor))
    assert sorted(r.hosts[0] for r in found) == ["node1", "node2", "node3"]
    assert all("below the floor 1 TFLOPS" in r.summary for r in found)


def test_a_slow_gpu_is_named_by_index_and_serial_with_the_cause_it_reports() -> None:
    job = with_gpus(HEALTHY, {1: HW_SLOWDOWN | HW_THERMAL}, flops={1: 3.1e14})
    (result,) = failing(judge_compute(job, CONFIG))
    assert result.hosts == ("node2",)
    assert result.summary == (
        "node2 is slow at compute: GPU 1 (rank 1, serial 1654922000001) at 0.42x the median rank "
        "(310 TFLOPS bf16 vs 740 TFLOPS): thermal slowdown (hardware); hardware slowdown (temperature "
        "or power beyond the board's limits), up to 91 °C, SM clock 990 of 1980 MHz"
    )
    assert result.details["gpus"] == [1] and result.details["serials"] == ["1654922000001"]
    assert result.details["causes"] == ["hardware slowdown", "thermal slowdown"]


def test_a_power_brake_is_named_as_such() -> None:
    job = with_gpus(HEALTHY, {2: HW_POWER_BRAKE | HW_SLOWDOWN}, flops={2: 2.0e14})
    (result,) = failing(judge_compute(job, CONFIG))
    assert result.hosts == ("node3",) and "power brake" in result.summary


def test_a_power_cap_alone_is_normal_under_load_but_said_for_a_slow_gpu() -> None:
    assert only(judge_compute(with_gpus(HEALTHY, {}), CONFIG)).status == "pass"
    (result,) = failing(judge_compute(with_gpus(HEALTHY, {}, flops={0: 3e14}), CONFIG))
    assert result.hosts == ("node1",) and ": power cap" in result.summary


def test_a_gpu_in_hardware_slowdown_that_kept_its_pace_warns() -> None:
    job = with_gpus(HEALTHY, {2: HW_SLOWDOWN}, flops={2: 7.2e14})
    results = judge_compute(job, CONFIG)
    assert [r.status for r in results] == ["warn"]
    assert results[0].hosts == ("node3",)
    assert "GPU 2 (rank 2, serial 1654922000002) reported hardware slowdown" in results[0].summary


def test_reason_bits_read_as_nvml_names_them() -> None:
    assert reason_names(HW_SLOWDOWN | HW_THERMAL | GPU_IDLE) == ["gpu_idle", "hw_slowdown", "hw_thermal"]
    assert reason_names(0x400) == ["0x400"]
    summary = summarise_samples([{"sm_clock_mhz": 1980, "reasons": 0}, {"sm_clock_mhz": 990, "reasons": 8}])
    assert summary["sm_clock_mhz"] == {"min": 990, "median": 1485.0, "max": 1980}
    assert summary["reason_share"] == {"hw_slowdown": 0.5}


def test_the_burn_runs_on_this_cpu_for_the_time_asked() -> None:
    torch = pytest.importorskip("torch")
    result = burn(torch, torch.device("cpu"), False, 0.2, matrix=64)
    assert result["dtype"] == "fp32" and result["matrix"] == 64
    # It runs for about the time asked and then stops (how soon after depends on how loaded this
    # machine is: only that it ends is asserted, not when).
    assert result["ops"] > 0 and 0.1 < result["busy_s"] < 30
    assert result["flops_per_s"] == pytest.approx(2 * 64**3 * result["ops"] / result["busy_s"])
    assert "gpu" not in result  # no NVML sampling on a CPU


def test_the_evidence_table_lists_the_slowest_rank_first() -> None:
    report = RunReport.__new__(RunReport)
    object.__setattr__(report, "results", tuple(judge_compute(QUOTA, CONFIG)))
    table, note = evidence(report)
    assert isinstance(table, Table) and table.rows[0][0].text == "node2"
    assert isinstance(note, Note) and note.text.startswith("No GPU identity")
    advice = PRESENTATION.advice(failing(judge_compute(QUOTA, CONFIG))[0])
    assert "CPU quota" in advice


def test_network_findings_about_a_node_slow_at_compute_refer_to_it() -> None:
    (cause,) = failing(judge_compute(QUOTA, CONFIG))
    slow_node = CheckResult(
        "allreduce", "fail", "node2 is slow with every partner: 0.46x the typical pair", ("node2",),
        {"node": "node2", "ratio": 0.46, "sweep": [1, 2]},
    )  # fmt: skip
    other_link = CheckResult(
        "allreduce",
        "fail",
        "the link node1-node3 runs at 0.3x",
        ("node1", "node3"),
        {"link": ["node1", "node3"]},
    )
    version = CheckResult("allreduce", "fail", "NCCL fell back to sockets on node2", ("node2",), {})
    referred = refer_to_compute([slow_node, other_link, version], [cause], SPEED)
    assert referred[1:] == [other_link, version]  # not about node2's speed: unchanged
    assert referred[0].status == "warn" and referred[0].hosts == ("node2",)
    assert referred[0].details["item"] == ITEM and referred[0].details["sweep"] == [1, 2]
    assert referred[0].summary.startswith(
        "node2 is slow with every partner: 0.46x the typical pair; caused by "
    )
    assert (
        "node2 being slow at compute at" in referred[0].summary
        and "not by the network" in referred[0].summary
    )
    assert refer_to_compute([slow_node], [], SPEED) == [slow_node]


def test_the_compute_section_parses_and_refuses_bad_values() -> None:
    config = parse_config({"compute": {"burn_s": 3, "slow_ratio": 0.9, "min_tflops": 400}})
    assert config.section(ComputeSection) == ComputeSection(burn_s=3.0, slow_ratio=0.9, min_tflops=400.0)
    with pytest.raises(ConfigError, match=r"compute\.burn_s must not be negative"):
        parse_config({"compute": {"burn_s": -1}})


def test_the_recorded_slow_node_is_not_sent_to_its_nic() -> None:
    from checks.allreduce import PRESENTATION as ALLREDUCE
    from checks.allreduce import judge_allreduce

    compute = judge_compute(QUOTA, CONFIG)
    alone = judge_allreduce(QUOTA, CONFIG, {})
    assert any(r.status == "fail" and r.hosts == ("node2",) for r in alone)  # what the network saw
    referred = refer_to_compute(alone, compute, SPEED)
    named = [r for r in referred if "node2" in r.hosts]
    assert named and all(r.status == "warn" and r.details["item"] == ITEM for r in named)
    assert all("NIC" not in r.summary and "NIC" not in ALLREDUCE.advice(r) for r in named)
    assert "(see the compute finding), not by the network" in named[0].summary
    assert "network was not the cause" in ALLREDUCE.advice(named[0])


H100_BURN = json.loads(
    (Path(__file__).parent / "data" / "gpu" / "nvml_h100_580.159.04_burn.json").read_text()
)


def test_a_real_h100_burn_reads_as_a_power_cap_which_is_normal_under_load() -> None:
    summary = summarise_samples(H100_BURN["samples"])
    assert summary["reason_share"] == {"sw_power_cap": pytest.approx(20 / 21)}
    assert summary["sm_clock_mhz"]["max"] == 1980 and summary["power_w_max"] == 715.188
    assert reason_names(H100_BURN["nvmlDeviceGetCurrentClocksEventReasons"]) == ["gpu_idle"]

    def as_h100(document: dict[str, Any]) -> None:
        document["device"] = "cuda"
        for record in document["compute"]["ranks"]:
            record.update(dtype="bf16", flops_per_s=H100_BURN["burn"]["tflops"] * 1e12)
            record["gpu"] = {
                "index": H100_BURN["nvmlDeviceGetIndex"],
                "serial": H100_BURN["nvmlDeviceGetSerial"],
                "max_sm_clock_mhz": H100_BURN["max_sm"],
                **summary,
            }

    result = only(judge_compute(with_document(HEALTHY, as_h100), CONFIG))
    assert result.status == "pass" and "median 678 TFLOPS bf16" in result.summary
    assert result.details["ranks"][0]["gpu_serial"] == "1752924016965"


def test_a_node_slow_in_the_burn_and_in_its_retest_fails_with_both_measurements() -> None:
    (result,) = failing(judge_compute(QUOTA_RETEST, CONFIG))
    assert result.hosts == ("node2",) and result.details["item"] == "slow_compute"
    ratio, again = result.details["ratio"], result.details["retest_ratio"]
    assert 0 < ratio < 0.5 and 0 < again < 0.5
    assert result.summary.startswith(f"node2 is slow at compute: rank 1 at {ratio:.2g}x the median rank ("), (
        result.summary
    )
    assert f", {again:.2g}x the typical ranks on re-test" in result.summary
    assert result.details["retest"]["suspects"] == [1]
    assert result.details["retest"]["controls"] == [0, 2]
    rows = {row["rank"]: row for row in result.details["ranks"]}
    assert rows[1]["retest_ratio"] == again and rows[1]["retest_flops_per_s"] is not None
    assert slow_at_compute([result]) == {"node2": result}  # the network checks still refer to it


def test_a_slow_rank_of_a_job_without_a_retest_fails_as_before() -> None:
    # QUOTA was recorded before the job re-tested slow ranks: the first burn alone decides.
    (result,) = failing(judge_compute(QUOTA, CONFIG))
    assert result.details["retest_ratio"] is None and result.details["retest"] is None
    assert "re-test" not in result.summary


def test_a_rank_slow_once_and_normal_on_retest_is_a_note_not_a_failure() -> None:
    results = judge_compute(SLOW_ONCE, CONFIG)
    assert [r.status for r in results] == ["pass", "pass"], [r.summary for r in results]
    passed, note = results
    assert not passed.is_note and note.is_note
    assert passed.details["slow_hosts"] == [] and passed.details["retest"]["suspects"] == [1]
    assert note.hosts == ("node2",) and note.details["item"] == "slow_once"
    ratio, again = note.details["ratio"], note.details["retest_ratio"]
    assert ratio < 0.5 <= again
    assert note.summary.startswith(
        f"node2 was slow once at compute and normal on re-test: rank 1 at {ratio:.2g}x the median rank, "
        f"then {again:.2g}x the typical ranks on re-test"
    ), note.summary
    assert passed.summary.endswith(f"slowest rank 1 on node2 at {ratio:.2g}x (then {again:.2g}x on re-test)")
    assert slow_at_compute(results) == {}  # nothing for the network checks to refer to
    assert PRESENTATION.advice(note) == ""  # a note asks nothing of the reader
    report = RunReport.__new__(RunReport)
    object.__setattr__(report, "results", tuple(results))
    table = evidence(report)[0]
    assert isinstance(table, Table) and list(table.head).index("re-test") == 6
    assert table.rows[0][6].text == f"{again:.2f}\u00d7"  # the slowest first, re-tested


def test_the_margin_applies_to_the_retest_too() -> None:
    # Strict enough that the once-slow rank's re-test is under it as well: it fails.
    ratio = only([r for r in judge_compute(SLOW_ONCE, CONFIG) if r.is_note]).details["retest_ratio"]
    strict = Config().with_sections(ComputeSection(cpu_slow_ratio=min(0.99, ratio + 0.05)))
    (result,) = failing(judge_compute(SLOW_ONCE, strict))
    assert result.hosts == ("node2",) and "on re-test" in result.summary


def as_gpus_slow_once(reasons: int) -> Any:
    """The once-slow recording as if on GPUs: every throughput scaled to an H100's, rank 1's GPU
    reporting ``reasons`` during the first burn."""
    scale = 7.4e14 / sorted(r["flops_per_s"] for r in SLOW_ONCE.document["compute"]["ranks"])[1]
    job = with_gpus(
        SLOW_ONCE,
        {1: reasons},
        flops={r["rank"]: r["flops_per_s"] * scale for r in SLOW_ONCE.document["compute"]["ranks"]},
    )

    def rescale(document: dict[str, Any]) -> None:
        for record in document["compute"]["retest"]["ranks"]:
            record["flops_per_s"] *= scale

    return with_document(job, rescale)


def test_a_gpu_slow_once_that_reported_a_cause_of_its_own_warns() -> None:
    results = judge_compute(as_gpus_slow_once(HW_SLOWDOWN | HW_THERMAL), CONFIG)
    assert [r.status for r in results] == ["warn"], [r.summary for r in results]
    assert results[0].hosts == ("node2",) and results[0].details["item"] == "throttled"
    assert "reported thermal slowdown (hardware)" in results[0].summary
    assert "the typical ranks on re-test" in results[0].summary
    # The same once-slow GPU with no reason of its own is a note.
    results = judge_compute(as_gpus_slow_once(SW_POWER_CAP), CONFIG)
    assert [(r.status, r.is_note) for r in results] == [("pass", False), ("pass", True)]


def test_the_retest_plan_takes_the_slow_ranks_and_typical_ones_from_other_nodes() -> None:
    assert retest_plan(HEALTHY.document["compute"]["ranks"], 0.5, 0.0) is None
    assert retest_plan(SLOW_ONCE.document["compute"]["ranks"], 0.5, 0.0) == ([1], [0, 2])
    # Two ranks per node, one slow: its node-mate is the last choice of a control.
    ranks = [
        {"rank": r, "node_rank": r // 2, "flops_per_s": f}
        for r, f in enumerate([10.0, 11.0, 3.0, 10.5, 9.0, 12.0, 10.2, 10.4])
    ]
    assert retest_plan(ranks, 0.5, 0.0) == ([2], [0, 6, 7])
    # A floor above every rank: every rank is a suspect, none a control.
    assert retest_plan(ranks, 0.5, 100.0) == (list(range(8)), [])


def test_the_retest_runs_for_real_when_a_rank_is_slow() -> None:
    pytest.importorskip("torch")
    from tests.test_distributed_job import document_of, job_args, run_job

    args = job_args(3, phases=("compute",))
    # Above 1.0 of the median, the ranks at or below the median are slow: the re-test must run.
    args["compute"].update(burn_s=0.3, cpu_slow_ratio=1.001)
    compute = document_of(run_job(3, 1, args))["compute"]
    retest = compute["retest"]
    assert retest["burn_s"] == pytest.approx(0.15) and retest["suspects"]
    burned = sorted(r["rank"] for r in retest["ranks"])
    assert burned == sorted(retest["suspects"] + retest["controls"])
    assert all(r["flops_per_s"] > 0 and r["dtype"] == "fp32" for r in retest["ranks"])
    # CPU ranks burn in turn, each alone for its share of the re-test (at least 0.1 s).
    assert retest["in_turn"] is True
    assert all(r["busy_s"] >= 0.1 for r in retest["ranks"])
