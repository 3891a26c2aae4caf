"""The HTML report, rendered from recorded runs and from hostile ones, read as text and parsed.

What a person and a browser rely on: the verdict and the culprits are on the page; every
string a node sent is escaped; the page loads nothing from anywhere and says so in its CSP;
a thousand nodes fold into a few rows and a file of sane size.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from checks import allreduce, ddp, gpu_memory, ports
from checks.versions import version_matrix
from preflight import units, view
from preflight.errors import ExitCode
from preflight.history.record import parts_of
from preflight.model import CheckResult, HostError, HostReport, RunReport
from preflight.status import severity
from preflight.view import Chart
from reports import charts, html
from reports.html.details import generic_details
from reports.html.grid import build_grid
from reports.html.text import Anchors
from reports.json_report import load
from reports.summary import headline
from tests.data.reports import make_synthetic

REPORTS = Path(__file__).parent / "data" / "reports"
JOBS = Path(__file__).parent / "data" / "jobs"
RECORDED = sorted(REPORTS.glob("*.json"))
SVG_NS = "http://www.w3.org/2000/svg"


@pytest.fixture(scope="module")
def large() -> RunReport:
    return make_synthetic.build()


@pytest.fixture(scope="module")
def large_page(large: RunReport) -> str:
    return html.render(large)


class Page(HTMLParser):
    """The parts of a rendered page the tests look at."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._in: str | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._in = tag
            (self.scripts if tag == "script" else self.styles).append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts[-1] += data
        elif self._in == "style":
            self.styles[-1] += data
        else:
            self.text.append(data)

    @property
    def visible_text(self) -> str:
        return re.sub(r"\s+", " ", " ".join(self.text))

    def attr(self, tag: str, name: str) -> list[str]:
        return [a[name] or "" for t, a in self.tags if t == tag and name in a]


def fetched_urls(text: str) -> list[str]:
    """Every URL the browser would load: resource attributes and CSS url()/@import."""
    page = Page(text)
    loading = {"src", "href", "action", "formaction", "data", "poster", "background", "xlink:href", "srcset"}
    found = []
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            if name in loading and value and not value.startswith("#"):
                found.append(f"{tag}[{name}]={value}")
    for style in page.styles:
        found += re.findall(r"url\([^)]*\)|@import[^;]*", style)
    return found


def csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def culprit_names(report: RunReport) -> set[str]:
    return {h for r in report.results if r.status in ("fail", "error", "warn") for h in r.hosts}


# ------------------------------------------------------------------- the recorded runs


