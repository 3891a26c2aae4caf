"""The HTML report in a real browser: headless Chromium opens each recorded run from a file:// URL.

What a person sees: the verdict and the culprits, charts actually drawn, a search box that
filters the nodes; what the browser does: no request but the file itself, no console error
(a Content-Security-Policy violation would be one). Screenshots go to test-artifacts/html/.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from preflight.model import RunReport
from reports import html
from reports.html.text import Anchors
from reports.json_report import load
from reports.summary import headline
from tests.data.reports import make_faults, make_synthetic
from tests.test_html_report import culprit_names, history_key, trend_entry

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


pytestmark = pytest.mark.browser

CHROMIUM = Path(os.environ.get("PREFLIGHT_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPORTS = Path(__file__).parent / "data" / "reports"
JOBS = Path(__file__).parent / "data" / "jobs"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "html"
RECORDED = {p.stem: p for p in sorted(REPORTS.glob("*.json"))}
# Marks that make a chart: heatmap cells, lines, points, bars, GPU meters.
MARKS = "rect.cell, polyline, circle, rect.bar, g.meter rect, polygon"
VISIBLE_NODES = "#node-list details.node:not([hidden])"


def _on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    if _on_ci():
        pytest.fail(f"{reason} (CI must run the browser tests)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed")
    if not CHROMIUM.exists():
        _unavailable(f"no Chromium at {CHROMIUM} (set PREFLIGHT_CHROMIUM)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def reports() -> dict[str, RunReport]:
    found = {name: load(path) for name, path in RECORDED.items()}
    found["large_1000"] = make_synthetic.build()
    found["bandwidth_synthetic"] = make_synthetic.small_bandwidth_run()
    found["job_three_nodes"] = make_synthetic.recorded_job_run(JOBS / "three_nodes.json")
    found["faults"] = make_faults.faults_run()
    return found


@pytest.fixture(scope="module")
def files(reports: dict[str, RunReport], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("html")
    written = {}
    for name, report in reports.items():
        path = folder / f"{name}.html"
        path.write_text(html.render(report), encoding="utf-8")
        written[name] = path
    return written


@dataclass
class Loaded:
    page: Page
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def open_report(
    browser: Browser,
    path: Path,
    *,
    script: bool = True,
    scheme: Literal["light", "dark"] = "light",
    width: int = 1280,
    height: int = 900,
) -> Loaded:
    context = browser.new_context(
        viewport={"width": width, "height": height},
        color_scheme=scheme,
        java_script_enabled=script,
    )
    page = context.new_page()
    loaded = Loaded(page, path.as_uri())
    page.on("request", lambda request: loaded.requests.append(request.url))
    page.on(
        "console", lambda msg: loaded.errors.append(msg.text) if msg.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda exc: loaded.errors.append(str(exc)))
    page.goto(loaded.url, wait_until="load")
    return loaded


def normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def chart_sizes(page: Page) -> list[dict[str, Any]]:
    """Each chart's drawn size and how many of its marks have a non-zero box."""
    return list(
        page.evaluate(
            """(marks) => Array.from(document.querySelectorAll('svg.chart')).map((svg) => {
                const box = svg.getBoundingClientRect();
                const drawn = Array.from(svg.querySelectorAll(marks)).filter((el) => {
                    const b = el.getBBox();
                    return b.width > 0 || b.height > 0;
                }).length;
                const label = svg.querySelector('title').textContent;
                return {width: box.width, height: box.height, drawn: drawn, label: label};
            })""",
            MARKS,
        )
    )


def screenshot(loaded: Loaded, name: str, *, tall: bool = False) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / f"{name}.png"
    if tall:
        loaded.page.screenshot(
            path=str(target), clip={"x": 0, "y": 0, "width": 1280, "height": 6000}, full_page=True
        )
    else:
        loaded.page.screenshot(path=str(target), full_page=True)


REPORT_NAMES = [*RECORDED, "large_1000", "bandwidth_synthetic", "job_three_nodes"]


