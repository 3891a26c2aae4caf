"""The shape of the code, held by tests: imports run one way, and modules stay small.

- The core (``preflight``) knows neither ``checks`` nor ``reports``, except where it must:
  the registry (``preflight.registry``) finds the checks, the command line picks renderers.
- Renderers (``reports``) never import a check: they read the run model and each check's
  presentation through the registry. Checks never import a renderer.
- The job package (``checks.job``) never imports the checks that judge its outcome.
- The core names no check: what it knows of one (settings, options, profiles, expected
  duration, the check an unreached node is listed under) comes through the registry.
- Node code (``preflight.bundle.is_node_module``) imports only node code: it is shipped to the
  nodes in bundles and runs with the node's Python, which has nothing else of preflight.
- No import cycle anywhere, counting imports inside functions and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from preflight.bundle import is_node_module

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("preflight", "checks", "reports")
MAX_LINES = 600
# The checks judged in the job's outcome: the job package imports none of them.
JUDGES_OF_THE_JOB = ("checks.allreduce", "checks.ddp", "checks.compute", "checks.intranode", "checks.rails")
# Keys of the facts document that happen to be check names too (preflight/facts.py reads them):
# facts, not checks. The node scripts (preflight.node) gather the facts on the nodes, where no
# check runs, and are not looked at.
FACTS_KEYS = {"preflight.facts": {"limits", "hardware"}}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[str]:
    """Every project module ``name`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` imports the module; ``from mod import name``, the module.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for target in targets:
            # The deepest project module the import names.
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


GRAPH = {name: sorted(set(_imports(name, path))) for name, path in MODULES.items()}


def _allowed(source: str, target: str) -> bool:
    top, target_top = source.split(".")[0], target.split(".")[0]
    if is_node_module(source):
        return is_node_module(target)
    if top == "preflight" and target_top != "preflight":
        return (source, target_top) in {("preflight.registry", "checks"), ("preflight.cli", "reports")}
    if top == "reports":
        return target_top != "checks"
    if top == "checks" and target_top == "reports":
        return False
    return not (source.startswith("checks.job") and target.startswith(JUDGES_OF_THE_JOB))


def test_the_graph_sees_the_project() -> None:
    assert "preflight.registry" in GRAPH and "checks" in GRAPH["preflight.registry"]
    assert len(MODULES) > 30


def test_imports_run_one_way() -> None:
    forbidden = [f"{s} -> {t}" for s, targets in GRAPH.items() for t in targets if not _allowed(s, t)]
    assert forbidden == []


def test_there_is_no_import_cycle() -> None:
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in GRAPH.get(name, []):
            if state.get(target) == "open":
                cycles.append([*trail[trail.index(target) :], target] if target in trail else [name, target])
            elif target not in state:
                visit(target, [*trail, target])
        state[name] = "done"

    for name in GRAPH:
        if name not in state:
            visit(name, [name])
    assert cycles == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines"


def _check_names() -> set[str]:
    from preflight.registry import all_checks

    return {c.name for c in all_checks()}


def _core_names_of_checks() -> list[str]:
    """Every string literal of the core equal to a check's name, as ``module:line: 'name'``."""
    names = _check_names()
    found = []
    for module, path in MODULES.items():
        if not module.startswith("preflight.") or module == "preflight.registry":
            continue
        if module.startswith("preflight.node"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = isinstance(node, ast.Constant) and node.value in names
            if named and node.value not in FACTS_KEYS.get(module, set()):
                found.append(f"{module}:{node.lineno}: {node.value!r}")
    return found


def test_the_core_names_no_check() -> None:
    assert _core_names_of_checks() == []


def test_the_core_test_sees_a_check_named_in_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above fails where the core names a check, here a check named like a core literal."""
    monkeypatch.setattr(sys.modules[__name__], "_check_names", lambda: {"python3", "limits"})
    found = _core_names_of_checks()
    assert any(entry.startswith("preflight.config:") and "'python3'" in entry for entry in found)
    assert not any(entry.startswith("preflight.facts:") for entry in found)  # a facts key