def test_there_are_recorded_runs_of_the_lab() -> None:
    names = {p.stem for p in RECORDED}
    assert {"healthy", "drift", "blocked_port", "unreachable"} <= names


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_a_recorded_run_shows_the_verdict_and_the_culprits(path: Path) -> None:
    report = load(path)
    text = html.render(report)
    page = Page(text)
    said = headline(report)
    label, _, sentence = said.partition(" — ")
    assert sentence in page.visible_text
    assert label in page.visible_text
    assert f"{int(report.exit_code)} " in page.visible_text
    for name in culprit_names(report):
        assert name in page.visible_text
    for result in report.results:
        assert result.summary in page.visible_text


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_a_recorded_run_loads_nothing_and_its_csp_allows_only_its_own_style_and_script(path: Path) -> None:
    text = html.render(load(path))
    page = Page(text)
    assert fetched_urls(text) == []
    # The only absolute URL anywhere is the SVG namespace, which no browser fetches.
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) <= {SVG_NS}
    (csp,) = [
        a.get("content") or ""
        for t, a in page.tags
        if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
    assert directives["default-src"] == "'none'"
    (style,) = page.styles
    inline_scripts = [
        s
        for (t, a), s in zip([x for x in page.tags if x[0] == "script"], page.scripts, strict=True)
        if a.get("type") != "application/json"
    ]
    assert directives["style-src"] == csp_hash(style)
    assert directives["script-src"] == " ".join(csp_hash(s) for s in inline_scripts)
    # No style attribute anywhere: that CSP would block it.
    assert not [t for t, a in page.tags if "style" in a]


def test_rendering_is_deterministic() -> None:
    report = load(REPORTS / "drift.json")
    assert html.render(report) == html.render(report)


def test_the_version_table_highlights_the_odd_values() -> None:
    report = load(REPORTS / "drift.json")
    table = version_matrix(report)
    assert table is not None
    assert table.head[1].startswith("node[1-2,4]") and table.head[2] == "node3"
    rows = {row[0].text: row for row in table.rows}
    assert "odd-fail" in rows["nvidia-nccl-cu12"][2].css  # training stack: fails the run
    assert rows["nvidia-nccl-cu12"][2].text == "2.20.5"
    assert "odd-warn" in rows["rich"][2].css  # any other package: a warning
    assert "odd" not in rows["nvidia-nccl-cu12"][1].css
    assert "odd" not in rows["torch"][2].css
    # Drifting rows come first.
    assert [row[0].text for row in table.rows[:3]] == ["nvidia-nccl-cu12", "rich", "leftpad"]


def test_a_cpu_only_cluster_says_so_instead_of_an_empty_chart() -> None:
    text = html.render(load(REPORTS / "healthy.json"))
    assert "CPU-only cluster" in Page(text).visible_text
    assert "GPU memory in use" not in text


def test_the_ports_matrix_marks_the_blocked_probes() -> None:
    report = load(REPORTS / "blocked_port.json")
    (chart, *_rest) = [b for b in ports.PRESENTATION.evidence(report) if isinstance(b, Chart)]
    svg = str(charts.draw(chart.figure))
    # node2 and node3 cannot reach node1's rendezvous port; everything else is open.
    assert svg.count('class="cell st-fail"') == 2
    assert svg.count('class="cell st-pass"') == 4
    assert "node2 → node1: rendezvous :29500 dropped" in svg


def test_an_unreachable_node_has_its_own_row_and_is_not_checked_by_the_others() -> None:
    report = load(REPORTS / "unreachable.json")
    rows = {row.label: row for row in build_grid(report, Anchors(report.hosts))[1]}
    checks = list(dict.fromkeys(r.check for r in report.results))
    assert len(checks) >= 4
    # connect names why; every other check could not look at the node.
    assert [c.css for c in rows["node4"].cells] == ["st-error"] + ["st-unchecked"] * (len(checks) - 1)
    assert rows["node[1-3]"].count == 3


# ------------------------------------------------------------------- a thousand nodes


def test_a_thousand_nodes_fold_into_a_few_rows_with_every_culprit_on_its_own(large: RunReport) -> None:
    _, rows, hidden = build_grid(large, Anchors(large.hosts))
    assert hidden == 0
    culprits = culprit_names(large)
    assert culprits == {"gpu0123", "gpu0256", "gpu0417", "gpu0512", "gpu0733", "gpu0998", "gpu0999"}
    singles = {r.label for r in rows if r.count == 1}
    assert culprits <= singles
    (folded,) = [r for r in rows if r.count > 1]
    assert folded.count == 1000 - len(culprits)
    assert folded.label.startswith("gpu[0001-0122,0124-0255,")
    # Failures first.
    assert [r.status for r in rows] == sorted((r.status for r in rows), key=severity)


def test_a_thousand_nodes_make_a_file_of_sane_size(large_page: str) -> None:
    size = len(large_page.encode())
    assert size < 2_000_000, f"{size:,} bytes"
    # One copy of the package list, not a thousand.
    assert large_page.count("nvidia-cublas-cu12") < 10


def test_a_thousand_nodes_still_name_every_culprit(large: RunReport, large_page: str) -> None:
    text = Page(large_page).visible_text
    for name in culprit_names(large):
        assert name in text
    assert "gpu[0998-0999]" in text


def test_gpu_memory_is_charted_per_node_and_gpu_with_the_busy_gpus_marked(large: RunReport) -> None:
    (chart,) = gpu_memory.PRESENTATION.evidence(large)
    assert isinstance(chart, Chart)
    svg = str(charts.draw(chart.figure))
    # Two culprit nodes and one folded row, eight GPUs each.
    assert svg.count('<g class="meter') == 3 * 8
    assert svg.count('<g class="meter st-fail"') == 7 + 1  # gpu0733's busy GPUs, gpu0123's GPU 2
    assert "gpu0733 GPU 3: NVIDIA H100 80GB HBM3, 57.0 GiB used of 79.6 GiB" in svg


# ------------------------------------------------------------------- hostile nodes

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "</script><script>alert(3)</script>",
    "\x1b[31mred\x1b[0m\x1b]0;title\x07",
    "bell\x07nul\x00del\x7f",
    "'; background:url(https://evil.example/x.png); '",
]


