"""JUnit XML: one testcase per check and host, for CI systems (Jenkins, GitLab) to show and gate on.

``classname`` is the host and ``name`` the check. A finding about a host fails (or errors,
or skips) that host's testcase; a warning passes with the warning in ``system-out``;
findings about the cluster as a whole go to a testcase of classname ``cluster``. Text is
stripped of terminal escapes and of characters XML 1.0 cannot carry.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from preflight.escape import printable
from preflight.explain import Explained
from preflight.explained import explained_items, explanation_for
from preflight.model import CheckResult, HostReport, RunReport
from preflight.status import severity

CLUSTER = "cluster"
_DETAILS_MAX_CHARS = 8000
_XML_INVALID_RE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: str) -> str:
    return _XML_INVALID_RE.sub("", printable(value))


def _details(result: CheckResult, known: Sequence[Explained]) -> str:
    text = json.dumps(result.details, indent=1, default=str, ensure_ascii=False)
    if len(text) > _DETAILS_MAX_CHARS:
        text = text[:_DETAILS_MAX_CHARS] + "\n[... cut; the JSON report has everything]"
    explained = explanation_for(result.check, result.details, known)
    said = f"{explained.first_line} (preflight explain {explained.key})\n\n" if explained else ""
    return _text(f"{result.summary}\n\n{said}{text}")


def _case(
    parent: ET.Element,
    classname: str,
    name: str,
    findings: Sequence[CheckResult],
    known: Sequence[Explained],
    note: str = "",
) -> str:
    case = ET.SubElement(parent, "testcase", classname=_text(classname), name=name, time="0")
    # JUnit has no warning: a warning is a pass with a note, so a skip outranks it here.
    worst = (
        min(findings, key=lambda r: severity("pass" if r.status == "warn" else r.status))
        if findings
        else None
    )
    outcome = "pass"
    if worst is not None and worst.status in ("fail", "error", "skip"):
        tag = {"fail": "failure", "error": "error", "skip": "skipped"}[worst.status]
        element = ET.SubElement(case, tag, message=_text(worst.summary), type=worst.status)
        if worst.status != "skip":
            element.text = "\n\n".join(_details(r, known) for r in findings if r.status == worst.status)
        outcome = worst.status
    warnings = [f"warning: {r.summary}" for r in findings if r.status == "warn"]
    if warnings or note:
        ET.SubElement(case, "system-out").text = _text("\n".join([*warnings, note]).strip())
    return outcome


def _host_findings(results: Sequence[CheckResult], host: HostReport, check: str) -> list[CheckResult]:
    named = [r for r in results if host.name in r.hosts]
    if named:
        return named
    if not host.reachable:
        message = host.error.message if host.error else "not reached"
        return [CheckResult(check, "skip", f"{host.name} could not be checked: {message}")]
    whole = [r for r in results if not r.hosts and r.status == "skip"]
    return whole if whole and not any(r.status == "pass" for r in results) else []


def render(report: RunReport) -> str:
    checks = list(dict.fromkeys(r.check for r in report.results))
    suites = ET.Element("testsuites", name="preflight")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="preflight",
        timestamp=report.started_at.removesuffix("Z"),
        time=f"{report.duration_s:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    for key, value in (
        ("verdict", report.verdict),
        ("exit_code", str(int(report.exit_code))),
        ("tool_version", report.tool_version),
        ("hosts", str(len(report.hosts))),
    ):
        ET.SubElement(properties, "property", name=key, value=value)
    counts: dict[str, int] = {"pass": 0, "fail": 0, "error": 0, "skip": 0}
    known = explained_items()
    for check in checks:
        results = report.results_for(check)
        for host in report.hosts:
            counts[_case(suite, host.name, check, _host_findings(results, host, check), known)] += 1
        cluster_wide = [r for r in results if not r.hosts and r.status in ("fail", "error", "warn")]
        if cluster_wide:
            counts[_case(suite, CLUSTER, check, cluster_wide, known)] += 1
    total = sum(counts.values())
    for element in (suites, suite):
        element.set("tests", str(total))
        element.set("failures", str(counts["fail"]))
        element.set("errors", str(counts["error"]))
        element.set("skipped", str(counts["skip"]))
    suites.set("time", f"{report.duration_s:.3f}")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
