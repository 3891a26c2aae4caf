"""Cheap Python environments for lab nodes: a new venv that reuses a base environment's
packages, with some package versions changed, extra packages added or packages hidden.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from .cluster import BASE_MOUNT

_PATHS_SCRIPT = """
import json, sys, sysconfig
new = {"base": sys.argv[1], "platbase": sys.argv[1]}
print(json.dumps({
    "purelib": sysconfig.get_path("purelib"),
    "platlib": sysconfig.get_path("platlib"),
    "new_site": sysconfig.get_path("purelib", vars=new),
}))
"""

# Imported from a .pth file at interpreter start. It replaces the standard path finder with
# one that neither imports nor reports the metadata of the hidden packages.
_HIDE_MODULE = '''"""Hides installed packages from this environment (a lab node's drifted env)."""

import re
import sys
from importlib.machinery import PathFinder

HIDDEN = frozenset({hidden!r})


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


class HidingPathFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if _norm(fullname.partition(".")[0]) in HIDDEN:
            return None
        return PathFinder.find_spec(fullname, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        for dist in PathFinder.find_distributions(*args, **kwargs):
            if _norm(dist.metadata["Name"] or "") not in HIDDEN:
                yield dist

    @classmethod
    def invalidate_caches(cls):
        PathFinder.invalidate_caches()


sys.meta_path[:] = [HidingPathFinder if f is PathFinder else f for f in sys.meta_path]
'''


def _normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _site_paths(base_python: Path, new_env: Path) -> dict[str, str]:
    out = subprocess.run(
        [str(base_python), "-c", _PATHS_SCRIPT, str(new_env)],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    paths: dict[str, str] = json.loads(out)
    return paths


def _write_dist_info(site: Path, name: str, version: str) -> None:
    # The directory name escapes '-' as '_' (the wheel spec); the METADATA keeps the name.
    dist_info = site / f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (dist_info / "INSTALLER").write_text("pflab\n")
    (dist_info / "RECORD").write_text("")


def derive_env(
    path: Path,
    base: Path,
    *,
    packages: Mapping[str, str] | None = None,
    hide: Sequence[str] = (),
) -> Path:
    """Makes a venv at path whose packages are base's, except that `packages` (name ->
    version) report those versions (or exist, if base lacks them: metadata only, nothing to
    import) and the distributions or top-level modules named in `hide` are absent.

    Anything base points at must live outside /tmp, which lab nodes hide; path itself may be
    under /tmp, since a node mounts its environment before hiding /tmp.
    """
    base_python = base / "bin" / "python"
    if not base_python.exists():
        raise FileNotFoundError(f"no interpreter at {base_python}")
    if path.exists() and any(path.iterdir()):
        raise FileExistsError(f"{path} exists and is not empty")
    path = path.absolute()
    paths = _site_paths(base_python, path)
    subprocess.run(
        [str(base_python), "-m", "venv", "--without-pip", str(path)],
        capture_output=True,
        check=True,
        timeout=120,
    )
    site = Path(paths["new_site"])
    # addsitedir (not a plain path line) so that base's own .pth files run too, such as
    # editable installs; base comes after this env's site-packages, which therefore wins.
    # Inside a lab node the base may be hidden (a checkout under /tmp): then it is reached
    # where every node mounts the lab's base environment.
    chain = []
    for key in dict.fromkeys(("purelib", "platlib")):
        real = paths[key]
        if key == "platlib" and real == paths["purelib"]:
            continue
        try:
            in_node = str(Path(BASE_MOUNT) / Path(real).relative_to(base.absolute()))
        except ValueError:  # not inside base (a system Python): no other way in
            in_node = real
        chain.append(
            f"import os, site; site.addsitedir({real!r} if os.path.isdir({real!r}) else {in_node!r})"
        )
    (site / "_pflab_base.pth").write_text("\n".join(chain) + "\n")
    for name, version in (packages or {}).items():
        _write_dist_info(site, name, version)
    if hide:
        hidden = sorted({_normalize(name) for name in hide})
        (site / "_pflab_hide.py").write_text(_HIDE_MODULE.format(hidden=hidden))
        (site / "_pflab_hide.pth").write_text("import _pflab_hide\n")
    return path