def hostile_report() -> RunReport:
    evil = HOSTILE
    hosts = []
    for i, name in enumerate(evil):
        facts: dict[str, Any] = {
            "hostname": name,
            "os": {"name": evil[(i + 1) % len(evil)], "kernel": "6.1", "machine": "x86_64"},
            "python": {"version": "3.11.7"},
            "torch": {"version": evil[(i + 2) % len(evil)] if i == 1 else "2.5.1"},
            "packages": {name: "1.0", "numpy": evil[i] if i == 2 else "1.26.4"},
            "env": {"NCCL_DEBUG": name, "HF_TOKEN": "***"},
            "gpus": [
                {
                    "index": 0,
                    "name": name,
                    "memory_total_bytes": 80 * 2**30,
                    "memory_used_bytes": 2**30,
                    "processes": [{"pid": 7, "name": name}],
                }
            ],
        }
        hosts.append(HostReport(name=name, address=f"10.0.0.{i}", hostname=name, reachable=True, facts=facts))
    hosts.append(HostReport(name="ghost<b>", address="10.0.0.99", error=HostError("timeout", evil[1])))
    results = [
        CheckResult(
            "connect", "error", f"ghost<b>: {evil[1]}", ("ghost<b>",), {"errors": {"ghost<b>": evil[1]}}
        ),
        CheckResult(
            "versions",
            "fail",
            f"torch differs: {evil[0]}",
            (evil[1],),
            {"item": "torch", "values": {evil[2]: [evil[1]]}},
        ),
        CheckResult(
            "versions",
            "warn",
            f"packages differ: {evil[3]}",
            (evil[2],),
            {"item": "packages", "stack": False, "packages": {evil[0]: {"majority": "1.0", "values": {}}}},
        ),
        CheckResult(
            "ports",
            "fail",
            f"{evil[0]}:29500 is dropped",
            (evil[0],),
            {
                "item": "probe",
                "port": 29500,
                "nodes": {n: {"listening": {"29500": evil[4]}} for n in evil},
                "matrix": {evil[0]: {evil[1]: {"rendezvous": evil[2]}}},
                "blocked": [
                    {"from": evil[1], "to": evil[0], "port": 29500, "kind": evil[3], "status": "dropped"}
                ],
            },
        ),
        CheckResult(
            "gpu_memory",
            "fail",
            f"{evil[5]} GPU 0 busy",
            (evil[0],),
            {"item": "memory_free", "gpus": {evil[0]: [{"index": 0}]}},
        ),
        CheckResult(
            "allreduce",
            "fail",
            f"{evil[2]} is slow",
            (evil[2],),
            {
                "sweep": [{"size_bytes": 1024, "busbw_gbps": 1.0}, {"size_bytes": 2048, "busbw_gbps": 2.0}],
                "pairs": [
                    {"nodes": [evil[0], evil[1]], "busbw_gbps": 3.0},
                    {"nodes": [evil[1], evil[2]], "busbw_gbps": 0.2},
                ],
                "transport": {evil[0]: evil[1]},
            },
        ),
        CheckResult(
            "ddp",
            "warn",
            "straggler",
            (evil[0],),
            {"losses": [1.0, 0.5], "ranks": [{"rank": 0, "host": evil[0]}], "compute_step_s": [0.1, 0.3]},
        ),
        CheckResult(
            evil[0],
            "warn",
            evil[1],
            (evil[2],),
            {evil[3]: {evil[4]: [evil[5]]}, "list": [{evil[0]: evil[1]}]},
        ),
    ]
    return RunReport.build(
        tool_version="0.1.0<x>",
        started_at="2026-11-22T10:00:00Z",
        duration_s=1.0,
        hosts=hosts,
        results=results,
    )


