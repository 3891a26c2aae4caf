"""Node code shipped as one script: an entry module and every node module it imports.

Node code is written as ordinary modules that import each other by their real names
(``from preflight.node.shared import error_text``), so that the controller's tests, mypy and
editors follow them like any other code. A node has none of them installed: :func:`bundle`
packs the entry module and the node modules it imports, directly or not, into one Python
source, with the node modules it is asked to carry besides (those the entry imports by a name it
is sent: the job's phases). Run by the node's interpreter (as the standard input of
``python -``, through :data:`preflight.probes.STREAM_BOOTSTRAP`, or by a staying host), that
source serves them from memory through a finder on ``sys.meta_path`` and runs the entry module
as ``__main__``, as ``python -m`` would. Nothing is written to the node's disk.

A node module is a module of the project with a part named ``node`` or ``node_*`` in its dotted
name (``preflight.node.facts``, ``checks.ports.node``, ``checks.job.node.harness``). It imports
the standard library, the training stack where the node has it (torch, pynvml), and other node
modules; never the controller (``tests/test_architecture.py`` holds it). The packages above a
node module that are not node code themselves (``preflight``, ``checks.job``) are served empty.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.util
import io
import json
import os
import sys
import threading
import tokenize
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from preflight.errors import InputError
from preflight.files import write_atomic

# The top-level packages node modules live in.
ROOTS = ("preflight", "checks")


class BundleError(Exception):
    """A node module imports what cannot be shipped (a module of the controller), or is missing."""


def is_node_module(name: str) -> bool:
    """Whether the module ``name`` (dotted) is node code, shipped to nodes in bundles."""
    parts = name.split(".")
    return parts[0] in ROOTS and any(p == "node" or p.startswith("node_") for p in parts[1:])


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")


@cache
def _root_dir(top: str) -> Path:
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise BundleError(f"package {top!r} not found")
    return Path(next(iter(spec.submodule_search_locations)))


def locate(name: str) -> Module | None:
    """The source file of the project module ``name``, without importing it; None if there is none."""
    top, *rest = name.split(".")
    if top not in ROOTS:
        return None
    base = _root_dir(top).joinpath(*rest)
    if (base / "__init__.py").is_file():
        return Module(name, base / "__init__.py", True)
    if rest and base.with_suffix(".py").is_file():
        return Module(name, base.with_suffix(".py"), False)
    return None


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of ``body`` and of the blocks nested in it (functions, classes, branches,
    handlers, cases), never looking into expressions: an import is a statement, and expressions
    are most of a module's syntax tree."""
    for statement in body:
        yield statement
        for _, value in ast.iter_fields(statement):
            if not isinstance(value, list):
                continue
            for item in value:
                if isinstance(item, ast.stmt):
                    yield from _statements([item])
                elif isinstance(item, ast.ExceptHandler | ast.match_case):
                    yield from _statements(item.body)


def project_imports(module: Module) -> Iterator[str]:
    """The project modules ``module`` imports, anywhere in its body (``from pkg import mod``
    counts as ``pkg.mod`` where that is a module)."""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for node in _statements(ast.parse(module.source, str(module.path)).body):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if locate(f"{base}.{a.name}") else base for a in node.names]
        for target in targets:
            if target.split(".")[0] in ROOTS:
                yield target


def node_modules(entry: str) -> dict[str, Module]:
    """``entry`` and every node module it imports, directly or not, by name.

    Raises :class:`BundleError` when one of them imports a module of the project that is not
    node code: the node would not have it."""
    found: dict[str, Module] = {}
    pending = [entry]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        module = locate(name)
        if module is None or not is_node_module(name):
            raise BundleError(f"{name} is not a node module (imported from a node module)")
        found[name] = module
        for target in project_imports(module):
            if not is_node_module(target):
                raise BundleError(f"{name} imports {target}, which is not node code (nodes do not have it)")
            pending.append(target)
    return found


# The start of every bundle: serves the packed modules and runs the entry module as __main__. It runs
# on the node's Python (3.8 or newer) and keeps what the script host handed over
# (``__preflight_source__``, ``__preflight_cleanup__``) in the entry module's globals.
_LOADER = """\
def _preflight_bundle(packed, entry, handed):
    import base64, importlib.abc, importlib.util, json, linecache, runpy, sys, zlib

    modules = json.loads(zlib.decompress(base64.b64decode(packed)).decode("utf-8"))

    class Bundle(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
        def find_spec(self, name, path=None, target=None):
            if name not in modules:
                return None
            package = modules[name][0]
            return importlib.util.spec_from_loader(name, self, origin="preflight-bundle", is_package=package)

        def is_package(self, name):
            return modules[name][0]

        def get_source(self, name):
            return modules[name][1]

        def get_code(self, name):
            source = modules[name][1]
            filename = "<preflight %s>" % name
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            return compile(source, filename, "exec", dont_inherit=True)

        def exec_module(self, module):
            exec(self.get_code(module.__name__), module.__dict__)

    sys.meta_path.insert(0, Bundle())
    runpy.run_module(entry, init_globals=handed, run_name="__main__")


_preflight_bundle(
    PACKED,
    ENTRY,
    {k: v for k, v in globals().items() if k.startswith("__preflight_")},
)
"""


