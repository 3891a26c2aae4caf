"""The ``gpu_memory`` check, judged on clusters built from recorded node facts (tests/data/runs)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from checks import gpu_memory
from checks.gpu_memory import fold_indices, judge_gpu_memory
from checks.gpu_memory.settings import GpuMemorySection
from preflight.config import Config
from preflight.units import GIB
from tests.test_versions import CPU, DELETE, H100, cluster, load, only, typed

BUSY_GPUS = load("h100_busy_gpus.json")
H100_TOTAL = H100["gpus"][0]["memory_total_bytes"]
MIB = 1024 * 1024

# leptonai/gpud pull request #80 (SOURCES.md): Correctable 0, Uncorrectable 4, Pending Yes.
REMAP_PENDING = {"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False}


def config(**settings: Any) -> Config:
    return Config().with_sections(GpuMemorySection(**settings))


def used(used_bytes: int, processes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A change to one GPU: this much memory in use, and who uses it."""
    change: dict[str, Any] = {
        "memory_used_bytes": used_bytes,
        "memory_free_bytes": H100_TOTAL - used_bytes,
    }
    if processes is not None:
        change["processes"] = processes
    return change


# --------------------------------------------------------------------------- healthy, CPU-only


def test_a_healthy_cluster_is_one_pass_with_memory_per_node_and_gpu_for_charts() -> None:
    result = only(judge_gpu_memory(typed(cluster(H100, 3)), Config()))
    assert result.status == "pass"
    assert (
        result.summary == "12 GPUs on 3 nodes (4 per node, NVIDIA H100 80GB HBM3 79.6 GiB): free and healthy"
    )
    row = result.details["gpus"]["gpu02"][3]
    assert row == {
        "index": 3,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": None,
        "total_bytes": 85520809984,
        "used_bytes": 532 * MIB,
        "free_bytes": 85520809984 - 532 * MIB,
    }


def test_no_gpus_on_any_node_is_a_skip_for_a_cpu_only_cluster() -> None:
    result = only(judge_gpu_memory(typed(cluster(CPU, 4)), Config()))
    assert (result.status, result.summary) == ("skip", "no GPUs on any node: CPU-only cluster")


def test_gpus_per_node_on_a_cpu_only_cluster_fails_naming_every_node_and_why() -> None:
    result = only(judge_gpu_memory(typed(cluster(CPU, 4)), config(gpus_per_node=8)))
    assert (result.status, result.hosts) == ("fail", ("gpu01", "gpu02", "gpu03", "gpu04"))
    assert result.summary.startswith(
        "gpu[01-04]: no GPUs, expected 8 per node (gpus_per_node): no NVIDIA driver"
    )


def test_no_reachable_hosts_is_a_skip() -> None:
    assert only(judge_gpu_memory(typed({}), Config())).status == "skip"


# --------------------------------------------------------------------------- GPU count


def test_a_node_without_gpus_among_gpu_nodes_fails_with_the_reason_it_gave() -> None:
    reason = "no NVIDIA driver: /proc/driver/nvidia/version missing"
    nodes = cluster(H100, 4, {"gpu02": {"gpus": DELETE, "unavailable": {"gpus": reason}}})
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("fail", ("gpu02",))
    assert result.summary == f"gpu02: no GPUs, expected 4 like the other nodes: {reason}"


def test_a_node_with_fewer_gpus_than_the_others_fails() -> None:
    nodes = cluster(H100, 4, {"gpu03": {"gpus": H100["gpus"][:3]}})
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("fail", ("gpu03",))
    assert result.summary == "gpu03 has 3 GPUs, expected 4 like the other nodes"
    assert result.details["counts"] == {"gpu03": 3}


def test_nodes_with_fewer_gpus_than_gpus_per_node_fail_even_when_they_agree() -> None:
    result = only(judge_gpu_memory(typed(cluster(H100, 4)), config(gpus_per_node=8)))
    assert (result.status, len(result.hosts)) == ("fail", 4)
    assert result.summary == "gpu[01-04] have 4 GPUs, expected 8 per node (gpus_per_node)"


def test_a_node_with_more_gpus_than_the_others_is_not_a_finding() -> None:
    nodes = cluster(H100, 4, {"gpu03": {"gpus": BUSY_GPUS[:1] * 8}})
    assert only(judge_gpu_memory(typed(nodes), Config())).status == "pass"


