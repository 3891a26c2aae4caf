"""The ``versions`` check, judged on clusters built from recorded node facts (tests/data/runs)."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from checks import versions
from checks.versions import judge_versions
from checks.versions.expectations import matches
from checks.versions.settings import VersionsSection
from preflight.check import CheckContext, HostSession
from preflight.config import Config
from preflight.deadline import Deadline
from preflight.facts import NodeFacts
from preflight.inventory import HostSpec
from preflight.model import CheckResult, HostReport

RUNS = Path(__file__).parent / "data" / "runs"
DELETE = object()  # in `changes`: remove this key from the node's facts


def load(name: str) -> Any:
    return json.loads((RUNS / name).read_text(encoding="utf-8"))


H100 = load("h100_node.json")
CPU = load("cpu_node.json")


def merge(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target``: dicts merge, ``DELETE`` removes, anything else replaces."""
    if isinstance(patch, Mapping) and isinstance(target, dict | list):
        for key, value in patch.items():
            if value is DELETE:
                del target[key]
            else:
                target[key] = (
                    merge(target[key], value) if key in target or isinstance(target, list) else value
                )
        return target
    return copy.deepcopy(patch)


def cluster(
    base: Mapping[str, Any], n: int = 4, changes: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """``n`` copies of one node's facts named gpu01.., with ``changes`` applied per node name."""
    width = max(2, len(str(n)))
    nodes: dict[str, dict[str, Any]] = {}
    for i in range(1, n + 1):
        name = f"gpu{i:0{width}d}"
        facts = copy.deepcopy(dict(base))
        facts["hostname"] = name
        nodes[name] = merge(facts, (changes or {}).get(name, {}))
    return nodes


def typed(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, NodeFacts]:
    """Hosts' facts as the judges read them (``CheckContext.nodes()``)."""
    return {host: NodeFacts(node) for host, node in facts.items()}


def only(results: list[CheckResult]) -> CheckResult:
    assert len(results) == 1, [r.summary for r in results]
    return results[0]


def config(**versions_settings: Any) -> Config:
    return Config().with_sections(VersionsSection(**versions_settings))


# --------------------------------------------------------------------------- agreement


def test_nodes_that_agree_give_one_pass_counting_versions_and_packages() -> None:
    result = only(judge_versions(typed(cluster(H100, 3)), Config()))
    assert result.status == "pass"
    assert result.summary == "9 versions and 18 packages agree on 3 nodes"
    assert result.hosts == ()
    assert result.details["versions"]["driver"] == "550.54.15"
    assert result.details["versions"]["torch"] == "2.5.1+cu124"


def test_a_cpu_cluster_passes_because_facts_missing_on_every_node_are_not_drift() -> None:
    # The recorded CPU node has no driver, no system NCCL and a CPU build of torch.
    result = only(judge_versions(typed(cluster(CPU, 3)), Config()))
    assert result.status == "pass"
    assert "driver" not in result.details["versions"]
    assert result.summary.endswith("agree on 3 nodes")


def test_no_reachable_hosts_is_a_skip() -> None:
    assert only(judge_versions(typed({}), Config())).status == "skip"


# --------------------------------------------------------------------------- drift in facts


def test_driver_drift_names_the_minority_node_with_values_on_each_side() -> None:
    nodes = cluster(H100, 32, {"gpu31": {"driver": {"version": "535.154.05"}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert result.status == "fail"
    assert result.hosts == ("gpu31",)
    assert result.summary == "NVIDIA driver differs: gpu31: 535.154.05 (majority gpu[01-30,32]: 550.54.15)"
    assert result.details["item"] == "driver"
    assert result.details["majority"] == "550.54.15"
    assert result.details["values"]["535.154.05"] == ["gpu31"]
    assert len(result.details["values"]["550.54.15"]) == 31


def test_a_tie_on_two_nodes_names_both_with_their_values() -> None:
    nodes = cluster(H100, 2, {"gpu02": {"driver": {"version": "535.154.05"}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert result.status == "fail"
    assert set(result.hosts) == {"gpu01", "gpu02"}
    assert "no majority" in result.summary
    assert "gpu01: 550.54.15" in result.summary and "gpu02: 535.154.05" in result.summary
    assert result.details["majority"] is None


def test_each_drifting_fact_is_its_own_finding() -> None:
    nodes = cluster(H100, 4, {"gpu03": {"driver": {"version": "535.154.05", "cuda": "12.2"}}})
    results = judge_versions(typed(nodes), Config())
    assert [r.details["item"] for r in results] == ["driver", "cuda"]
    assert all(r.hosts == ("gpu03",) and r.status == "fail" for r in results)


@pytest.mark.parametrize(
    ("change", "item"),
    [
        ({"torch": {"version": "2.4.0+cu121"}}, "torch"),
        ({"torch": {"cuda": "12.1"}}, "torch_cuda"),
        ({"torch": {"cudnn": "9.0.0"}}, "cudnn"),
        ({"torch": {"nccl": "2.20.5"}}, "nccl"),
    ],
)
def test_torch_cuda_cudnn_and_nccl_drift_fails(change: dict[str, Any], item: str) -> None:
    result = only(judge_versions(typed(cluster(H100, 4, {"gpu02": change})), Config()))
    assert (result.status, result.details["item"], result.hosts) == ("fail", item, ("gpu02",))


def test_kernel_drift_only_warns() -> None:
    nodes = cluster(H100, 4, {"gpu04": {"os": {"kernel": "5.15.0-131-generic"}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("warn", ("gpu04",))
    assert (
        result.summary
        == "kernel differs: gpu04: 5.15.0-131-generic (majority gpu[01-03]: 5.15.0-126-generic)"
    )


@pytest.mark.parametrize(
    ("other_python", "status"),
    [("3.10.14", "warn"), ("3.11.7", "fail")],
    ids=["patch-only-warns", "minor-fails"],
)
def test_python_drift_fails_on_major_minor_and_warns_on_patch(other_python: str, status: str) -> None:
    nodes = cluster(H100, 4, {"gpu02": {"python": {"version": other_python}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert (result.status, result.details["item"], result.hosts) == (status, "python", ("gpu02",))
    assert f"gpu02: {other_python}" in result.summary


def test_a_fact_missing_on_one_node_is_drift_shown_as_not_found_with_the_reason() -> None:
    # The recorded CPU node has nvcc; the copy on gpu03 lost it from PATH.
    nodes = cluster(CPU, 4, {"gpu03": {"nvcc": DELETE, "unavailable": {"nvcc": "nvcc not found on PATH"}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert (result.status, result.details["item"], result.hosts) == ("fail", "nvcc", ("gpu03",))
    assert "gpu03: (not found)" in result.summary
    assert result.details["missing"] == {"gpu03": "nvcc not found on PATH"}


def test_a_torch_cuda_build_among_cpu_builds_is_drift() -> None:
    nodes = cluster(CPU, 3, {"gpu01": {"torch": {"cuda": "12.4"}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert result.details["item"] == "torch_cuda"
    assert result.hosts == ("gpu01",)
    assert result.details["majority"] == "(not found)"


# --------------------------------------------------------------------------- packages


@pytest.mark.parametrize(
    ("package", "version", "status"),
    [
        ("numpy", "2.1.0", "warn"),
        ("transformers", "4.47.0", "warn"),
        ("triton", "3.0.0", "fail"),
        ("nvidia-nccl-cu12", "2.20.5", "fail"),
        ("nvidia-cudnn-cu12", "9.0.0.312", "fail"),
    ],
)
def test_package_drift_warns_outside_the_training_stack_and_fails_inside(
    package: str, version: str, status: str
) -> None:
    nodes = cluster(H100, 4, {"gpu02": {"packages": {package: version}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert (result.status, result.hosts) == (status, ("gpu02",))
    assert result.details["item"] == "packages"
    assert f"gpu02: {version}" in result.summary
    assert set(result.details["packages"]) == {package}


def test_configured_stack_packages_fail_like_the_built_in_stack() -> None:
    nodes = cluster(H100, 4, {"gpu02": {"packages": {"transformers": "4.47.0"}}})
    result = only(judge_versions(typed(nodes), config(stack_packages=("transformers",))))
    assert result.status == "fail"


@pytest.mark.parametrize(
    ("policy", "expected"), [("fail", ["fail"]), ("warn", ["warn"]), ("ignore", ["pass"])]
)
def test_package_drift_policy_decides_what_other_packages_do(policy: str, expected: list[str]) -> None:
    nodes = cluster(H100, 4, {"gpu02": {"packages": {"numpy": "2.1.0"}}})
    assert [r.status for r in judge_versions(typed(nodes), config(package_drift=policy))] == expected


def test_ignore_policy_never_hides_training_stack_drift() -> None:
    nodes = cluster(H100, 4, {"gpu02": {"packages": {"numpy": "2.1.0", "triton": "3.0.0"}}})
    result = only(judge_versions(typed(nodes), config(package_drift="ignore")))
    assert (result.status, list(result.details["packages"])) == ("fail", ["triton"])


@pytest.mark.parametrize("pattern", ["numpy", "NumPy", "num*"])
def test_ignored_packages_are_never_compared(pattern: str) -> None:
    nodes = cluster(H100, 4, {"gpu02": {"packages": {"numpy": "2.1.0"}}})
    result = only(judge_versions(typed(nodes), config(ignore_packages=(pattern,))))
    assert result.status == "pass"
    assert "17 packages" in result.summary


def test_an_extra_package_on_one_node_is_drift_against_not_installed() -> None:
    nodes = cluster(H100, 4, {"gpu03": {"packages": {"flash-attn": "2.6.3"}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("warn", ("gpu03",))
    assert (
        result.summary == "package flash-attn differs: gpu03: 2.6.3 (majority gpu[01-02,04]: (not installed))"
    )


def test_a_package_missing_on_one_node_shows_not_installed() -> None:
    nodes = cluster(H100, 4, {"gpu03": {"packages": {"nvidia-nccl-cu12": DELETE}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("fail", ("gpu03",))
    assert "gpu03: (not installed)" in result.summary


def test_many_packages_drifting_on_the_same_nodes_read_as_one_finding_per_node_set() -> None:
    # A node with its own environment: four other packages and one stack package differ.
    drift = {"numpy": "2.1.0", "pyzmq": "26.2.0", "transformers": "4.44.2", "torchvision": "0.19.0"}
    nodes = cluster(H100, 8, {"gpu05": {"packages": {**drift, "triton": "3.0.0", "rich": "13.9.4"}}})
    results = judge_versions(typed(nodes), Config())
    assert [r.status for r in results] == ["fail", "warn"]
    stack, other = results
    assert stack.hosts == other.hosts == ("gpu05",)
    assert list(stack.details["packages"]) == ["triton"]
    assert set(other.details["packages"]) == {*drift, "rich"}
    assert other.summary.startswith("gpu05: 5 packages differ from gpu[01-04,06-08]: ")
    assert "numpy 2.1.0 vs 1.26.4" in other.summary
    assert other.summary.endswith(", and 1 more")


def test_torch_is_compared_once_as_torch_reports_it_not_again_as_a_package() -> None:
    nodes = cluster(H100, 4, {"gpu02": {"torch": {"version": "2.4.1+cu124"}, "packages": {"torch": "2.4.1"}}})
    result = only(judge_versions(typed(nodes), Config()))
    assert result.details["item"] == "torch"


def test_package_names_are_compared_as_pip_normalises_them() -> None:
    nodes = cluster(H100, 2, {"gpu02": {"packages": {"numpy": DELETE, "NumPy": "1.26.4"}}})
    assert only(judge_versions(typed(nodes), Config())).status == "pass"


def test_a_node_that_could_not_list_packages_is_named_once_not_per_package() -> None:
    nodes = cluster(
        H100, 4, {"gpu02": {"packages": DELETE, "unavailable": {"packages": "importlib.metadata failed"}}}
    )
    result = only(judge_versions(typed(nodes), Config()))
    assert (result.status, result.hosts) == ("fail", ("gpu02",))
    assert "importlib.metadata failed" in result.summary


# --------------------------------------------------------------------------- [expect]


@pytest.mark.parametrize(
    ("wanted", "actual", "ok"),
    [
        ("2.5.1", "2.5.1", True),
        ("3.11", "3.11.7", True),
        ("3.11", "3.110.1", False),
        ("3.11.7", "3.11", False),
        ("2.5.1", "2.5.1+cu124", True),
        ("2.5.1+cu124", "2.5.1+cu124", True),
        ("2.5.1+cu121", "2.5.1+cu124", False),
        ("2.4", "2.4.0", True),
        ("2.4.0", "2.4", True),
        ("535.104.5", "535.104.05", True),
        (">=535", "550.54.15", True),
        (">=535", "470.103.01", False),
        (">=2.4,<2.6", "2.5.1+cu124", True),
        (">=2.4,<2.6", "2.6.0", False),
        ("==2.21.*", "2.21.5", True),
        (">=2.5", "2.6.0.dev20241001+cu124", True),
    ],
)
def test_expected_versions_match_by_component_prefix_or_pep440_specifier(
    wanted: str, actual: str, ok: bool
) -> None:
    assert matches(wanted, actual).ok is ok


def test_a_value_that_is_not_a_version_does_not_meet_a_specifier_and_says_so() -> None:
    match = matches(">=535", "N/A")
    assert match.ok is False
    assert match.note == "'N/A' is not a version"


def test_expectations_that_hold_are_counted_in_the_pass() -> None:
    expect = {
        "driver": ">=535",
        "torch": "2.5",
        "python": "3.10",
        "nvidia-nccl-cu12": "2.21.5",
        "cuda": "12.4",
    }
    result = only(judge_versions(typed(cluster(H100, 4)), Config(expect=expect)))
    assert result.status == "pass"
    assert result.summary.endswith("; 5 expectations met")


def test_an_unmet_expectation_fails_naming_the_node_the_wanted_and_the_actual_value() -> None:
    nodes = cluster(H100, 4, {"gpu03": {"packages": {"nvidia-nccl-cu12": "2.20.5"}}})
    results = judge_versions(typed(nodes), Config(expect={"nvidia-nccl-cu12": "2.21.5"}))
    expectation = results[0]
    assert (expectation.status, expectation.hosts) == ("fail", ("gpu03",))
    assert expectation.summary == "expected nvidia-nccl-cu12 2.21.5: gpu03: 2.20.5"
    assert expectation.details["wanted"] == "2.21.5"
    assert expectation.details["values"] == {"2.20.5": ["gpu03"]}
    assert results[1].details["item"] == "packages"  # the drift is reported as well


def test_an_expected_fact_a_node_lacks_names_the_node_and_why() -> None:
    result = only(judge_versions(typed(cluster(CPU, 2)), Config(expect={"driver": ">=535"})))
    assert (result.status, result.hosts) == ("fail", ("gpu01", "gpu02"))
    assert result.summary.startswith("expected driver >=535: gpu[01-02]: (not found: no NVIDIA driver")


def test_a_specifier_against_a_value_that_is_not_a_version_fails_and_says_so() -> None:
    nodes = cluster(H100, 2, {"gpu02": {"driver": {"version": "N/A"}}})
    result = judge_versions(typed(nodes), Config(expect={"driver": ">=535"}))[0]
    assert result.hosts == ("gpu02",)
    assert result.summary == "expected driver >=535: gpu02: N/A ('N/A' is not a version)"


def test_an_expected_name_that_is_neither_a_fact_nor_a_package_on_any_node_fails() -> None:
    result = only(judge_versions(typed(cluster(CPU, 2)), Config(expect={"numpy": "1.26"})))
    assert result.status == "fail"
    assert result.summary.startswith("expected numpy 1.26 but no node has it")


def test_an_invalid_specifier_fails_naming_the_expect_key() -> None:
    result = only(judge_versions(typed(cluster(H100, 2)), Config(expect={"driver": ">=five"})))
    assert result.status == "fail"
    assert result.summary.startswith("expect.driver = '>=five' is not a valid version specifier")


# --------------------------------------------------------------------------- one node, many nodes


def test_one_node_still_checks_expectations_and_says_nothing_was_compared() -> None:
    one = cluster(H100, 1)
    met = only(judge_versions(typed(one), Config(expect={"torch": "2.5"})))
    assert met.status == "pass"
    assert "nothing compared" in met.summary
    unmet = only(judge_versions(typed(one), Config(expect={"torch": "2.4"})))
    assert (unmet.status, unmet.hosts) == ("fail", ("gpu01",))
    alone = only(judge_versions(typed(one), Config()))
    assert alone.status == "skip"
    assert alone.summary == "only gpu01 reachable: nothing compared"


def test_a_thousand_nodes_with_one_odd_driver_give_one_finding_quickly() -> None:
    nodes = cluster(H100, 1000, {"gpu0517": {"driver": {"version": "535.154.05"}}})
    started = time.perf_counter()
    result = only(judge_versions(typed(nodes), Config()))
    assert time.perf_counter() - started < 5.0
    assert result.hosts == ("gpu0517",)
    assert "gpu[0001-0516,0518-1000]: 550.54.15" in result.summary


def test_the_check_judges_the_facts_of_reachable_hosts_only() -> None:
    facts = cluster(H100, 3, {"gpu03": {"driver": {"version": "535.154.05"}}})
    sessions = [
        HostSession(HostSpec(name, name), HostReport(name, name, reachable=name != "gpu03", facts=f))
        for name, f in facts.items()
    ]
    ctx = CheckContext(config=Config(), sessions=sessions, deadline=Deadline.after(10))
    assert versions.CHECK.name == "versions"
    assert [r.status for r in versions.CHECK.run(ctx)] == ["pass"]