@pytest.mark.parametrize("name", REPORT_NAMES)
def test_a_report_shows_its_verdict_and_culprits_and_draws_its_charts_offline(
    browser: Browser, files: dict[str, Path], reports: dict[str, RunReport], name: str
) -> None:
    report = reports[name]
    loaded = open_report(browser, files[name])
    page = loaded.page
    try:
        label, _, sentence = headline(report).partition(" — ")
        badge = page.locator(".verdict-badge")
        assert badge.is_visible() and badge.inner_text().strip() == label
        assert normalized(page.locator("h1.sentence").inner_text()) == normalized(sentence)
        grid_names = [
            normalized(t)
            for t in page.locator("table.grid tbody th .mono, table.grid tbody th a").all_inner_texts()
        ]
        for culprit in culprit_names(report):
            assert culprit in grid_names, f"{culprit} has no row of its own"
            assert page.locator("table.grid tbody th", has_text=culprit).first.is_visible()
        sizes = chart_sizes(page)
        for chart in sizes:
            assert chart["width"] > 50 and chart["height"] > 30, chart
            assert chart["drawn"] > 0, chart
        if report.results_for("ports") and len(report.hosts) <= 64:
            assert any(c["label"] == "Port probes between nodes" for c in sizes)
        if any(r.details.get("sweep") for r in report.results_for("allreduce")):  # measured, not skipped
            assert any(c["label"].startswith("All-reduce bus bandwidth") for c in sizes)
        assert loaded.requests == [loaded.url]
        assert loaded.errors == []
        screenshot(loaded, name, tall=len(report.hosts) > 100)
    finally:
        page.context.close()


def test_the_search_box_filters_the_nodes(browser: Browser, files: dict[str, Path]) -> None:
    loaded = open_report(browser, files["drift"])
    page = loaded.page
    try:
        nodes = page.locator("#node-list details.node")
        assert nodes.count() == 4
        search = page.locator("#node-search")
        assert search.is_visible()
        # rich 12.0.0 is only in node3's environment.
        search.fill("12.0.0")
        expect(page.locator(VISIBLE_NODES)).to_have_count(1)
        assert page.locator("#node-list details.node:not([hidden]) .node-name").inner_text() == "node3"
        assert page.locator("#node-count").inner_text() == "1 of 4 nodes match"
        search.fill("")
        expect(page.locator(VISIBLE_NODES)).to_have_count(4)
        page.get_by_role("button", name="Expand all").click()
        assert all(nodes.nth(i).evaluate("d => d.open") for i in range(4))
        assert loaded.errors == []
    finally:
        page.context.close()


def test_the_search_box_finds_one_node_among_a_thousand(
    browser: Browser, files: dict[str, Path], reports: dict[str, RunReport]
) -> None:
    loaded = open_report(browser, files["large_1000"])
    page = loaded.page
    try:
        page.locator("#node-search").fill("535.154.05")
        expect(page.locator(VISIBLE_NODES)).to_have_count(1)
        assert page.locator("#node-list details.node:not([hidden]) .node-name").inner_text() == "gpu0417"
        assert page.locator("#node-count").inner_text() == "1 of 1000 nodes match"
        # A culprit's chip links to its node, which opens.
        page.locator("#node-search").fill("")
        page.locator("a.node-chip", has_text="gpu0417").first.click()
        anchor = Anchors(reports["large_1000"].hosts)("gpu0417")
        assert page.locator(f"details#{anchor}").evaluate("d => d.open")
        assert loaded.requests == [loaded.url]
        assert loaded.errors == []
    finally:
        page.context.close()


def test_without_script_the_page_is_complete_and_hides_only_the_search(
    browser: Browser, files: dict[str, Path]
) -> None:
    loaded = open_report(browser, files["blocked_port"], script=False)
    page = loaded.page
    try:
        assert page.locator(".verdict-badge").is_visible()
        assert not page.locator("#node-tools").is_visible()
        assert all(c["drawn"] > 0 for c in chart_sizes(page))
        page.locator("#node-list details.node summary").first.click()
        assert page.locator("#node-list details.node").first.evaluate("d => d.open")
        assert loaded.requests == [loaded.url]
        assert loaded.errors == []
    finally:
        page.context.close()