@pytest.fixture(scope="module")
def hostile_page() -> str:
    return html.render(hostile_report())


def test_hostile_node_strings_cannot_add_markup(hostile_page: str) -> None:
    page = Page(hostile_page)
    tags = {t for t, _ in page.tags}
    allowed = {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "header",
        "div",
        "p",
        "span",
        "h1",
        "h2",
        "h4",
        "dl",
        "dt",
        "dd",
        "nav",
        "ol",
        "ul",
        "li",
        "a",
        "main",
        "section",
        "strong",
        "time",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "article",
        "details",
        "summary",
        "pre",
        "figure",
        "figcaption",
        "svg",
        "g",
        "line",
        "text",
        "polyline",
        "circle",
        "rect",
        "polygon",
        "label",
        "input",
        "button",
        "footer",
        "code",
        "script",
        "wbr",  # the page's own break points in folded node sets, after their commas
    }
    assert tags <= allowed, tags - allowed
    assert not [(t, n) for t, a in page.tags for n in a if n.startswith("on")]
    assert "img" not in tags
    # Two scripts only: the JSON summary and the page's own.
    assert [a.get("type") for t, a in page.tags if t == "script"] == ["application/json", None]
    assert "alert(" not in page.scripts[1]


def test_hostile_node_strings_are_shown_escaped(hostile_page: str) -> None:
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in hostile_page
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in hostile_page
    assert "<script>alert" not in hostile_page
    assert "<img" not in hostile_page
    text = Page(hostile_page).visible_text
    assert "<script>alert(1)</script>" in text  # what the node sent, as text
    assert "ghost<b>" in text


def test_hostile_node_strings_lose_their_escape_sequences_and_control_characters(hostile_page: str) -> None:
    assert "\x1b" not in hostile_page
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", hostile_page)
    assert "red" in Page(hostile_page).visible_text


def test_hostile_node_strings_load_nothing(hostile_page: str) -> None:
    assert fetched_urls(hostile_page) == []


def test_the_embedded_summary_is_json_that_cannot_close_its_script(hostile_page: str) -> None:
    page = Page(hostile_page)
    data = page.scripts[0]
    assert "<" not in data and ">" not in data and "&" not in data
    summary = json.loads(data)
    assert summary["verdict"] == "fail"
    assert summary["exit_code"] == ExitCode.CHECK_FAILED
    assert [h["name"] for h in summary["hosts"]][:3] == HOSTILE[:3]
    assert summary["results"][1]["summary"] == f"torch differs: {HOSTILE[0]}"


def test_a_check_this_renderer_does_not_know_reads_as_keys_and_values(hostile_page: str) -> None:
    text = Page(hostile_page).visible_text
    assert "<script>alert(1)</script>" in text  # the unknown check's name, as a section title
    items = generic_details(
        {
            "count": 3,
            "ok": True,
            "names": ["a", "b"],
            "per_node": {"n1": 1.5},
            "rows": [{"a": 1, "b": None}],
            "deep": {"x": {"y": [1]}},
        }
    )
    shown = {kv.key: kv for kv in items}
    assert shown["count"].text == "3" and shown["ok"].text == "yes" and shown["names"].text == "a, b"
    assert shown["per_node"].table is not None and shown["per_node"].table.rows[0][1].text == "1.5"
    assert shown["rows"].table is not None and list(shown["rows"].table.head) == ["a", "b"]
    assert json.loads(shown["deep"].code) == {"x": {"y": [1]}}


# ------------------------------------------------------------------- all-reduce and DDP


def bandwidth_report() -> RunReport:
    """Four H100 nodes judged by the real allreduce and ddp judges: node3 slow, its ranks stragglers."""
    return make_synthetic.small_bandwidth_run()