def docstrings(tree: ast.AST) -> Iterator[ast.Constant]:
    """The docstrings of a parsed module: its own, its classes' and its functions'."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                yield from [first.value] if isinstance(first.value.value, str) else []


def for_nodes(source: str) -> str:
    """``source`` as a node runs it: its comments cut and its docstrings emptied, every line where
    it was (a traceback on the node names the lines of the module as written); a node is sent no
    words meant for its readers here."""
    starts = {string.lineno for string in docstrings(ast.parse(source))}
    lines = source.splitlines(keepends=True)
    cuts: list[tuple[int, int, int, int, str]] = []
    first_on_line: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        (row, column), (end_row, end_column) = token.start, token.end
        if token.type == tokenize.COMMENT:
            cuts.append((row, column, end_row, end_column, ""))
        elif token.type == tokenize.STRING and row in starts and row not in first_on_line:
            empty = '""' if row == end_row else '"""' + "\n" * (end_row - row) + '"""'
            cuts.append((row, column, end_row, end_column, empty))
        if token.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL, tokenize.NEWLINE):
            first_on_line.add(row)
    for row, column, end_row, end_column, text in reversed(cuts):
        before, after = lines[row - 1][:column], lines[end_row - 1][end_column:]
        if not text:
            before = before.rstrip()
        lines[row - 1 : end_row] = [before + text + after]
    return "".join(lines)


def pack(entry: str, carried: Sequence[str] = ()) -> bytes:
    """The bundle of ``entry``: one Python source that runs it as ``__main__`` wherever it is run,
    carrying the node modules ``carried`` (and those they import) for it to import by name."""
    return _pack(entry, carried)[0]


def _pack(entry: str, carried: Sequence[str]) -> tuple[bytes, list[Module]]:
    """:func:`pack`'s bundle, and the modules it was packed from."""
    modules = node_modules(entry)
    for name in carried:
        modules.update(node_modules(name))
    served: dict[str, tuple[bool, str]] = {}
    for name, module in sorted(modules.items()):
        parts = name.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            if parent not in modules:
                served.setdefault(parent, (True, ""))  # a package above node code, served empty
        served[name] = (module.is_package, for_nodes(module.source))
    packed = base64.b64encode(zlib.compress(json.dumps(served, sort_keys=True).encode("utf-8"), 9))
    head = f"# preflight node bundle: {entry} and {len(modules) - 1} node modules it imports\n"
    body = _LOADER.replace("PACKED", repr(packed.decode("ascii"))).replace("ENTRY", repr(entry))
    return (head + body).encode("ascii"), list(modules.values())


# Packing parses and tokenizes every module a bundle carries: about a fifth of a second of the
# controller's CPU per bundle, in every run, while the nodes wait for their first script. So a
# bundle is kept between runs, under the user's cache directory, beside the stamp of the files it
# was packed from (each module, the folder it lies in, this packer): it is used again only while
# every one of them is as it was (a module edited, added or removed beside them changes the stamp).
CACHE_ENV = "PREFLIGHT_CACHE_DIR"


def cache_dir() -> Path | None:
    """Where bundles are kept: ``$PREFLIGHT_CACHE_DIR``, else ``$XDG_CACHE_HOME/preflight`` (by
    default ``~/.cache/preflight``), in its folder ``bundles``; None for a user without a home."""
    if os.environ.get(CACHE_ENV):
        base = Path(os.environ[CACHE_ENV])
    elif os.environ.get("XDG_CACHE_HOME"):
        base = Path(os.environ["XDG_CACHE_HOME"]) / "preflight"
    else:
        try:
            base = Path.home() / ".cache" / "preflight"
        except RuntimeError:  # no HOME, and no entry in the password database
            return None
    return base / "bundles"


def _stamp(paths: Iterable[Path]) -> list[list[Any]]:
    """Each path with its modification time and size, in order; raises OSError for one that is gone."""
    stamped = []
    for path in sorted(set(paths)):
        status = path.stat()
        stamped.append([str(path), status.st_mtime_ns, status.st_size])
    return stamped


def _sources(modules: Iterable[Module]) -> set[Path]:
    files = {module.path for module in modules}
    return {*files, *(path.parent for path in files), Path(__file__)}


def _cache_file(entry: str, carried: Sequence[str]) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    key = json.dumps([entry, sorted(carried), sys.version, str(Path(__file__).resolve())])
    return folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def _kept(entry: str, carried: Sequence[str]) -> bytes | None:
    """The bundle kept from an earlier run, if every file it was packed from is unchanged."""
    source = _cache_file(entry, carried)
    if source is None:
        return None
    try:
        kept = json.loads(source.read_bytes())
        if _stamp(Path(path) for path, _, _ in kept["stamp"]) == kept["stamp"]:
            return base64.b64decode(kept["bundle"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _keep(entry: str, carried: Sequence[str], packed: bytes, modules: Iterable[Module]) -> None:
    """Keep a fresh bundle for the next runs (whole or not at all, for runs that read it meanwhile);
    nothing is kept where the cache cannot be written."""
    target = _cache_file(entry, carried)
    if target is None:
        return
    try:
        stamp = _stamp(_sources(modules))
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, json.dumps({"stamp": stamp, "bundle": base64.b64encode(packed).decode("ascii")}))
    except (OSError, InputError):
        pass


_packed: dict[tuple[str, frozenset[str]], bytes] = {}
_packing = threading.Lock()


def bundle(entry: str, carried: Sequence[str] = ()) -> bytes:
    """:func:`pack`, once per entry module and carried modules in this process (the hosts' threads
    that ask at once wait for the one that packs), and kept between runs (:func:`cache_dir`)."""
    key = (entry, frozenset(carried))
    with _packing:
        if key not in _packed:
            names = sorted(key[1])
            kept = _kept(entry, names)
            if kept is None:
                kept, modules = _pack(entry, names)
                _keep(entry, names, kept, modules)
            _packed[key] = kept
        return _packed[key]
