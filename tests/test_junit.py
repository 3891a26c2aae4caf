"""JUnit XML: valid against the structure Jenkins and GitLab read, one testcase per check and host."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from preflight.model import CheckResult, HostError, HostReport, RunReport
from reports.junit import render

SCHEMA = xmlschema.XMLSchema(Path(__file__).parent / "data" / "junit" / "junit.xsd")
HOSTILE = "gpu\x1b[31m<03>&\x00\x07\ud800"


def report(results: list[CheckResult], hosts: list[HostReport] | None = None) -> RunReport:
    hosts = hosts or [HostReport(n, n, n, True) for n in ("gpu01", "gpu02", "gpu03")]
    return RunReport.build(
        tool_version="0.1.0", started_at="2026-11-22T10:00:00Z", duration_s=4.25, hosts=hosts, results=results
    )


def cases(xml_text: str) -> dict[tuple[str, str], tuple[str, str | None]]:
    found = {}
    for case in ET.fromstring(xml_text).iter("testcase"):
        child = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        outcome = child.tag if child is not None else "passed"
        found[(case.get("classname") or "", case.get("name") or "")] = (
            outcome,
            child.get("message") if child is not None else None,
        )
    return found


def test_a_finding_fails_only_the_hosts_it_names() -> None:
    xml_text = render(
        report(
            [
                CheckResult("connect", "pass", "3 of 3 hosts reached"),
                CheckResult("versions", "fail", "torch differs: gpu03: 2.3.1", ("gpu03",), {"item": "torch"}),
                CheckResult("gpu_memory", "skip", "no GPUs on any node: CPU-only cluster"),
            ]
        )
    )
    SCHEMA.validate(xml_text)
    found = cases(xml_text)
    assert len(found) == 9
    assert found[("gpu03", "versions")] == ("failure", "torch differs: gpu03: 2.3.1")
    assert found[("gpu01", "versions")] == ("passed", None)
    assert found[("gpu02", "gpu_memory")] == ("skipped", "no GPUs on any node: CPU-only cluster")
    suite = ET.fromstring(xml_text).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "9",
        "1",
        "0",
        "3",
    )


def test_an_unreachable_host_errors_on_connect_and_skips_the_rest() -> None:
    hosts = [
        HostReport("gpu01", "gpu01", "gpu01", True),
        HostReport(
            "gpu02", "gpu02", None, False, HostError("timeout", "no answer from gpu02:22 within 10 s")
        ),
    ]
    xml_text = render(
        report(
            [
                CheckResult("connect", "pass", "1 of 2 hosts reached"),
                CheckResult("connect", "error", "gpu02: no answer from gpu02:22 within 10 s", ("gpu02",)),
                CheckResult("versions", "skip", "only gpu01 reachable: nothing compared"),
            ],
            hosts,
        )
    )
    SCHEMA.validate(xml_text)
    found = cases(xml_text)
    assert found[("gpu02", "connect")][0] == "error"
    assert found[("gpu02", "versions")] == (
        "skipped",
        "gpu02 could not be checked: no answer from gpu02:22 within 10 s",
    )
    assert found[("gpu01", "connect")] == ("passed", None)


def test_warnings_pass_with_the_warning_in_system_out() -> None:
    xml_text = render(report([CheckResult("versions", "warn", "numpy differs on gpu02", ("gpu02",))]))
    SCHEMA.validate(xml_text)
    case = next(c for c in ET.fromstring(xml_text).iter("testcase") if c.get("classname") == "gpu02")
    assert case.find("failure") is None
    assert case.findtext("system-out") == "warning: numpy differs on gpu02"


def test_cluster_wide_findings_get_their_own_testcase() -> None:
    xml_text = render(report([CheckResult("allreduce", "fail", "busbw 3.1 GB/s is below the floor 10 GB/s")]))
    SCHEMA.validate(xml_text)
    assert cases(xml_text)[("cluster", "allreduce")] == (
        "failure",
        "busbw 3.1 GB/s is below the floor 10 GB/s",
    )


@pytest.mark.parametrize("where", ["hostname", "summary", "details"])
def test_hostile_node_text_stays_valid_xml(where: str) -> None:
    name = HOSTILE if where == "hostname" else "gpu01"
    summary = f"odd value {HOSTILE}" if where == "summary" else "odd"
    details = {"value": HOSTILE + "]]></failure><x>"} if where == "details" else {}
    xml_text = render(
        report(
            [CheckResult("versions", "fail", summary, (name,), details)],
            [HostReport(name, "10.0.0.1", name, True)],
        )
    )
    SCHEMA.validate(xml_text)
    assert "\x1b" not in xml_text and "\x00" not in xml_text and "\x07" not in xml_text
    root = ET.fromstring(xml_text)
    assert [c.tag for c in root.iter() if c.tag == "x"] == []


def test_a_failure_s_text_carries_the_first_line_of_its_item_s_explanation() -> None:
    from preflight.explained import explained_items

    slow = CheckResult("compute", "fail", "gpu02 is slow at compute", ("gpu02",), {"item": "slow_compute"})
    (explained,) = [e for e in explained_items() if e.key == "compute/slow_compute"]
    root = ET.fromstring(render(report([slow])))
    (failure,) = root.iter("failure")
    text = failure.text or ""
    assert f"{explained.first_line} (preflight explain compute/slow_compute)" in text
    assert text.index("gpu02 is slow at compute") < text.index(explained.first_line)
