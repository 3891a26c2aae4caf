"""What NCCL reads besides the environment: its configuration files, and the network plugins the
dynamic loader would give it.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Sink, Unavailable, read_text, run_command
from preflight.node.masking import mask_env

if TYPE_CHECKING:
    from collections.abc import Mapping

    JsonDict = dict[str, Any]

# Variables of the job's own environment that change what this probe finds (where NCCL's
# configuration file and network plugin are): the controller passes them when the user sets them.
JOB_ENV_USED = ("LD_LIBRARY_PATH", "NCCL_CONF_FILE", "NCCL_NET_PLUGIN")


def parse_nccl_conf(text: str) -> tuple[dict[str, str], list[str]]:
    """An NCCL configuration file as NCCL itself reads it: a line is split at its first ``=``,
    nothing is trimmed, ``#`` lines and lines without ``=`` are skipped, and the first setting of
    a name wins (NCCL sets each with ``setenv(..., 0)``). Returns the settings and the names NCCL
    sets but never reads (a space in the name: ``NCCL_DEBUG = INFO``)."""
    entries: dict[str, str] = {}
    unread: list[str] = []
    for line in text.split("\n"):
        if line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        if not name:
            continue
        if name != name.strip() or any(c.isspace() for c in name):
            unread.append(name)
            continue
        entries.setdefault(name, value)
    return entries, unread


_LDCONFIG_RE = re.compile(r"^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*)$")


def parse_ldconfig_cache(text: str) -> list[tuple[str, str, str]]:
    """``ldconfig -p`` -> (library name, flags, path) for every cached library."""
    found: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        match = _LDCONFIG_RE.match(line)
        if match:
            found.append((match.group(1), match.group(2), match.group(3).strip()))
    return found


def nccl_plugin_names(plugin: str | None) -> list[str]:
    """The libraries NCCL tries for its network plugin: ``NCCL_NET_PLUGIN`` as a library name or
    as the suffix of ``libnccl-net-<suffix>.so``; ``none`` loads none; unset, ``libnccl-net.so``."""
    if plugin is None or plugin == "":
        return ["libnccl-net.so"]
    if plugin.lower() == "none":
        return []
    return [plugin, f"libnccl-net-{plugin}.so"]


def _home_directory() -> str | None:
    """The home directory NCCL reads ``.nccl.conf`` from: the user's entry, not ``$HOME``."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        return None


def _ldconfig_cache() -> list[tuple[str, str, str]]:
    tool = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.access(p, os.X_OK)), None
    )
    if tool is None:
        return []
    try:
        return parse_ldconfig_cache(run_command([tool, "-p"]))
    except Unavailable:
        return []


# Where the dynamic loader looks after LD_LIBRARY_PATH and its cache.
LOADER_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")


def nccl_facts(environ: Mapping[str, str], home: str | None) -> JsonDict:
    """The configuration NCCL reads besides the environment, and its network plugins."""
    conf_files: list[JsonDict] = []
    user_file = environ.get("NCCL_CONF_FILE") or (os.path.join(home, ".nccl.conf") if home else None)
    for role, path in (("user", user_file), ("system", "/etc/nccl.conf")):
        if path is None:
            continue
        text = read_text(path)
        entry: JsonDict = {"role": role, "path": path, "present": text is not None}
        if text is not None:
            settings, unread = parse_nccl_conf(text)
            entry["settings"] = mask_env(settings)
            entry["unread"] = unread
        conf_files.append(entry)
    library_dirs = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    cache = _ldconfig_cache()
    found: dict[str, str] = {}  # path -> name
    for directory in [*library_dirs, *LOADER_DEFAULT_DIRS]:
        for path in sorted(glob.glob(os.path.join(glob.escape(directory), "libnccl-net*.so*"))):
            found.setdefault(path, os.path.basename(path))
    for name, _, path in cache:
        if name.startswith("libnccl-net"):
            found.setdefault(path, name)
    wanted = nccl_plugin_names(environ.get("NCCL_NET_PLUGIN"))
    loaded = None
    for name in wanted:
        if "/" in name:
            loaded = name if os.path.exists(name) else None
        else:
            places = [os.path.join(d, name) for d in library_dirs]
            places += [path for cached, _, path in cache if cached == name]
            places += [os.path.join(d, name) for d in LOADER_DEFAULT_DIRS]
            loaded = next((p for p in places if os.path.exists(p)), None)
        if loaded is not None:
            break
    return {
        "conf_files": conf_files,
        "net_plugins": [{"name": name, "path": path} for path, name in sorted(found.items())],
        "net_plugin_wanted": wanted,
        "net_plugin": loaded,
    }


def gather_nccl(sink: Sink) -> None:
    environ = dict(os.environ)
    job_env = sink.options.get("job_env")
    if isinstance(job_env, dict):
        environ.update({k: str(v) for k, v in job_env.items() if k in JOB_ENV_USED})
    sink.facts["nccl"] = nccl_facts(environ, _home_directory())
