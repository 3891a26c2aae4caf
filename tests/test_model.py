"""The run model: exit codes as docs/exit-codes.md states them, and JSON that round-trips."""

from __future__ import annotations

import json

import pytest

from preflight.errors import ExitCode
from preflight.model import CheckResult, HostError, HostReport, RunReport, exit_code_for, with_check_details
from reports.json_report import render


def result(status: str, check: str = "versions") -> CheckResult:
    return CheckResult(check=check, status=status, summary=f"{check} {status}")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        ([], ExitCode.OK),
        (["pass", "skip"], ExitCode.OK),
        (["pass", "warn", "warn"], ExitCode.OK),  # warnings are allowed
        (["pass", "fail"], ExitCode.CHECK_FAILED),
        (["error", "pass"], ExitCode.HOSTS_UNCHECKED),  # a host could not be checked, nothing failed
        (["error", "fail", "warn"], ExitCode.CHECK_FAILED),  # a failure wins over unchecked hosts
    ],
)
def test_exit_codes(statuses: list[str], code: ExitCode) -> None:
    assert exit_code_for([result(s) for s in statuses]) == code


def sample_report(**kwargs: object) -> RunReport:
    return RunReport.build(
        tool_version="0.1.0",
        started_at="2026-11-22T10:00:00Z",
        duration_s=12.3456,
        hosts=[
            HostReport("gpu01", "10.0.0.11", "gpu01", True, None, {"python": {"version": "3.11.7"}}),
            HostReport("gpu02", "10.0.0.12", None, False, HostError("timeout", "no answer within 10 s")),
        ],
        results=[
            result("pass", "connect"),
            CheckResult("connect", "error", "gpu02: no answer", ("gpu02",), {"cause": "timeout"}),
        ],
        **kwargs,  # type: ignore[arg-type]
    )


def test_json_follows_the_schema_of_design() -> None:
    data = json.loads(render(sample_report()))
    assert data["schema_version"] == 1
    assert data["verdict"] == "error"
    assert data["exit_code"] == 3
    assert data["duration_s"] == 12.346
    assert {"name", "address", "hostname", "reachable", "error", "facts"} <= set(data["hosts"][0])
    assert data["hosts"][1]["error"] == {"kind": "timeout", "message": "no answer within 10 s"}
    assert data["results"][1] == {
        "check": "connect",
        "status": "error",
        "hosts": ["gpu02"],
        "summary": "gpu02: no answer",
        "details": {"cause": "timeout"},
    }


def test_json_round_trips() -> None:
    report = sample_report()
    assert RunReport.from_dict(json.loads(render(report))) == report


def test_an_interrupted_run_exits_130_whatever_it_found() -> None:
    report = sample_report(interrupted=True)
    assert report.exit_code == ExitCode.INTERRUPTED
    assert report.verdict == "error"


def test_the_headline_says_one_cause_once_even_when_it_fails_several_checks() -> None:
    from reports.summary import headline

    cause = "node3: python3 cannot import torch (No module named 'torch')"
    report = RunReport.build(
        tool_version="0.1.0",
        started_at="2026-11-22T10:00:00Z",
        duration_s=1,
        hosts=[HostReport("node3", "node3", "node3", True)],
        results=[
            CheckResult("allreduce", "fail", cause, ("node3",)),
            CheckResult("ddp", "fail", cause, ("node3",)),
        ],
    )
    assert headline(report) == f"FAIL — {cause}"


def test_check_wide_details_ride_on_the_first_finding_only() -> None:
    first = CheckResult("rails", "fail", "rail 2 slow", ("n1",), {"item": "slow_rail", "rails": [1]})
    second = CheckResult("rails", "warn", "rail 1 slow once", ("n2",), {"item": "slow_once"})
    merged, untouched = with_check_details([first, second], {"rails": 2, "tests": []})
    # The tables first; the finding's own "rails" stays, and its other keys follow.
    assert list(merged.details) == ["rails", "tests", "item"]
    assert merged.details["rails"] == [1] and merged.details["tests"] == []
    assert (merged.check, merged.status, merged.summary, merged.hosts) == (
        "rails",
        "fail",
        "rail 2 slow",
        ("n1",),
    )
    assert untouched == second
    assert with_check_details([], {"rails": 2}) == []


def test_a_kept_check_wide_key_wins_over_the_findings_own() -> None:
    first = CheckResult("ports", "fail", "blocked", ("n1",), {"item": "probe", "port": 41000})
    (merged,) = with_check_details([first], {"port": 29500, "nodes": {}}, kept=("port",))
    assert merged.details == {"port": 29500, "nodes": {}, "item": "probe"}
    assert list(merged.details) == ["port", "nodes", "item"]
