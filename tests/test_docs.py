"""The contracts in docs/ say what the code does: the check names, the exit codes, the report's
fields, statuses, host error kinds and metric names; and the repository cites nothing outside it."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

from preflight.errors import ExitCode
from preflight.handback import hand_back
from preflight.history.record import RunInfo
from preflight.history.session import HistoryRequest, remember
from preflight.history.settings import HistorySection
from preflight.model import HostErrorKind, RunReport
from preflight.profiles import checks_of
from preflight.registry import all_checks, unreached_check
from preflight.status import SEVERITY
from reports import prometheus
from reports.json_report import load

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RECORDED = ROOT / "tests" / "data" / "reports" / "healthy.json"
# Folders that are not the project's own files: tools' caches, environments, version control.
_NOT_PROJECT = {"__pycache__", "node_modules", "build", "dist"}
_LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
_CODE_RE = re.compile(r"`([^`]+)`")


def _section(doc: str, heading: str) -> str:
    """The text under the Markdown heading ``heading`` (any level), up to the next heading."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    found = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#|\Z)", text, re.S | re.M)
    assert found, f"docs/{doc} has no section {heading!r}"
    return found.group(1)


def _first_column(doc: str, heading: str) -> list[str]:
    """The code (backticked) names in the first column of the section's table, in order; rows
    whose first cell is not code are left out."""
    names = []
    rows = [line for line in _section(doc, heading).splitlines() if line.startswith("|")]
    for row in rows[2:]:  # past the header and the separator
        cell = row.split("|")[1].strip()
        if found := _CODE_RE.fullmatch(cell):
            names.append(found.group(1))
    assert names, f"docs/{doc}, {heading!r}: no table with names in its first column"
    return names


def _recorded_run() -> dict[str, Any]:
    """A recorded run as ``preflight check`` writes it today: with the hand-back it computes, and
    the timeline of a run recorded since runs keep one."""
    report = load(RECORDED)
    actions = {check.name: check.action for check in all_checks()}
    handback = hand_back(report.hosts, report.results, actions, unreached_check=unreached_check()).to_dict()
    timeline = load(RECORDED.with_name("timeline.json")).timeline
    return dataclasses.replace(report, handback=handback, timeline=timeline).to_dict()


def test_the_check_names_the_docs_list_are_the_registrys_in_its_order() -> None:
    registry = [check.name for check in all_checks()]
    assert _first_column("names.md", "Checks") == registry
    assert sorted(_first_column("names.md", "Findings: `details.item`")) == sorted(registry)
    schema = (DOCS / "report-schema.md").read_text(encoding="utf-8")
    one_each = re.findall(r"^### `(\w+)`", schema, re.M)
    job = re.search(r"^### The job's checks: (.*)$", schema, re.M)
    assert job, "docs/report-schema.md has no section on the job's checks"
    assert sorted([*one_each, *_CODE_RE.findall(job.group(1))]) == sorted(registry)


def test_the_quick_checks_the_docs_list_are_those_that_declare_the_quick_profile() -> None:
    text = (DOCS / "names.md").read_text(encoding="utf-8")
    quick = re.search(r"^`--quick` runs the checks .*?:(.*?)\.$", text, re.S | re.M)
    assert quick, "docs/names.md does not list the quick checks"
    listed = [name for name in _CODE_RE.findall(quick.group(1)) if name in {c.name for c in all_checks()}]
    assert listed == checks_of("quick")


def test_the_exit_code_table_is_the_code() -> None:
    rows = [line for line in _section("exit-codes.md", "Exit codes").splitlines() if line.startswith("|")]
    table = {}
    for row in rows[2:]:
        code, name = (_CODE_RE.fullmatch(cell.strip()) for cell in row.split("|")[1:3])
        assert code and name, f"not a code and a name: {row}"
        table[int(code.group(1))] = name.group(1)
    assert table == {int(code): code.name for code in ExitCode}


def test_the_schema_doc_lists_every_field_a_run_writes(tmp_path: Path) -> None:
    # As a run that used the history store writes it: with the history key.
    request = HistoryRequest(
        HistorySection(store=str(tmp_path / "history.sqlite")), RunInfo("hosts", "standard", False)
    )
    run = remember(RunReport.from_dict(_recorded_run()), request).to_dict()
    assert _first_column("report-schema.md", "Top-level fields") == list(run)
    assert _first_column("report-schema.md", "Host entries") == list(run["hosts"][0])
    assert _first_column("report-schema.md", "Result entries") == list(run["results"][0])
    assert _first_column("report-schema.md", "The hand-back") == list(run["handback"])
    assert _first_column("report-schema.md", "History") == list(run["history"])


def test_the_schema_doc_lists_the_statuses_worst_first_and_every_host_error_kind() -> None:
    assert _first_column("report-schema.md", "Statuses") == list(SEVERITY)
    assert _first_column("report-schema.md", "Host errors") == list(get_args(HostErrorKind))


