"""The worked example in docs/architecture.md is real code: registered as the text says (one
registry line), it is judged, read from a config file, set from the command line and run."""

from __future__ import annotations

import json
import os
import re
import sys
import types
from pathlib import Path

import pytest

import checks
from preflight import cli
from preflight.check import Check
from preflight.config_file import load_config
from preflight.errors import ConfigError, ExitCode
from preflight.facts import NodeFacts

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The example's code, loaded as a module (imported, as far as its dataclasses can tell)."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(r"`checks/kernel/__init__.py`[^\n]*\n[^\n]*:\n\n```python\n(.*?)```", text, re.S)
    assert found, "the worked example is missing from docs/architecture.md"
    module = types.ModuleType("kernel_example")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(found.group(1), str(DOC), "exec"), module.__dict__)
    return module


@pytest.fixture
def kernel(example: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The example, registered after ``versions`` as the text says."""
    registered = checks.registry()
    at = [c.name for c in registered].index("versions") + 1
    monkeypatch.setattr(checks, "registry", lambda: (*registered[:at], example.CHECK, *registered[at:]))
    return example


def node(kernel: str) -> NodeFacts:
    return NodeFacts({"os": {"kernel": kernel}})


def test_the_worked_example_names_the_node_on_another_kernel(example: types.ModuleType) -> None:
    assert isinstance(example.CHECK, Check) and example.CHECK.name == "kernel"

    (finding,) = example.judge_kernel(
        {"gpu01": node("6.1.0-18"), "gpu02": node("6.1.0-18"), "gpu03": node("5.15.0-91")}
    )
    assert finding.status == "warn" and finding.hosts == ("gpu03",) and "5.15.0-91" in finding.summary
    (same,) = example.judge_kernel({"gpu01": node("6.1.0-18"), "gpu02": node("6.1.0-18")})
    assert same.status == "pass"


def test_the_worked_example_fails_a_kernel_the_config_does_not_allow(example: types.ModuleType) -> None:
    nodes = {"gpu01": node("6.1.0-18"), "gpu02": node("6.8.0-31")}
    (finding,) = example.judge_kernel(nodes, ("6.1.*",))
    assert finding.status == "fail" and finding.hosts == ("gpu02",) and "6.8.0-31" in finding.summary
    (allowed,) = example.judge_kernel(nodes, ("6.1.*", "6.8.*"))
    assert allowed.status == "warn"  # allowed, and still not the same on both


def test_the_registered_example_reads_its_table(kernel: types.ModuleType, tmp_path: Path) -> None:
    config = tmp_path / "preflight.toml"
    config.write_text('[run]\nfanout = 8\n[kernel]\nallow = ["6.1.*", "6.8.*"]\n')
    assert load_config(config).section(kernel.KernelSection).allow == ("6.1.*", "6.8.*")
    config.write_text('[kernel]\nalow = ["6.1.*"]\n')
    with pytest.raises(ConfigError, match=r"preflight.toml:2: unknown key kernel.alow \(known: allow\)"):
        load_config(config)


def test_the_registered_example_takes_its_option_and_runs(
    kernel: types.ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["list"]) == ExitCode.OK
    assert "kernel " in capsys.readouterr().out
    config = tmp_path / "preflight.toml"
    config.write_text('[kernel]\nallow = ["*"]\n')  # any kernel: the option below narrows it
    args = ["check", "--python", sys.executable, "--config", str(config), "--only", "kernel", "-q"]
    # The option is checked before any node is asked.
    assert cli.main([*args, "--kernel-allow", ","]) == ExitCode.USAGE_ERROR
    assert "--kernel-allow: give one or more kernel patterns" in capsys.readouterr().err

    code = cli.main([*args, "--kernel-allow", "0.0.*", "--json", str(tmp_path / "run.json")])
    results = json.loads((tmp_path / "run.json").read_text())["results"]
    (finding,) = [r for r in results if r["check"] == "kernel"]
    assert code == ExitCode.CHECK_FAILED, finding
    assert finding["status"] == "fail" and os.uname().release in finding["summary"]
