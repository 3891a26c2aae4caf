"""Hostile node output is harmless in every format, and secrets never reach a report.

A real probe runs on this machine through the local transport, with an environment an
attacker (or an unlucky user) controls: secrets in variables and URLs, HTML, XML, ANSI
escapes and control characters in values the probe reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console

from preflight.model import CheckResult, HostReport, RunReport
from reports.terminal import print_report

SECRETS = {
    "HF_TOKEN": "hf_TOPSECRETTOKEN",  # not among the variables the probe collects at all
    "TORCH_HUB_TOKEN": "hub-SECRET-TOKEN-123",  # collected (TORCH_*), so it must be masked
    "NCCL_IB_PASSWORD": "ib-PASSWORD-456",
}
HOSTILE = "<script>alert(1)</script>\x1b[2J\x1b]0;owned\x07]]></x>&amp;\x00"


def test_secrets_and_hostile_values_from_a_node_are_harmless_in_every_format(tmp_path: Path) -> None:
    env = {
        **os.environ,
        **SECRETS,
        "NCCL_DEBUG": HOSTILE.replace("\x00", ""),  # an environment cannot carry NUL
        "TORCH_HOME": "https://trainer:PLAINPASSWORD@cache.internal/torch",
        "NO_COLOR": "1",
    }
    run = subprocess.run(
        [sys.executable, "-m", "preflight", "check", "--python", sys.executable,
         "--json", "run.json", "--junit", "run.xml", "--only", "versions"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    outputs = {
        "terminal": run.stdout + run.stderr,
        "json": (tmp_path / "run.json").read_text(),
        "junit": (tmp_path / "run.xml").read_text(),
    }
    for name, text in outputs.items():
        for secret in [*SECRETS.values(), "PLAINPASSWORD"]:
            assert secret not in text, f"{secret} leaked into the {name} output"
    facts = json.loads(outputs["json"])["hosts"][0]["facts"]
    assert "HF_TOKEN" not in facts["env"]
    assert facts["env"]["TORCH_HUB_TOKEN"] == facts["env"]["NCCL_IB_PASSWORD"] == "***"
    assert facts["env"]["TORCH_HOME"] == "https://trainer:***@cache.internal/torch"
    # JSON carries the value faithfully (escaped by JSON itself); JUnit stays well-formed.
    assert facts["env"]["NCCL_DEBUG"].startswith("<script>")
    ET.fromstring(outputs["junit"])


def test_the_terminal_prints_node_text_without_escape_sequences_or_markup() -> None:
    host = HostReport(f"gpu01{HOSTILE}", "10.0.0.1", HOSTILE, True)
    result = CheckResult("versions", "fail", f"[bold red]torch[/] differs on {HOSTILE}", (host.name,))
    report = RunReport.build(
        tool_version="0.1.0", started_at="2026-11-22T10:00:00Z", duration_s=1, hosts=[host], results=[result]
    )
    console = Console(record=True, width=300, force_terminal=True, color_system=None)
    print_report(report, console)
    text = console.export_text()
    assert "\x1b" not in text and "\x07" not in text and "\x00" not in text
    assert "[bold red]torch[/]" in text  # printed as text, never interpreted as markup