def test_the_metric_names_are_those_a_run_writes_and_the_checks_declare() -> None:
    report = RunReport.from_dict(_recorded_run())
    written = set(re.findall(r"^(preflight_\w+)[{ ]", prometheus.render(report), re.M))
    declared = {m.gauge.name for c in all_checks() for m in c.measures if m.gauge is not None}
    documented = _first_column("names.md", "Prometheus (`--prometheus`, node_exporter textfile)")
    assert written <= set(documented)
    assert sorted(documented) == sorted(written | declared)


def _project_files() -> Iterator[Path]:
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [
            d for d in dirs if not d.startswith(".") and d not in _NOT_PROJECT and not d.endswith(".egg-info")
        ]
        yield from (Path(folder, name) for name in files)


def test_nothing_in_the_repository_cites_a_file_outside_it() -> None:
    outside = "DESIGN" + ".md"  # spelled in two parts, so that this file does not cite it either
    citing = [str(p.relative_to(ROOT)) for p in _project_files() if outside.encode() in p.read_bytes()]
    assert citing == []
    broken = []
    for path in (p for p in _project_files() if p.suffix == ".md"):
        for target in _LINK_RE.findall(path.read_text(encoding="utf-8")):
            if re.match(r"^(https?:|mailto:|#)", target):
                continue
            resolved = (path.parent / target.split("#")[0]).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert broken == []


def _anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page: each heading as GitHub names it (lower case, punctuation
    but hyphens dropped, spaces as hyphens; headings inside code blocks are not headings) and each
    explicit ``<a id="...">``."""
    anchors: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#+ (.*)$", line)):
            anchors.add(re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-"))
        anchors.update(re.findall(r'<a id="([^"]+)"', line))
    return anchors


def test_every_link_into_a_page_finds_its_heading() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in _LINK_RE.findall(page.read_text(encoding="utf-8")):
            path, _, anchor = target.partition("#")
            if not anchor or re.match(r"^(https?:|mailto:)", target):
                continue
            linked = (page.parent / path).resolve() if path else page
            if linked.suffix == ".md" and linked.exists() and anchor not in _anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_readme_is_a_guide_that_points_to_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300, "the README is the guide; the reference lives in docs/"
    linked = {target.split("#")[0] for target in _LINK_RE.findall(readme)}
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if f"docs/{p.name}" not in linked]
    assert unlinked == [], "the README's table of docs pages should list these"


# The anchor lists of docs/coverage.md, as its table of counts names them, and how a row names each.
_ANCHORS = {
    "LBNL NHC": r"(?<!Az)\bNHC\b",
    "gpud": r"\bgpud\b",
    "DCGM diag": r"\bDCGM\b",
    "Azure AzNHC": r"\bAzNHC\b",
    "ClusterMAX expectations": r"\bClusterMAX\b",
    "NVSentinel": r"\bNVSentinel\b",
    "AMD CVS preflight": r"\bCVS\b",
}
_VERDICTS = (("covered", "added"), ("partly covered",), ("not covered",), ("not applicable",))


def _coverage_rows() -> Iterator[tuple[str, str]]:
    """(the lists the row cites, its verdict) of each row of docs/coverage.md's item tables."""
    in_items = False
    for line in (DOCS / "coverage.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells == ["item", "lists", "preflight"]:
            in_items = True
        elif not line.startswith("|"):
            in_items = False
        elif in_items and not set(cells[0]) <= {"-"}:
            yield cells[1], cells[2]


def test_the_coverage_page_says_nothing_is_missing_only_when_no_row_says_so() -> None:
    page = (DOCS / "coverage.md").read_text(encoding="utf-8")
    missing = page.split("## Not covered yet, applicable", 1)[1].split("\n## ", 1)[0].strip()
    short = [v for _, v in _coverage_rows() if v.startswith(("partly covered", "not covered"))]
    assert bool(short) == (not missing.startswith("None")), missing[:80]
    assert not short or "\n- " in missing, "the section lists what the rows lack"


def test_every_coverage_row_has_a_verdict_and_the_counts_table_counts_them() -> None:
    counts = {name: [0, 0, 0, 0] for name in _ANCHORS}
    for cited, verdict in _coverage_rows():
        kinds = [k for k, starts in enumerate(_VERDICTS) if verdict.startswith(starts)]
        assert kinds, f"docs/coverage.md: a row without a verdict: {verdict[:80]!r}"
        for name, pattern in _ANCHORS.items():
            if re.search(pattern, cited):
                counts[name][kinds[0]] += 1
    counted = _section("coverage.md", "Counts")
    for name, (covered, partly, missing, not_applicable) in counts.items():
        row = f"| {name} | {covered} | {partly} | {missing} | {not_applicable} |"
        assert row in counted, f"docs/coverage.md's table of counts should read {row}"
