"""Node code is shipped as one bundle per script: it runs on a bare interpreter that has nothing of
preflight, on the oldest Python nodes may have (3.8), imports nothing of the controller, and stays
within its size cap."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from preflight import bundle
from preflight.bundle import BundleError, docstrings, for_nodes, is_node_module, locate, node_modules, pack

ROOT = Path(__file__).resolve().parent.parent
# The oldest Python the README says nodes may have.
OLDEST = (3, 8)
# What one bundle may weigh: it is sent to every node, a thousand at a time.
BUNDLE_CAP_BYTES = 64 * 1024


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _path(name: str) -> Path:
    module = locate(name)
    assert module is not None, f"{name} not found"
    return module.path


NODE_MODULES = sorted(
    name
    for package in ("preflight", "checks")
    for path in (ROOT / package).rglob("*.py")
    if is_node_module(name := _module_name(path))
)
# The node scripts the controller runs: node modules that run as __main__.
ENTRIES = [n for n in NODE_MODULES if '__name__ == "__main__"' in _path(n).read_text(encoding="utf-8")]


def _oldest_python() -> str | None:
    found = sorted(Path("/root/.pyenv/versions").glob("3.8.*/bin/python3.8"))
    for candidate in (*found, Path("/usr/bin/python3.8"), Path("/usr/local/bin/python3.8")):
        if candidate.is_file():
            return str(candidate)
    return None


def test_the_node_side_is_found() -> None:
    assert "preflight.node.facts" in ENTRIES and "checks.ports.node" in ENTRIES
    assert "preflight.node.shared" in NODE_MODULES


@pytest.mark.parametrize("name", NODE_MODULES)
def test_every_node_module_parses_as_the_oldest_python_nodes_may_have(name: str) -> None:
    module = locate(name)
    assert module is not None
    ast.parse(module.source, str(module.path), feature_version=OLDEST)


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_node_script_imports_only_node_code_and_stays_within_its_cap(entry: str) -> None:
    modules = node_modules(entry)  # raises on a module of the controller
    assert entry in modules
    size = len(pack(entry))
    assert size <= BUNDLE_CAP_BYTES, f"{entry}'s bundle is {size:,} bytes (cap {BUNDLE_CAP_BYTES:,})"


def test_a_node_module_that_imports_the_controller_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from preflight import bundle

    real = bundle.locate

    def locate_with_a_bad_module(name: str) -> bundle.Module | None:
        if name == "checks.example.node":
            module = real("preflight.node.shared")
            assert module is not None
            return bundle.Module(name, module.path, False)
        return real(name)

    monkeypatch.setattr(bundle, "locate", locate_with_a_bad_module)
    monkeypatch.setattr(bundle.Module, "source", property(lambda self: "import preflight.config\n"))
    with pytest.raises(BundleError, match=r"checks.example.node imports preflight.config"):
        bundle.node_modules("checks.example.node")


NESTED_IMPORT = """
def gather():
    try:
        import json
    except ImportError:
        return None
    else:
        class Reader:
            def read(self):
                with open("x") as handle:
                    match handle.read():
                        case "":
                            from preflight import config
"""


def test_an_import_nested_in_functions_classes_and_blocks_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    from preflight import bundle

    module = locate("preflight.node.shared")
    assert module is not None
    monkeypatch.setattr(bundle.Module, "source", property(lambda self: NESTED_IMPORT))
    assert list(bundle.project_imports(module)) == ["preflight.config"]


def _run_bundle(python: str, entry: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    # Isolated (-I): no PYTHONPATH, no current directory, no user site: nothing of preflight but the
    # bundle itself.
    return subprocess.run(
        [python, "-I", "-", *args], input=pack(entry), capture_output=True, cwd=tmp_path, timeout=120
    )


def test_the_facts_bundle_runs_on_a_bare_interpreter(tmp_path: Path) -> None:
    done = _run_bundle(sys.executable, "preflight.node.facts", tmp_path, json.dumps({"skip": ["torch"]}))
    assert done.returncode == 0, done.stderr.decode()
    document = json.loads(done.stdout)
    assert document["probe_version"] == 1 and document["facts"]["hostname"]


def test_the_facts_bundle_runs_on_the_oldest_python(tmp_path: Path) -> None:
    python = _oldest_python()
    assert python is not None, "no Python 3.8 interpreter on this machine (pyenv's 3.8 is expected)"
    done = _run_bundle(python, "preflight.node.facts", tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["facts"]["python"]["version"].startswith("3.8.")


def _without_docstrings(tree: ast.AST) -> str:
    for string in docstrings(tree):
        string.value = ""
    return ast.dump(tree)


@pytest.mark.parametrize("name", NODE_MODULES)
def test_a_node_module_is_shipped_without_comments_and_docstrings_meaning_the_same_on_the_same_lines(
    name: str,
) -> None:
    source = _path(name).read_text(encoding="utf-8")
    shipped = for_nodes(source)
    assert _without_docstrings(ast.parse(shipped)) == _without_docstrings(ast.parse(source))
    assert shipped.count("\n") == source.count("\n")
    assert [line for line in shipped.splitlines() if line.lstrip().startswith("#")] == []
    assert len(shipped) < len(source) or '"""' not in source


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of bundles of its own, and nothing packed yet in this process."""
    monkeypatch.setenv(bundle.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(bundle, "_packed", {})
    return tmp_path / "cache"


def _as_next_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Forget this process's bundles as a new run would, and list the entries packed from then on."""
    packed: list[str] = []
    real = bundle._pack

    def counted(entry: str, carried: Sequence[str]) -> tuple[bytes, list[bundle.Module]]:
        packed.append(entry)
        return real(entry, carried)

    monkeypatch.setattr(bundle, "_packed", {})
    monkeypatch.setattr(bundle, "_pack", counted)
    return packed


def test_a_bundle_is_packed_once_and_served_from_the_cache_in_later_runs(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = bundle.bundle("checks.ports.node")
    assert first == pack("checks.ports.node")
    assert len(list(fresh_cache.glob("bundles/*.json"))) == 1
    packed = _as_next_run(monkeypatch)
    assert bundle.bundle("checks.ports.node") == first
    assert packed == []


@pytest.mark.parametrize("changed", ["module", "folder"])
def test_a_bundle_is_packed_again_when_a_module_or_its_folder_changed(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch, changed: str
) -> None:
    bundle.bundle("checks.ports.node")
    path = _path("checks.ports.node")
    touched = path if changed == "module" else path.parent
    before = touched.stat()
    packed = _as_next_run(monkeypatch)
    try:
        os.utime(touched, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
        served = bundle.bundle("checks.ports.node")
    finally:
        os.utime(touched, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert packed == ["checks.ports.node"]
    assert served == pack("checks.ports.node")


def test_a_cache_that_cannot_be_written_costs_only_the_packing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n")
    monkeypatch.setenv(bundle.CACHE_ENV, str(blocked))
    monkeypatch.setattr(bundle, "_packed", {})
    assert bundle.bundle("checks.ports.node") == pack("checks.ports.node")
    packed = _as_next_run(monkeypatch)
    bundle.bundle("checks.ports.node")
    assert packed == ["checks.ports.node"]