def test_dark_mode_and_print_have_their_own_look(browser: Browser, files: dict[str, Path]) -> None:
    loaded = open_report(browser, files["drift"], scheme="dark")
    page = loaded.page
    try:
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        red, green, blue = (int(v) for v in re.findall(r"\d+", background)[:3])
        assert red + green + blue < 120, background
        screenshot(loaded, "drift-dark")
        page.emulate_media(media="print")
        assert not page.locator(".checks-nav").is_visible()
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"
        screenshot(loaded, "drift-print")
        assert loaded.errors == []
    finally:
        page.context.close()


# A laptop's browser window and a phone's screen.
WIDTHS = {"laptop": 1300, "phone": 390}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["faults", "large_1000"])
def test_the_grid_shows_every_check_and_the_page_never_scrolls_sideways(
    browser: Browser, files: dict[str, Path], reports: dict[str, RunReport], name: str, width: str
) -> None:
    """A run with a finding in every check, and a run of 1,000 nodes: at 1,300 px every check's
    column is in sight without scrolling; on a 390 px phone the grid scrolls inside its card with
    its node column in place; at both the page itself never scrolls sideways, and no host name
    breaks across lines."""
    loaded = open_report(browser, files[name], width=WIDTHS[width], height=900 if width == "laptop" else 844)
    page = loaded.page
    try:
        screenshot(loaded, f"{name}-{width}", tall=len(reports[name].hosts) > 100)
        sizes = page.evaluate(
            """() => {
                const scroll = document.querySelector('#grid .table-scroll');
                const grid = scroll.querySelector('table.grid');
                return {page: document.documentElement.scrollWidth, window: window.innerWidth,
                        grid: grid.scrollWidth, room: scroll.clientWidth,
                        checks: grid.querySelectorAll('thead th.grid-check').length};
            }"""
        )
        assert sizes["page"] <= sizes["window"], sizes
        assert sizes["checks"] == len({r.check for r in reports[name].results})
        if width == "laptop":
            assert sizes["grid"] <= sizes["room"], sizes
        broken = page.evaluate(
            """() => Array.from(document.querySelectorAll('table.grid tbody th .nb'))
                .filter((el) => el.getClientRects().length > 1).map((el) => el.textContent)"""
        )
        assert broken == []
        if width == "phone":
            # Scrolled to its last check, the grid still shows which node each row is.
            page.evaluate("() => { document.querySelector('#grid .table-scroll').scrollLeft = 1e6; }")
            node = page.locator("table.grid tbody th.grid-node").first.bounding_box()
            card = page.locator("#grid").bounding_box()
            assert node is not None and card is not None and node["x"] >= card["x"]
            screenshot(loaded, f"{name}-{width}-scrolled")
        assert loaded.errors == []
    finally:
        page.context.close()


def test_the_history_section_draws_its_sparklines_and_opens_its_folded_nodes(
    browser: Browser, tmp_path: Path
) -> None:
    report = load(RECORDED["healthy"])
    trends = []
    for host in report.hosts:
        trends.append(trend_entry("busbw", host.name, "", [380.0, 384.0, 382.0, 350.0], 350.0))
        for g in range(12):
            trends.append(
                trend_entry("tflops", host.name, f"{host.name}-GPU{g}", [600.0, 602.0 + g, 601.0], 601.0)
            )
    path = tmp_path / "history.html"
    path.write_text(html.render(dataclasses.replace(report, history=history_key(trends))), encoding="utf-8")
    loaded = open_report(browser, path)
    page = loaded.page
    try:
        lines = [c for c in chart_sizes(page) if "GB/s over" in c["label"] or "TFLOPS over" in c["label"]]
        assert 0 < len(lines) < len(trends)  # more than a short run draws: the rest is folded
        assert all(c["width"] > 0 and c["height"] > 0 and c["drawn"] >= 2 for c in lines), lines
        folded = page.locator("details.history-nodes")
        expect(folded.locator("tbody tr").first).to_be_hidden()
        folded.locator("summary").click()
        expect(folded.locator("tbody tr")).to_have_count(len(report.hosts))
        expect(folded.locator("tbody tr").first).to_be_visible()
        page.locator("#history").scroll_into_view_if_needed()
        screenshot(loaded, "history_section")
        assert loaded.requests == [loaded.url]
        assert loaded.errors == []
    finally:
        page.context.close()


