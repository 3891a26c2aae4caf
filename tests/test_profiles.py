"""--quick and --deep: what each profile changes, the duration a run is expected to take (printed
before it starts), and a quick run of this machine end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from checks.job.settings import AllreduceSection, ComputeSection, DdpSection
from checks.storage.settings import StorageSection
from preflight.config import Config
from preflight.profiles import apply_profile, checks_of, expected_duration_s
from tests.test_cli import PYTHON, preflight

QUICK_CHECKS = checks_of("quick")
EVERY_CHECK = ("connect", "versions", "ports", "gpu_memory", "allreduce", "ddp")


def test_quick_is_a_short_sweep_without_pair_tests() -> None:
    quick = apply_profile(Config(), "quick").section(AllreduceSection)
    assert quick.sweep_budget_s < AllreduceSection().sweep_budget_s
    assert quick.pairwise == "never"
    assert "ddp" not in QUICK_CHECKS


def test_quick_times_fewer_ops_per_size_unless_the_config_asks_for_fewer_still() -> None:
    standard = AllreduceSection()
    quick = apply_profile(Config(), "quick").section(AllreduceSection)
    assert 1 <= quick.iters < standard.iters
    assert 1 <= quick.warmup_iters < standard.warmup_iters
    few = Config().with_sections(dataclasses.replace(standard, iters=3, warmup_iters=0))
    assert apply_profile(few, "quick").section(AllreduceSection).iters == 3
    assert apply_profile(few, "quick").section(AllreduceSection).warmup_iters == 0


def test_deep_tests_every_pair_longer_and_trains_longer() -> None:
    deep = apply_profile(Config(), "deep")
    allreduce = deep.section(AllreduceSection)
    assert allreduce.pair_plan == "full"
    assert allreduce.sweep_budget_s > AllreduceSection().sweep_budget_s
    assert deep.section(DdpSection).steps > DdpSection().steps
    assert deep.section(ComputeSection).burn_s > ComputeSection().burn_s
    assert allreduce.sweep_factor == 2 < AllreduceSection().sweep_factor


def test_the_expected_duration_orders_the_profiles_and_grows_with_the_cluster() -> None:
    def expected(profile: str, hosts: int) -> float:
        checks = QUICK_CHECKS if profile == "quick" else EVERY_CHECK
        return expected_duration_s(apply_profile(Config(), profile), hosts, checks)  # type: ignore[arg-type]

    assert expected("quick", 3) < expected("standard", 3) < expected("deep", 3)
    # Every pair up to 16 nodes: the deep profile's rounds grow with the cluster.
    assert expected("deep", 16) > expected("deep", 4)


def test_a_quick_check_of_this_machine_says_what_to_expect_and_runs_no_ddp(tmp_path: Path) -> None:
    run = preflight("check", "--quick", "--python", PYTHON, "--json", "run.json", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "quick profile, 1 host: expected to take about" in run.stderr
    data = json.loads((tmp_path / "run.json").read_text())
    assert [r["check"] for r in data["results"] if r["check"] == "ddp"] == []
    assert {r["check"] for r in data["results"]} >= {"connect", "allreduce"}


def test_quick_and_deep_cannot_be_asked_together(tmp_path: Path) -> None:
    run = preflight("check", "--quick", "--deep", cwd=tmp_path)
    assert run.returncode == 2
    assert "not allowed with argument" in run.stderr


def test_storage_adds_to_the_expected_duration_only_when_it_has_paths_to_look_at() -> None:
    checks = ("connect", "versions", "storage")
    without = expected_duration_s(Config(), 3, checks)
    assert without == expected_duration_s(Config(), 3, ("connect", "versions"))
    with_data = Config().with_sections(StorageSection(data=("/data/shards",)))
    assert expected_duration_s(with_data, 3, checks) > without
