"""The ``rails`` check, judged on recorded lab runs (tests/data/rails, SOURCES.md there) and on
variants that change one thing: the card at fault is named on its node, by its rail, and nothing
is named on healthy runs; the pure planning the job and the judge share."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checks import rails
from checks.allreduce.phase import PHASE as ALLREDUCE_PHASE
from checks.compute.root_cause import refer_to_compute
from checks.job.node.planning import pack_rounds
from checks.job.node.rail_speeds import best_busbw, healthy_rail, rail_tests
from checks.job.outcome import JobOutcome
from checks.job.pair_plan import ring_pairs
from checks.rails import judge_rails
from preflight.config import Config
from preflight.model import CheckResult
from tests.test_allreduce import load_job

RAILS = Path(__file__).parent / "data" / "rails"


def job(name: str) -> JobOutcome:
    return load_job(name, RAILS)


def judged(outcome: JobOutcome) -> list[CheckResult]:
    return judge_rails(outcome, Config())


def failures(outcome: JobOutcome) -> list[CheckResult]:
    return [r for r in judged(outcome) if r.status in ("fail", "warn")]


def changed(outcome: JobOutcome, change: Callable[[dict[str, Any]], None]) -> JobOutcome:
    """A copy of the job whose document ``change`` edited."""
    document = copy.deepcopy(dict(outcome.document or {}))
    change(document)
    return dataclasses.replace(outcome, document=document)


def made_slow(outcome: JobOutcome, keep: Callable[[dict[str, Any]], bool], factor: float) -> JobOutcome:
    """The job with the rail tests ``keep`` picks ``factor`` times as fast, each re-tested as slow
    again by ranks blocked on their sockets (waiting for a CPU 0.01 s a second, as the throttled
    node's ranks of tests/data/pairs did), as the job re-tests a slow test."""

    def change(document: dict[str, Any]) -> None:
        tests = document["rails"]["tests"]
        last = max(int(t["round"]) for t in tests)
        for test in [t for t in tests if keep(t) and not t["retest"]]:
            test["busbw_gbps"] *= factor
            test["algbw_gbps"] *= factor
            test["time_s"] /= factor
            last += 1
            tests.append(dict(test, retest=True, alone=True, round=last, cpu_wait=0.01))

    return changed(outcome, change)


def slow_to_answer(outcome: JobOutcome, node: int, rail: int) -> JobOutcome:
    """``node``'s 8-byte tests on ``rail`` three times as long: a card slow to answer, its
    bandwidth untouched."""
    return made_slow(
        outcome, lambda t: bool(t.get("latency")) and node in t["nodes"] and t["rail"] == rail, 1 / 3
    )


@pytest.mark.parametrize("name", ["lab_three_nodes_two_rails", "lab_four_nodes_two_rails"])
def test_healthy_rails_pass_and_say_what_each_rail_does(name: str) -> None:
    (result,) = judged(job(name))
    assert result.status == "pass", result.summary
    assert result.details["rails"] == 2
    assert set(result.details["typical_gbps"]) == {"0", "1"}
    assert "each of the 2 rails of" in result.summary
    assert "µs an all-reduce of 8 bytes" in result.summary
    assert {t["latency"] for t in result.details["tests"]} == {False, True}


@pytest.mark.parametrize(
    ("name", "node", "partners"),
    [
        ("lab_three_nodes_rail2_throttled", "10.199.1.12", "10.199.1.[11,13]"),
        ("lab_four_nodes_rail2_throttled", "10.199.1.13", "10.199.1.[12,14]"),
    ],
)
def test_a_slow_card_is_named_on_its_node_by_its_rail_and_no_partner_is_blamed(
    name: str, node: str, partners: str
) -> None:
    (finding,) = failures(job(name))
    assert finding.status == "fail"
    assert finding.hosts == (node,)
    assert finding.details["item"] == "slow_rail"
    assert finding.details["rails"] == [1]
    assert finding.details["ratio"] < 0.5
    assert finding.summary.startswith(
        f"{node}'s rail 1 (rail2) is slow with both its neighbours ({partners})"
    )
    assert "that interface, its cable or its switch port" in finding.summary
    # The evidence: the slow tests were tested again, and stayed slow.
    retests = [t for t in finding.details["tests"] if t["retest"] and not t["latency"]]
    assert retests and all(node in t["nodes"] and t["rail"] == 1 for t in retests)


def test_two_nodes_name_the_slow_rail_between_them_and_say_which_side_cannot_be_told() -> None:
    (finding,) = failures(job("lab_two_nodes_rail2_throttled"))
    assert finding.details["item"] == "slow_rail_pair"
    assert set(finding.hosts) == {"10.199.1.11", "10.199.1.12"}
    assert finding.details["rails"] == [1]
    assert "which side is slow cannot be told" in finding.summary


def test_a_node_slow_on_every_rail_is_the_node_not_a_card() -> None:
    (finding,) = failures(job("lab_three_nodes_both_rails_throttled"))
    assert finding.details["item"] == "slow_on_every_rail"
    assert finding.hosts == ("10.199.1.12",)
    assert "not one card" in finding.summary


def test_one_slow_test_between_nodes_that_do_well_elsewhere_is_the_path_between_them() -> None:
    # Four healthy nodes; the rail-0 test of one ring pair (and its re-test) four times slower.
    outcome = made_slow(
        job("lab_four_nodes_two_rails"),
        lambda t: t["nodes"] == [0, 1] and t["rail"] == 0 and not t.get("latency"),
        0.25,
    )
    (finding,) = failures(outcome)
    assert finding.details["item"] == "slow_rail_link"
    assert finding.hosts == ("10.199.1.11", "10.199.1.12")
    assert "the path between them on that rail" in finding.summary


def test_a_test_slow_once_that_was_never_re_tested_is_not_named() -> None:
    """The judge names what the job confirmed: a test the job did not re-test (it was not slow
    against the first tests' healthy rail when the job looked) is not a finding."""

    def slower_first_test(document: dict[str, Any]) -> None:
        test = next(t for t in document["rails"]["tests"] if not t.get("latency"))
        test["busbw_gbps"] *= 0.2

    assert failures(changed(job("lab_four_nodes_two_rails"), slower_first_test)) == []


def test_a_rail_slow_between_every_pair_is_one_finding_for_the_rail() -> None:
    outcome = made_slow(
        job("lab_three_nodes_two_rails"), lambda t: t["rail"] == 1 and not t.get("latency"), 0.3
    )
    (finding,) = failures(outcome)
    assert finding.details["item"] == "slow_rail_everywhere"
    assert finding.details["rails"] == [1]
    assert len(finding.hosts) == 3


def test_a_rail_slow_to_answer_at_eight_bytes_is_named_for_its_latency() -> None:
    (finding,) = failures(slow_to_answer(job("lab_three_nodes_two_rails"), 1, 1))
    assert finding.details["item"] == "rail_latency"
    assert finding.details["form"] == "slow_rail"
    assert finding.hosts == ("10.199.1.12",)
    assert finding.summary.startswith("10.199.1.12's rail 1 (rail2) is slow with both its neighbours")
    assert "the latency of a healthy rail test" in finding.summary
    assert "slow to answer small messages" in rails.PRESENTATION.advice(finding)
    (healthy,) = judged(job("lab_three_nodes_two_rails"))
    assert finding.details["latency_us"] > 2 * max(healthy.details["latency_us"].values())


def test_a_rail_slow_at_both_sizes_is_one_finding_for_its_bandwidth() -> None:
    (finding,) = failures(slow_to_answer(job("lab_three_nodes_rail2_throttled"), 1, 1))
    assert finding.details["item"] == "slow_rail"


def test_slow_latency_tests_whose_ranks_waited_for_a_cpu_are_not_judged() -> None:
    (result,) = judged(job("lab_four_nodes_latency_waits"))
    assert result.status == "pass"
    assert len(result.details["latency_unjudged"]) == 4
    assert "4 slow latency tests not judged: the ranks waited for a CPU" in result.summary

    # The same tests, their ranks not waiting, are named.
    def no_wait(document: dict[str, Any]) -> None:
        for test in document["rails"]["tests"]:
            test["cpu_wait"] = 0.01

    assert {r.details["item"] for r in failures(changed(job("lab_four_nodes_latency_waits"), no_wait))} == {
        "rail_latency"
    }


def test_gpu_rails_are_named_by_gpu_and_pci_address_and_point_at_the_nic_beside_it() -> None:
    def as_gpu_job(document: dict[str, Any]) -> None:
        document["device"] = "cuda"
        for card in document["rails"]["cards"]:
            card.pop("interfaces")
        node = document["rails"]["cards"][1]
        document["rails"]["cards"].append(dict(node, rank=4, local_rank=1, gpu="00000000:9A:00.0"))

    (finding,) = failures(changed(job("lab_three_nodes_rail2_throttled"), as_gpu_job))
    assert finding.summary.startswith("10.199.1.12's rail 1 (GPU 1 at 00000000:9A:00.0) is slow")
    assert "the NIC nearest that GPU" in finding.summary


def test_a_skipped_phase_says_why() -> None:
    def one_rail(document: dict[str, Any]) -> None:
        document["rails"] = {"rails": 1, "cards": [], "tests": [], "skipped": "each node reaches its peers "
                             "through one interface"}  # fmt: skip

    (result,) = judged(changed(job("lab_three_nodes_two_rails"), one_rail))
    assert result.status == "skip"
    assert "one interface" in result.summary


def test_the_network_checks_refer_to_a_slow_rail_instead_of_blaming_the_node_again() -> None:
    (rail,) = failures(job("lab_three_nodes_rail2_throttled"))
    slow_node = CheckResult("allreduce", "fail", "10.199.1.12 is slow with every partner", ("10.199.1.12",),
                            {"node": "10.199.1.12", "ratio": 0.6})  # fmt: skip
    (referred,) = refer_to_compute([slow_node], [rail], ALLREDUCE_PHASE.speed_keys)
    assert referred.status == "warn"
    assert referred.details["refers_to"] == "rails"
    assert "having a slow card on one of its rails (see the rails finding)" in referred.summary
    assert "not by the network" not in referred.summary


def test_a_ring_gives_every_node_two_partners_and_two_nodes_one_pair() -> None:
    for n in (3, 4, 5, 8):
        pairs = ring_pairs(n)
        assert len(pairs) == n
        assert all(sum(node in pair for pair in pairs) == 2 for node in range(n))
    assert ring_pairs(2) == [(0, 1)]
    assert ring_pairs(1) == []


def test_gpu_rails_run_at_once_and_a_cpu_nodes_rails_in_turn() -> None:
    tests = rail_tests([(0, 1), (2, 3)], 4)
    gpu = {t: [t[0] * 4 + t[2], t[1] * 4 + t[2]] for t in tests}  # local rank r is rail r
    assert len(pack_rounds(tests, gpu.__getitem__)) == 1
    cpu = {t: [t[0], t[1]] for t in tests}  # one rank a node carries every rail
    assert len(pack_rounds(tests, cpu.__getitem__)) == 4


def test_a_rails_healthy_measure_is_not_dragged_down_by_the_slow_node() -> None:
    recorded = job("lab_three_nodes_rail2_throttled").document or {}
    busbw = best_busbw(recorded["rails"]["tests"])
    slowest = min(busbw.values())
    assert healthy_rail(busbw) > 2 * slowest