def test_the_sweep_is_charted_on_a_log2_axis_with_the_pairs_and_a_pair_matrix() -> None:
    report = bandwidth_report()
    assert {r.check for r in report.results} == {"allreduce", "ddp"}
    blocks = allreduce.PRESENTATION.evidence(report)
    charts_ = [b for b in blocks if isinstance(b, view.Chart)]
    assert [c.title for c in charts_] == ["Bus bandwidth by message size", "Pair bandwidth"]
    sweep_svg = str(charts.draw(charts_[0].figure))
    # The world, then every pair test and re-test at its one size: node3's in red, on top.
    assert sweep_svg.count("<polyline") == 1 + len(report.results_for("allreduce")[0].details["pairs"])
    assert 'class="series bad strong"' in sweep_svg
    for tick in ("1 KiB", "1 MiB", "64 MiB"):
        assert f">{tick}</text>" in sweep_svg
    assert "all 4 nodes (16 ranks)" in sweep_svg
    matrix = str(charts.draw(charts_[1].figure))
    assert matrix.count('class="cell r-bad"') == 6  # node3's row and column
    assert matrix.count('class="cell r-good"') == 6
    assert charts_[0].data is not None and len(charts_[0].data.rows) == 17
    (transport,) = [b for b in blocks if isinstance(b, view.Table) and b.title.startswith("Transport")]
    assert transport.rows[0][0].text == "node[1-4]"


def test_ddp_charts_the_loss_and_the_step_time_per_rank_with_the_stragglers_marked() -> None:
    blocks = ddp.PRESENTATION.evidence(bandwidth_report())
    titles = [b.title for b in blocks if isinstance(b, view.Chart)]
    assert titles == ["Loss", "Compute step time per rank"]
    bars = str(charts.draw(blocks[1].figure)) if isinstance(blocks[1], view.Chart) else ""
    assert bars.count('class="bar bad"') == 3  # node3's ranks 9-11 (rank 8 is its GPU 0, not busy)
    assert "rank 9 node3" in bars
    assert isinstance(blocks[2], view.Note) and "identical on all 16 ranks" in blocks[2].text


def test_a_recorded_job_renders_its_sweep_pairs_and_training() -> None:
    report = make_synthetic.recorded_job_run(JOBS / "three_nodes.json")
    blocks = [*allreduce.PRESENTATION.evidence(report), *ddp.PRESENTATION.evidence(report)]
    titles = [b.title for b in blocks if isinstance(b, view.Chart)]
    assert titles[:2] == ["Bus bandwidth by message size", "Pair bandwidth"]
    assert "Loss" in titles and "Compute step time per rank" in titles
    assert all(charts.draw(c.figure).count("<") > 10 for c in blocks if isinstance(c, view.Chart))
    text = Page(html.render(report)).visible_text
    for result in report.results:
        assert result.summary in text


def test_a_thousand_nodes_chart_the_slowest_pairs_and_ranks_not_all_of_them(large: RunReport) -> None:
    blocks = [*allreduce.PRESENTATION.evidence(large), *ddp.PRESENTATION.evidence(large)]
    titles = [b.title for b in blocks if isinstance(b, view.Chart)]
    assert any(t.startswith("The 20 slowest of ") and t.endswith(" pairs") for t in titles)
    slowest = next(b for b in blocks if isinstance(b, view.Chart) and b.title.startswith("The 20 slowest"))
    assert "gpu0256" in str(charts.draw(slowest.figure))
    steps = next(b for b in blocks if isinstance(b, view.Chart) and b.title == "Compute step time per rank")
    assert "48 slowest of 7984 ranks" in steps.caption
    assert str(charts.draw(steps.figure)).count('class="bar bad"') == 7  # gpu0733's busy GPUs 1-7


# ------------------------------------------------------------------- charts


def test_log2_ticks_are_powers_of_two_thinned_to_fit() -> None:
    assert charts.log2_ticks(1024, 65536) == [2.0**k for k in range(10, 17)]
    ticks = charts.log2_ticks(1024, 2**30)
    assert len(ticks) <= 9 and ticks[0] == 1024 and all(math_is_power_of_two(t) for t in ticks)


def math_is_power_of_two(value: float) -> bool:
    return value > 0 and (int(value) & (int(value) - 1)) == 0