@pytest.mark.parametrize(("name", "lanes"), [("timeline", 4), ("timeline_quick_64", 65)])
def test_the_timeline_draws_every_lane_readably_with_its_phases(
    browser: Browser, files: dict[str, Path], reports: dict[str, RunReport], name: str, lanes: int
) -> None:
    loaded = open_report(browser, files[name])
    page = loaded.page
    try:
        section = page.locator("#timeline")
        section.scroll_into_view_if_needed()
        expect(section.locator("h2")).to_have_text("Where the time went")
        drawn = page.evaluate(
            """() => {
                const svg = document.querySelector('#timeline svg.chart.timeline');
                const box = (el) => {
                    const b = el.getBoundingClientRect();
                    return [b.top, b.bottom, b.left, b.right];
                };
                return {
                    svg: box(svg),
                    labels: Array.from(svg.querySelectorAll('text.node-label'))
                        .map((t) => [t.textContent, ...box(t)]),
                    bars: Array.from(svg.querySelectorAll('g rect.bar')).map(box),
                };
            }"""
        )
        labels = drawn["labels"]
        assert [label[0] for label in labels][1:] == [h.name for h in reports[name].hosts]
        assert len(labels) == lanes
        # Each lane's name is drawn apart from the next one's, at a size one can read.
        assert all(b[1] >= a[2] - 0.5 for a, b in itertools.pairwise(labels)), "lane names overlap"
        assert all(label[2] - label[1] >= 8 for label in labels)
        # Every bar has a size and lies inside the chart; the whole chart fits one screen's height.
        top, bottom, left, right = drawn["svg"]
        assert drawn["bars"] and all(b[1] > b[0] and b[3] > b[2] for b in drawn["bars"])
        assert all(
            top <= b[0] and b[1] <= bottom and left <= b[2] and b[3] <= right + 0.5 for b in drawn["bars"]
        )
        assert bottom - top < 1000
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        section.screenshot(path=str(ARTIFACTS / f"{name}-section.png"))
        assert loaded.requests == [loaded.url]
        assert loaded.errors == []
    finally:
        page.context.close()


def test_a_finding_opens_its_explanation_in_place(
    browser: Browser, files: dict[str, Path], reports: dict[str, RunReport]
) -> None:
    from preflight.explained import explained_items, explanation_for

    known = explained_items()
    report = reports["faults"]
    explained = [e for r in report.results if (e := explanation_for(r.check, r.details, known))]
    assert explained, "the faults report names no explained item"
    first = explained[0]
    loaded = open_report(browser, files["faults"])
    page = loaded.page
    try:
        findings = page.locator(
            "article.finding", has=page.locator(f"details.explain code:text-is('{first.key}')")
        )
        expect(findings).to_have_count(sum(1 for e in explained if e.key == first.key))
        finding = findings.first
        finding.scroll_into_view_if_needed()
        body = finding.locator("details.explain dl")
        expect(body).to_be_hidden()  # closed until asked for
        finding.locator("details.explain > summary").click()
        expect(body).to_be_visible()
        shown = normalized(body.inner_text())
        for heading, text in first.fields():
            assert heading.lower() in shown.lower()
            assert normalized(text.replace("`", "")) in shown
        # Every finding with an explained item has its explanation, and no more.
        assert page.locator("details.explain").count() == len(explained)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        finding.screenshot(path=str(ARTIFACTS / "finding-explained.png"))
        assert loaded.requests == [loaded.url]
        assert loaded.errors == []
    finally:
        page.context.close()
