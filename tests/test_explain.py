"""`preflight explain`: every finding item of docs/names.md explained once, beside the check that
owns it; thresholds read from their settings' declarations; docs/findings.md generated from the
same; unknown items a one-line usage error naming the nearest."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from checks.job.settings import ComputeSection
from preflight.explain import resolve_threshold
from preflight.explained import explain_command, explained_items, explanation_for, findings_markdown, lookup
from preflight.model import CheckResult

ROOT = Path(__file__).resolve().parent.parent
NAMES = ROOT / "docs" / "names.md"


def _preflight(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "preflight", *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def names_md_items() -> dict[str, set[str]]:
    """Each check's item values as docs/names.md lists them (its `item` table's backticked words,
    the history store's from its own list)."""
    text = NAMES.read_text()
    table = text.split("## Findings: `details.item`", 1)[1].split("\n## ", 1)[0]
    items: dict[str, set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        owner = re.match(r"`([a-z_]+)`", cells[0]) if len(cells) == 2 else None
        if owner is None:
            continue
        check = owner.group(1)
        # Words in parentheses describe an item; the keys named there are not items.
        listed = re.sub(r"\([^()]*\)", "", cells[1])
        items[check] = set(re.findall(r"`([a-z0-9_]+)`", listed)) - {"cause", "item"}
    history = text.split("## Findings of the history store: `history`", 1)[1].split("\n## ", 1)[0]
    items["history"] = set(re.findall(r"^- `([a-z_]+)`", history, flags=re.M))
    return items


def test_every_explained_item_is_one_docs_names_md_lists_for_its_check() -> None:
    listed = names_md_items()
    for explained in explained_items():
        assert explained.explanation.item in listed.get(explained.check, set()), explained.key


def test_each_item_is_explained_once_per_check_and_every_field_says_something() -> None:
    keys = [e.key for e in explained_items()]
    assert len(keys) == len(set(keys))
    for explained in explained_items():
        e = explained.explanation
        for text in (e.means, e.measured, e.first, e.healthy):
            assert len(text.split()) >= 5, explained.key
        assert "{" not in explained.threshold, explained.key


def test_docs_findings_md_is_generated_from_the_explanations() -> None:
    # python -m preflight.explained docs/findings.md rewrites it.
    assert (ROOT / "docs" / "findings.md").read_text() == findings_markdown()


def test_a_threshold_shows_its_setting_with_the_value_its_declaration_gives() -> None:
    run = _preflight("explain", "slow_compute")
    assert run.returncode == 0, run.stderr
    declared = ComputeSection().slow_ratio
    assert f"[compute] slow_ratio = {declared!r}" in " ".join(run.stdout.split())
    for heading in ("What it means", "How it is measured", "Threshold", "What to do first"):
        assert heading in run.stdout


def test_a_threshold_naming_a_setting_that_does_not_exist_is_refused() -> None:
    with pytest.raises(KeyError, match="no setting 'slow_ration'"):
        resolve_threshold("compute", "below {slow_ration}", {"compute": ComputeSection})
    with pytest.raises(KeyError, match=r"\[nowhere\]"):
        resolve_threshold("compute", "below {nowhere.x}", {"compute": ComputeSection})


def test_an_unknown_item_is_one_line_naming_the_nearest_and_exit_2() -> None:
    run = _preflight("explain", "slow_compte")
    assert run.returncode == 2
    assert run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert "'slow_compte'" in line and "slow_compute" in line


def test_check_slash_item_picks_one_check_s_explanation() -> None:
    (found,) = lookup("compute/slow_once")
    assert found.check == "compute"
    with pytest.raises(Exception, match="no finding item 'ports/slow_once'"):
        lookup("ports/slow_once")


def test_a_finding_finds_its_explanation_and_the_report_names_the_command() -> None:
    slow = CheckResult("compute", "fail", "node2 is slow at compute", ("node2",), {"item": "slow_compute"})
    passed = CheckResult("compute", "pass", "every rank burned", (), {"item": "slow_compute"})
    unreached = CheckResult("connect", "error", "node3: no answer", ("node3",), {"cause": "timeout"})
    known = explained_items()
    found = explanation_for("compute", slow.details, known)
    assert found is not None and found.key == "compute/slow_compute"
    command = explain_command([slow, passed, unreached, slow], known)
    expected = ["compute/slow_compute"]
    if explanation_for("connect", unreached.details, known) is not None:
        expected.append("connect/timeout")
    assert command == "preflight explain " + " ".join(expected)
    assert explain_command([passed], known) is None


def test_with_no_item_every_explained_item_is_listed() -> None:
    run = _preflight("explain")
    assert run.returncode == 0
    listed = [line.split()[0] for line in run.stdout.splitlines()]
    assert listed == [e.key for e in explained_items()]


def test_every_item_docs_names_md_lists_is_explained() -> None:
    have = {(e.check, e.explanation.item) for e in explained_items()}
    listed = sorted((check, item) for check, items in names_md_items().items() for item in items)
    assert [pair for pair in listed if pair not in have] == []


def test_the_terminal_report_ends_with_the_command_that_explains_what_it_named() -> None:
    # A run recorded on the lab cluster with the master's rendezvous port blocked.
    recorded = ROOT / "tests" / "data" / "reports" / "blocked_port.json"
    run = subprocess.run(
        [sys.executable, "-m", "preflight", "report", str(recorded)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    assert run.returncode == 1, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert any(line.startswith("bad node") for line in lines)  # the hand-back comes before it
    assert lines[-1] == "what each finding means: preflight explain ports/probe"