def test_nice_ticks_and_number_formats() -> None:
    assert charts.nice_ticks(0, 9.3) == [0, 2, 4, 6, 8, 10]
    assert charts.nice_ticks(0, 0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert units.binary_size(1024) == "1 KiB"
    assert units.binary_size(64 * 2**20) == "64 MiB"
    assert units.binary_size(1.5 * 2**30) == "1.5 GiB"
    assert units.significant(0.01234) == "0.0123"
    assert units.significant(12.345) == "12.3"
    assert units.significant(1234.5) == "1234"


def test_charts_escape_their_labels_and_have_a_size() -> None:
    svg = str(
        charts.line_chart(
            [charts.Series("<a&b>", [(1024, 1.0), (2048, 2.0)])],
            x=charts.Axis("size", "log2", units.binary_size),
            y=charts.Axis("busbw"),
            label='"><script>',
        )
    )
    assert "<a&b>" not in svg and "&lt;a&amp;b&gt;" in svg
    assert "<script>" not in svg
    assert re.search(r'viewBox="0 0 720 300" width="720" height="300"', svg)
    heat = str(
        charts.heatmap(
            ["a", "b"],
            ["a", "b"],
            {(0, 1): charts.Cell("st-fail", "x", "<t>")},
            label="m",
            row_axis="from",
            col_axis="to",
        )
    )
    assert heat.count("<rect") == 1 and "&lt;t&gt;" in heat


def test_no_data_draws_a_labelled_empty_chart_not_a_broken_one() -> None:
    svg = str(charts.line_chart([], x=charts.Axis("x"), y=charts.Axis("y"), label="nothing measured"))
    assert "nothing measured" in svg and "<polyline" not in svg


def test_an_interrupted_run_says_so() -> None:
    report = load(REPORTS / "healthy.json")
    stopped = RunReport(**{**report.__dict__, "interrupted": True, "exit_code": ExitCode.INTERRUPTED})
    text = Page(html.render(stopped)).visible_text
    assert "INTERRUPTED" in text and "130 interrupted" in text


def test_a_crowded_arp_table_finding_says_what_to_do() -> None:
    from checks.ports import PRESENTATION, judge_neighbour_limits
    from tests.test_ports import flat_cluster

    (finding,) = judge_neighbour_limits(flat_cluster({"10.10.0.0/16": 1100}))
    assert "gc_thresh1/2/3" in PRESENTATION.advice(finding)


def test_a_failed_run_says_which_nodes_to_use_and_what_to_do_with_the_others() -> None:
    page = html.render(load(REPORTS / "slow_node.json"))
    card = page[page.index('id="attention"') : page.index('id="grid"')]
    assert "Nodes to use" in card and "node[1-2]" in card and "2 good" in card
    bad = card[card.index("handback-bad") :]
    assert "node3" in bad and "allreduce" in bad and "drain it and have it looked at" in bad
    assert "scontrol update nodename=node3 state=drain" in card
    assert "node1</th>" not in bad  # a good node is not listed to leave out


def test_a_node_that_did_not_answer_is_to_be_rebooted_and_a_healthy_run_lists_no_hand_back() -> None:
    card = html.render(load(REPORTS / "unreachable.json"))
    assert "node4" in card[card.index("handback-bad") :] and "reboot it (it did not answer)" in card
    assert "Nodes to use" not in html.render(load(REPORTS / "healthy.json"))


# ------------------------------------------------------------------- the history section


def trend_entry(metric: str, node: str, part: str, values: list[float], now: float | None) -> dict[str, Any]:
    """A trend as the report's history key carries it (preflight/history/report_section.py)."""
    return {
        "metric": metric,
        "node": node,
        "part": part,
        "runs": len(values),
        "mean": sum(values) / len(values),
        "low": min(values),
        "high": max(values),
        "first_at": "2026-11-01T00:00:00Z",
        "last_at": "2026-11-20T12:00:00Z",
        "now": now,
        "values": values,
    }


def history_key(trends: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {
        "store": "/var/lib/preflight/history.sqlite",
        "since": "2026-10-21T12:00:00Z",
        "window_days": 30,
        "offenders": [],
        "flaky": [],
        "trends": trends,
        **more,
    }


def _sparklines(text: str) -> list[str]:
    return re.findall(r'<svg [^>]*class="chart sparkline".*?</svg>', text)


def test_the_history_section_draws_each_rate_with_this_runs_point_and_names_offenders_and_flaky() -> None:
    report = load(REPORTS / "healthy.json")
    first, second = report.hosts[0].name, report.hosts[1].name
    history = history_key(
        [
            trend_entry("busbw", first, "", [380.0, 382.0, 381.0, 300.0], 300.0),
            trend_entry("pair_busbw", first, second, [390.0, 391.0, 389.0], 389.0),
            trend_entry("tflops", second, "GPU-SERIAL-7", [600.0, 602.0], None),  # not measured in this run
        ],
        offenders=[
            {
                "by": "part",
                "name": "1652823054567",
                "others": [first, "gpu-old"],
                "failures": [
                    {
                        "started_at": "2026-11-02T10:00:00Z",
                        "node": "gpu-old",
                        "part": "1652823054567",
                        "check": "compute",
                        "cause": "slow_compute",
                        "status": "fail",
                    },
                    {
                        "started_at": "2026-11-19T10:00:00Z",
                        "node": first,
                        "part": "1652823054567",
                        "check": "compute",
                        "cause": "slow_compute",
                        "status": "fail",
                    },
                ],
            }
        ],
        flaky=[{"key": f"limits/{second}/shm", "node": second, "failed": 2, "checked": 5}],
    )
    text = html.render(dataclasses.replace(report, history=history))
    section = text[text.index('<section id="history"') : text.index('<section id="nodes"')]
    shown = Page(section).visible_text
    assert 'href="#history"' in text  # in the checks' navigation
    assert "/var/lib/preflight/history.sqlite" in shown and "(30 days)" in shown
    assert "1652823054567" in shown and "2026-11-19 10:00:00 UTC compute/slow_compute" in shown
    assert f"limits/{second}/shm" in shown
    lines = _sparklines(section)
    assert len(lines) == 3  # a run of three rates draws them all
    # This run's point is marked where it was measured; the dip is the first row, at 0.83x its mean.
    assert [line.count('class="spark-now"') for line in lines] == [1, 1, 0]
    assert f"{first}: 300 to 382 TFLOPS" not in section and f"{first}: 300 to 382 GB/s" in lines[0]
    assert "0.83x" in shown and f"{first} ↔ {second}" in shown and "not measured" in shown
    # Without the store, no section and no link.
    plain = html.render(report)
    assert 'id="history"' not in plain and 'href="#history"' not in plain


def test_a_thousand_nodes_of_eight_gpus_draw_the_rates_that_matter_and_fold_the_rest(
    large: RunReport,
) -> None:
    trends = []
    for i, host in enumerate(large.hosts):
        busbw = [380.0 + k % 5 for k in range(20)]
        trends.append(trend_entry("busbw", host.name, "", busbw, busbw[-1]))
        for g, gpu in enumerate(p for p in parts_of(host) if p.kind == "gpu"):
            rates = [600.0 + (k + g) % 7 for k in range(20)]
            if (i, g) == (417, 3):
                rates[-1] = 480.0  # named slower than its own past by this run's history finding
            trends.append(trend_entry("tflops", host.name, gpu.part, rates, rates[-1]))
    slow_gpu = trends[417 * 9 + 4]
    slower = CheckResult(
        "history",
        "warn",
        "gpu0418 GPU 3: compute rate 480.0 TFLOPS, 20% below its own median",
        ("gpu0418",),
        {"item": "slower_than_own_past", "metric": "tflops", "node": "gpu0418", "part": slow_gpu["part"]},
    )
    report = dataclasses.replace(large, results=(*large.results, slower), history=history_key(trends))
    text = html.render(report)
    section = text[text.index('<section id="history"') : text.index('<section id="nodes"')]
    assert len(section.encode()) < 250_000, f"{len(section.encode()):,} bytes"
    lines = _sparklines(section)
    assert 0 < len(lines) <= 40
    assert "gpu0418 GPU 3" in lines[0]  # the one slower than its own past comes first
    folded = section[section.index('<details class="history-nodes"') :]
    assert "<summary>Every node" in folded
    assert folded.count('<tr><th scope="row"') == len({t["node"] for t in trends})
    assert not _sparklines(folded)