# --------------------------------------------------------------------------- total memory


def test_a_gpu_with_less_total_memory_than_its_siblings_fails() -> None:
    smaller = H100_TOTAL - 2 * GIB
    nodes = cluster(H100, 4, {"gpu04": {"gpus": {1: {"memory_total_bytes": smaller}}}})
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("fail", ("gpu04",))
    assert result.summary == (
        "gpu04 GPU 1: 77.6 GiB total, the other NVIDIA H100 80GB HBM3 GPUs have 79.6 GiB (tolerance 1%)"
    )
    assert result.details["gpus"]["gpu04"][0]["index"] == 1


def test_a_total_within_the_tolerance_is_not_a_finding() -> None:
    # Drivers reserve slightly different amounts: half a percent is not a different GPU.
    nodes = cluster(H100, 4, {"gpu04": {"gpus": {1: {"memory_total_bytes": int(H100_TOTAL * 0.995)}}}})
    assert only(judge_gpu_memory(typed(nodes), Config())).status == "pass"


# --------------------------------------------------------------------------- free memory


def test_a_busy_gpu_is_named_with_the_memory_in_use_and_the_process_holding_it() -> None:
    process = {"pid": 4242, "name": "python", "used_memory_bytes": 60 * GIB}
    nodes = cluster(H100, 4, {"gpu03": {"gpus": {2: used(int(61.2 * GIB), [process])}}})
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("fail", ("gpu03",))
    assert result.summary == "gpu03 GPU 2: 61.2 GiB of 79.6 GiB in use by pid 4242 (python)"
    assert result.details["processes"] == {"2": [process]}


def test_a_busy_node_recorded_in_the_wild_names_its_busy_gpus_and_no_process() -> None:
    # The recorded busy node: GPU 0 idle, GPUs 1-7 at 58333 MiB, no process table.
    nodes = cluster(H100, 4, {"gpu03": {"gpus": BUSY_GPUS}})
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert result.hosts == ("gpu03",)
    assert result.summary == (
        "gpu03 GPUs 1-7: 57.0 GiB of 79.6 GiB in use on each, no process listed (another container or user?)"
    )
    assert sorted(row["index"] for row in result.details["gpus"]["gpu03"]) == list(range(1, 8))


def test_memory_used_by_our_own_processes_below_the_threshold_is_fine() -> None:
    # The recorded node has a 522 MiB jacobi process on each GPU: under 1 % of 80 GB.
    assert only(judge_gpu_memory(typed(cluster(H100, 2)), Config())).status == "pass"
    busy = cluster(H100, 2, {"gpu01": {"gpus": {0: used(20 * GIB)}}})
    assert only(judge_gpu_memory(typed(busy), config(min_free_fraction=0.5))).status == "pass"
    assert only(judge_gpu_memory(typed(busy), Config())).status == "fail"


# --------------------------------------------------------------------------- memory health


def test_uncorrected_ecc_errors_since_the_driver_loaded_fail_naming_node_and_gpu() -> None:
    change = {"ecc_uncorrected_volatile": 2, "ecc_uncorrected_aggregate": 2}
    nodes = cluster(H100, 4, {"gpu02": {"gpus": {3: change}}})
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert (result.status, result.hosts, result.details["item"]) == ("fail", ("gpu02",), "ecc_errors")
    assert result.summary.startswith("gpu02 GPU 3: uncorrected ECC errors (")
    assert result.summary.endswith("lifetime): drain the node, reset the GPU")


def test_lifetime_errors_that_row_remapping_handled_are_history_not_a_failure() -> None:
    """An A100/H100 whose past uncorrected error was remapped: aggregate > 0 for ever, no reset
    clears it, nothing since boot, nothing pending. Healthy: said, not failed."""
    handled = {
        "ecc_uncorrected_volatile": 0,
        "ecc_uncorrected_aggregate": 3,
        "remapped_rows": {"correctable": 0, "uncorrectable": 1, "pending": False, "failure": False},
    }
    nodes = cluster(H100, 4, {"gpu03": {"gpus": {2: handled}}})
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("pass", ())
    assert "past memory faults handled by remapping or retirement on gpu03 GPU 2" in result.summary
    assert result.details["ecc_history"] == {"gpu03": {"2": {"lifetime_uncorrected": 3, "rows_remapped": 1}}}


