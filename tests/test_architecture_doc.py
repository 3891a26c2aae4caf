"""The worked example in docs/architecture.md is real code: it loads and judges as the text says."""

from __future__ import annotations

import re
import types
from pathlib import Path

from preflight.check import Check
from preflight.facts import NodeFacts

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _example() -> types.ModuleType:
    found = re.search(r"`checks/kernel.py`:\n\n```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert found, "the worked example is missing from docs/architecture.md"
    module = types.ModuleType("kernel_example")
    exec(compile(found.group(1), str(DOC), "exec"), module.__dict__)
    return module


def test_the_worked_example_names_the_node_on_another_kernel() -> None:
    example = _example()
    assert isinstance(example.CHECK, Check) and example.CHECK.name == "kernel"

    def node(kernel: str) -> NodeFacts:
        return NodeFacts({"os": {"kernel": kernel}})

    (finding,) = example.judge_kernel(
        {"gpu01": node("6.1.0-18"), "gpu02": node("6.1.0-18"), "gpu03": node("5.15.0-91")}
    )
    assert finding.status == "warn" and finding.hosts == ("gpu03",) and "5.15.0-91" in finding.summary
    (same,) = example.judge_kernel({"gpu01": node("6.1.0-18"), "gpu02": node("6.1.0-18")})
    assert same.status == "pass"