def test_a_pending_row_remap_fails_asking_for_a_reset() -> None:
    nodes = cluster(H100, 4, {"gpu01": {"gpus": {0: {"remapped_rows": REMAP_PENDING}}}})
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("fail", ("gpu01",))
    assert result.summary == (
        "gpu01 GPU 0: row remapping pending (4 rows remapped for uncorrectable errors): "
        "reset the GPU or reboot the node before the run"
    )


def test_a_row_remap_failure_asks_for_the_gpu_to_be_replaced() -> None:
    failed = {**REMAP_PENDING, "pending": False, "failure": True}
    nodes = cluster(H100, 4, {"gpu01": {"gpus": {0: {"remapped_rows": failed}}}})
    assert only(judge_gpu_memory(typed(nodes), Config())).summary.endswith("replace the GPU")


def test_pending_retired_pages_fail() -> None:
    nodes = cluster(H100, 4, {"gpu01": {"gpus": {2: {"retired_pages_pending": True}}}})
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert (result.status, result.details["item"]) == ("fail", "retired_pages")


def test_ecc_disabled_where_others_have_it_enabled_warns() -> None:
    off = {i: {"ecc_mode": "disabled"} for i in range(4)}
    result = only(judge_gpu_memory(typed(cluster(H100, 4, {"gpu04": {"gpus": off}})), Config()))
    assert (result.status, result.hosts) == ("warn", ("gpu04",))
    assert result.summary == "ECC disabled on gpu04 GPUs 0-3, enabled on gpu[01-03]"


def test_fields_nvml_does_not_support_are_not_findings() -> None:
    unsupported = {
        "ecc_mode": None,
        "ecc_uncorrected_volatile": None,
        "ecc_uncorrected_aggregate": None,
        "remapped_rows": None,
    }
    nodes = cluster(H100, 2, {"gpu02": {"gpus": {i: unsupported for i in range(4)}}})
    assert only(judge_gpu_memory(typed(nodes), Config())).status == "pass"


# --------------------------------------------------------------------------- one node, many nodes


def test_one_node_is_still_checked_for_health_and_says_nothing_was_compared() -> None:
    alone = only(judge_gpu_memory(typed(cluster(H100, 1)), Config()))
    assert alone.status == "pass"
    assert alone.summary.endswith("nothing compared (only one node reachable)")
    sick = cluster(H100, 1, {"gpu01": {"gpus": {0: {"remapped_rows": REMAP_PENDING}}}})
    assert only(judge_gpu_memory(typed(sick), Config())).status == "fail"


def test_a_thousand_nodes_with_one_bad_gpu_give_one_finding_naming_one_node_quickly() -> None:
    nodes = cluster(H100, 1000, {"gpu0777": {"gpus": {3: {"ecc_uncorrected_volatile": 1}}}})
    started = time.perf_counter()
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert time.perf_counter() - started < 2.0
    assert result.hosts == ("gpu0777",)
    assert result.summary.startswith("gpu0777 GPU 3: ")


@pytest.mark.parametrize(
    ("indices", "folded"), [([0], "0"), ([0, 1, 2, 5], "0-2,5"), ([7, 1, 2, 3], "1-3,7"), ([], "")]
)
def test_gpu_indices_fold_into_ranges(indices: list[int], folded: str) -> None:
    assert fold_indices(indices) == folded


def test_the_check_is_named_gpu_memory() -> None:
    assert gpu_memory.CHECK.name == "gpu_memory"


def test_mig_enabled_on_one_node_while_off_elsewhere_warns_naming_it() -> None:
    nodes = cluster(H100, 3, {"gpu02": {"gpus": {i: {"mig_mode": "enabled"} for i in range(4)}}})
    for name in ("gpu01", "gpu03"):
        for gpu in nodes[name]["gpus"]:
            gpu["mig_mode"] = "disabled"
    for gpu in nodes["gpu02"]["gpus"][4:]:
        gpu["mig_mode"] = "disabled"
    result = only(judge_gpu_memory(typed(nodes), Config()))
    assert (result.status, result.hosts, result.details["item"]) == ("warn", ("gpu02",), "mig_mode")
    assert result.summary.startswith("MIG enabled on gpu02 GPUs 0-3")
